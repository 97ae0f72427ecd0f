// `kvledger calc` and `kvledger kv-bytes`: offline calculators on lib/cost_model.
#include <cstdio>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/commands.h"
#include "client/flag_set.h"
#include "lib/wire/calculators.h"
#include "lib/cost_model/alpha_calculator.h"
#include "lib/profiles/profile_catalog.h"

namespace kvledger::cli {
namespace {

std::string Speedup(const std::optional<double>& s) {
  return s ? absl::StrFormat("%.4fx", *s) : std::string("unbounded");
}

}  // namespace

int Calc(const Args& args) {
  std::string alpha_text;
  std::optional<double> window_fraction, beta, overhead, queue_share, decode_share;
  std::optional<uint64_t> window, prompt_tokens, checkpoint;
  std::string attention = "full";
  bool json = false;
  FlagSet flags("calc", "What a token hit ratio alpha buys: attention, block and end-to-end remaining work and speedups.");
  flags.String("alpha", &alpha_text, "logical hit ratio in [0, 1]; a decimal is taken exactly as typed", true);
  flags.String("attention", &attention, "full | swa | recurrent (default full)");
  flags.Double("window-fraction", &window_fraction, "swa: window W / prompt N");
  flags.Uint64("window", &window, "swa: window W in tokens (with --prompt-tokens)");
  flags.Uint64("prompt-tokens", &prompt_tokens, "prompt length N");
  flags.Uint64("checkpoint", &checkpoint, "recurrent: checkpoint interval C in tokens (with --prompt-tokens)");
  flags.Double("beta", &beta, "attention share of baseline prefill FLOPs, [0, 1]");
  flags.Double("overhead", &overhead, "h: reuse overheads / full-prefill time (needs --beta)");
  flags.Double("queue-share", &queue_share, "share of the request's latency spent waiting to be scheduled, [0, 1]");
  flags.Double("decode-share", &decode_share, "share of the request's latency spent decoding, [0, 1]");
  flags.Switch("json", &json, "print one JSON object");
  if (int code = ParseOrExit(flags, args, "calc"); code >= 0) return code;

  CalcParams params{alpha_text, attention,   window_fraction, beta,          overhead,
                    queue_share, decode_share, window,          prompt_tokens, checkpoint};
  auto result = RunCalc(params, FlagName);
  if (!result.ok()) {
    std::cerr << "kvledger calc: " << result.status().message() << "\n";
    return 2;
  }
  const AlphaResult& r = *result;
  if (json) {
    std::cout << CalcToJson(r, params) << "\n";
    return 0;
  }
  std::cout << absl::StrFormat("%-22s %s\n", "alpha", alpha_text);
  if (r.aligned_tokens) {
    std::cout << absl::StrFormat("%-22s %d tokens (replayed %d)\n", "resume boundary", *r.aligned_tokens,
                                 *r.replay_tokens);
  }
  std::cout << absl::StrFormat("%-22s %.6f  (avoided %.6f)\n", "attention remaining", r.attention_remaining,
                               1 - r.attention_remaining);
  std::cout << absl::StrFormat("%-22s %s\n", "attention speedup", Speedup(r.attention_speedup));
  if (r.block_remaining) {
    std::cout << absl::StrFormat("%-22s %.6f\n", "block remaining", *r.block_remaining);
    std::cout << absl::StrFormat("%-22s %s\n", "block speedup", Speedup(r.block_speedup));
  }
  if (overhead) std::cout << absl::StrFormat("%-22s %s\n", "end-to-end speedup", Speedup(r.e2e_speedup));
  if (queue_share || decode_share) {
    std::cout << absl::StrFormat("%-22s %s  (bound %s)\n", "whole-request speedup", Speedup(r.request_speedup),
                                 Speedup(r.request_speedup_bound));
  }
  return 0;
}

int KvBytes(const Args& args) {
  std::optional<uint64_t> layers, sequences, tokens, kv_heads, head_dim, bytes_per_element, budget, reserved;
  std::string model, profiles;
  bool json = false;
  FlagSet flags("kv-bytes",
                "KV cache bytes for S sequences of T cached tokens, and how many tokens fit a memory budget.\n"
                "Give an explicit shape (--layers --kv-heads --head-dim --bytes-per-element) or --model.");
  flags.String("model", &model, "profile name (MLA, sliding-window and recurrent aware)");
  flags.String("profiles", &profiles, "profile file adding or overriding built-in profiles (with --model)");
  flags.Uint64("layers", &layers, "layers L");
  flags.Uint64("sequences", &sequences, "sequences S (default 1)");
  flags.Uint64("tokens", &tokens, "cached tokens T per sequence", true);
  flags.Uint64("kv-heads", &kv_heads, "K/V heads H (never query heads)");
  flags.Uint64("head-dim", &head_dim, "head dimension D");
  flags.Uint64("bytes-per-element", &bytes_per_element, "cache dtype bytes B");
  flags.Uint64("budget-bytes", &budget, "memory budget X in bytes");
  flags.Uint64("reserved-bytes", &reserved, "bytes reserved for weights and runtime Y (default 0)");
  flags.Switch("json", &json, "print one JSON object");
  if (int code = ParseOrExit(flags, args, "kv-bytes"); code >= 0) return code;
  auto catalog = ProfileCatalog::LoadFile(model.empty() ? std::string() : profiles);
  if (!catalog.ok()) {
    std::cerr << "kvledger kv-bytes: " << catalog.status().message() << "\n";
    return 2;
  }
  KvBytesParams params{model, layers, kv_heads, head_dim, bytes_per_element, sequences, tokens, budget, reserved};
  auto result = RunKvBytes(params, *catalog, FlagName);
  if (!result.ok()) {
    std::cerr << "kvledger kv-bytes: " << result.status().message() << "\n";
    return 2;
  }
  const Uint128 kv_bytes = result->kv_bytes, bytes_per_token = result->bytes_per_token;
  const Uint128 fixed_bytes = result->state_bytes.value_or(0);
  const std::optional<Uint128> max_tokens = result->max_tokens;
  if (json) {
    std::cout << KvBytesToJson(*result) << "\n";
    return 0;
  }
  std::cout << absl::StrFormat("%-20s %s (%.3f GiB)\n", "kv bytes", Uint128ToString(kv_bytes),
                               Uint128ToDouble(kv_bytes) / (1024.0 * 1024 * 1024));
  std::cout << absl::StrFormat("%-20s %s\n", "bytes per token", Uint128ToString(bytes_per_token));
  if (!model.empty()) std::cout << absl::StrFormat("%-20s %s\n", "recurrent state", Uint128ToString(fixed_bytes));
  if (max_tokens) {
    std::cout << absl::StrFormat("%-20s %s (sum over all sequences)\n", "max cached tokens",
                                 Uint128ToString(*max_tokens));
  }
  return 0;
}

}  // namespace kvledger::cli
