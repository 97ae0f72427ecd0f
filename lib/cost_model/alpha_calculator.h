// The alpha-only calculator (`kvledger calc`, docs/operations.md): what a token hit ratio alpha buys, from
// alpha and a few shape facts, without a model profile. Continuous forms of docs/cost-model.md §3;
// the recurrent case is discrete because checkpoint alignment is.
#ifndef KVLEDGER_LIB_COST_MODEL_ALPHA_CALCULATOR_H_
#define KVLEDGER_LIB_COST_MODEL_ALPHA_CALCULATOR_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/cost_model/model_shape.h"

namespace kvledger {

// Token inputs are bounded like records: prompt_tokens, window_tokens and checkpoint_tokens in
// [1, kMaxTokens].
struct AlphaInputs {
  double alpha = 0;  // logical hit ratio in [0, 1]
  // kLinear: the matched prefix floor(alpha N) when the caller knows it exactly (e.g. from the
  // decimal digits the user typed, FloorDecimalTimes); otherwise it is computed exactly from the
  // double alpha. Must be <= prompt_tokens.
  std::optional<uint64_t> match_tokens;
  MixerKind kind = MixerKind::kFullCausal;
  std::optional<double> window_fraction;    // W / N, kSlidingWindow
  std::optional<uint64_t> window_tokens;    // W, with prompt_tokens, kSlidingWindow
  std::optional<uint64_t> prompt_tokens;    // N
  std::optional<uint64_t> checkpoint_tokens;  // C, with prompt_tokens, kLinear
  std::optional<double> beta;               // attention share of baseline prefill FLOPs, [0, 1]
  std::optional<double> overhead;           // h: reuse overheads / full-prefill time, >= 0
  // Shares of the whole request's latency without reuse spent waiting to be scheduled and decoding
  // (docs/cost-model.md §12): each in [0, 1], together <= 1; the rest is the prefill reuse acts on.
  std::optional<double> queue_share;
  std::optional<double> decode_share;
};

// Speedups are nullopt where unbounded (nothing remains to compute).
struct AlphaResult {
  double attention_remaining = 1;
  std::optional<double> attention_speedup;
  std::optional<double> block_remaining;  // with beta
  std::optional<double> block_speedup;
  std::optional<double> e2e_speedup;      // with beta and overhead
  // With queue_share or decode_share: the whole request's speedup, 1 / (q + d + (1 - q - d) x the
  // prefill remaining (e2e with overhead, else block with beta, else attention)), and its Amdahl bound
  // 1 / (q + d) were the prefill free (nullopt: unbounded).
  std::optional<double> request_speedup;
  std::optional<double> request_speedup_bound;
  std::optional<uint64_t> aligned_tokens;  // kLinear: floor(floor(alpha N) / C) C
  std::optional<uint64_t> replay_tokens;   // kLinear: floor(alpha N) - aligned_tokens
};

// How a message names an input: by its field, as the HTTP API does ("prompt_tokens"), or as the
// caller's surface calls it (the CLI's FlagName: "--prompt-tokens"). The message is made with the
// right names, never rewritten afterwards.
using InputNamer = std::string (*)(absl::string_view field);
std::string FieldName(absl::string_view field);  // the field itself

// INVALID_ARGUMENT naming the input by `name` ("prompt_tokens = 0: must be in [1, 2147483648]",
// values printed exactly as given) when a value is out of range or a required companion input
// (window for sliding window, checkpoint and prompt tokens for recurrent, beta for overhead) is
// missing.
absl::StatusOr<AlphaResult> CalculateAlpha(const AlphaInputs& inputs, InputNamer name = FieldName);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_COST_MODEL_ALPHA_CALCULATOR_H_
