// `kvledger calc` and `kvledger kv-bytes`: offline calculators on lib/cost_model.
#include <cstdio>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "client/commands.h"
#include "client/flag_set.h"
#include "client/json_writer.h"
#include "lib/cost_model/alpha_calculator.h"
#include "lib/cost_model/kv_capacity.h"
#include "lib/cost_model/number_format.h"
#include "lib/profiles/profile_catalog.h"

namespace kvledger::cli {
namespace {

std::string Speedup(const std::optional<double>& s) {
  return s ? absl::StrFormat("%.4fx", *s) : std::string("unbounded");
}

// True when the decimal text states a value above 1 that its nearest double (1) would hide.
bool DecimalAboveOne(absl::string_view text) {
  const size_t point = text.find('.');
  absl::string_view whole = text.substr(0, point);
  while (!whole.empty() && whole.front() == '0') whole.remove_prefix(1);
  if (whole.size() > 1 || (!whole.empty() && whole != "1")) return true;
  if (whole.empty() || point == absl::string_view::npos) return false;
  return text.substr(point + 1).find_first_not_of('0') != absl::string_view::npos;
}

// The calculator names its inputs after their fields ("prompt_tokens = 0: ..."); the user typed
// flags, so the message names the flag ("--prompt-tokens = 0: ...").
std::string FlagMessage(absl::string_view message) {
  size_t end = 0;
  while (end < message.size() && (absl::ascii_islower(message[end]) || message[end] == '_')) ++end;
  if (end == 0 || !absl::StartsWith(message.substr(end), " = ")) return std::string(message);
  return absl::StrCat("--", absl::StrReplaceAll(message.substr(0, end), {{"_", "-"}}), message.substr(end));
}

}  // namespace

int Calc(const Args& args) {
  std::string alpha_text;
  std::optional<double> window_fraction, beta, overhead;
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
  flags.Switch("json", &json, "print one JSON object");
  if (int code = ParseOrExit(flags, args, "calc"); code >= 0) return code;

  AlphaInputs in;
  if (!absl::SimpleAtod(alpha_text, &in.alpha)) {
    std::cerr << "kvledger calc: --alpha = \"" << alpha_text << "\": must be a number\n";
    return 2;
  }
  if (FloorDecimalTimes(alpha_text, 1) && DecimalAboveOne(alpha_text)) {
    std::cerr << "kvledger calc: --alpha = " << alpha_text << ": must be in [0, 1]\n";
    return 2;
  }
  if (prompt_tokens && *prompt_tokens >= 1 && *prompt_tokens <= kMaxTokens) {
    // floor(alpha N) from the digits as typed: exact, no tolerance (docs/cost-model.md §4.1).
    if (auto match = FloorDecimalTimes(alpha_text, *prompt_tokens)) in.match_tokens = static_cast<uint64_t>(*match);
  }
  if (attention == "full") {
    in.kind = MixerKind::kFullCausal;
  } else if (attention == "swa") {
    in.kind = MixerKind::kSlidingWindow;
  } else if (attention == "recurrent") {
    in.kind = MixerKind::kLinear;
  } else {
    std::cerr << "kvledger calc: --attention = \"" << attention << "\": must be full, swa or recurrent\n";
    return 2;
  }
  in.window_fraction = window_fraction;
  in.window_tokens = window;
  in.prompt_tokens = prompt_tokens;
  in.checkpoint_tokens = checkpoint;
  in.beta = beta;
  in.overhead = overhead;
  auto result = CalculateAlpha(in);
  if (!result.ok()) {
    std::cerr << "kvledger calc: " << FlagMessage(result.status().message()) << "\n";
    return 2;
  }
  const AlphaResult& r = *result;
  if (json) {
    JsonObject o;
    o.Number("attention_remaining", r.attention_remaining).Number("attention_speedup", r.attention_speedup);
    if (r.block_remaining) o.Number("block_remaining", *r.block_remaining).Number("block_speedup", r.block_speedup);
    if (overhead) o.Number("e2e_speedup", r.e2e_speedup);
    if (r.aligned_tokens) o.Integer("aligned_tokens", *r.aligned_tokens).Integer("replay_tokens", *r.replay_tokens);
    std::cout << o.str() << "\n";
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
  const uint64_t s = sequences.value_or(1);

  Uint128 kv_bytes, bytes_per_token, fixed_bytes = 0;
  if (!model.empty()) {
    if (layers || kv_heads || head_dim || bytes_per_element) {
      std::cerr << "kvledger kv-bytes: --model: give either --model or an explicit shape, not both\n";
      return 2;
    }
    auto catalog = ProfileCatalog::LoadFile(profiles);
    if (!catalog.ok()) {
      std::cerr << "kvledger kv-bytes: " << catalog.status().message() << "\n";
      return 2;
    }
    const Profile* p = catalog->Find(model);
    if (p == nullptr) {
      std::cerr << "kvledger kv-bytes: --model = \"" << model << "\": no profile of that name\n";
      return 2;
    }
    // A profile's per-sequence bytes fit 2^115 for any 64-bit token count (docs/cost-model.md §7);
    // only the product with --sequences can overflow.
    const auto total = CheckedProduct({CacheBytes(p->shape(), *tokens), s});
    if (!total) {
      std::cerr << "kvledger kv-bytes: --tokens " << *tokens << " x --sequences " << s
                << ": the cache would exceed 2^128 bytes; check the inputs\n";
      return 2;
    }
    kv_bytes = *total;
    bytes_per_token = BytesPerCachedToken(p->shape());
    fixed_bytes = Uint128{StateBytesPerSequence(p->shape())} * s;
  } else {
    if (!layers || !kv_heads || !head_dim || !bytes_per_element) {
      std::cerr << "kvledger kv-bytes: --layers, --kv-heads, --head-dim and --bytes-per-element: required without --model\n";
      return 2;
    }
    const KvShape shape{*layers, *kv_heads, *head_dim, *bytes_per_element};
    const auto per_token = KvBytesPerToken(shape);
    const auto total = per_token ? CheckedProduct({*per_token, s, *tokens}) : std::nullopt;
    if (!total) {
      std::cerr << "kvledger kv-bytes: 2 x --layers " << *layers << " x --kv-heads " << *kv_heads
                << " x --head-dim " << *head_dim << " x --bytes-per-element " << *bytes_per_element
                << " x --sequences " << s << " x --tokens " << *tokens
                << ": exceeds 2^128 bytes; check the inputs\n";
      return 2;
    }
    bytes_per_token = *per_token;
    kv_bytes = *total;
  }
  std::optional<Uint128> max_tokens;
  if (budget) max_tokens = MaxCachedTokens(*budget, reserved.value_or(0), fixed_bytes, bytes_per_token);
  if (json) {
    JsonObject o;
    o.Integer("kv_bytes", kv_bytes).Integer("bytes_per_token", bytes_per_token);
    if (!model.empty()) o.Integer("state_bytes", fixed_bytes);
    if (max_tokens) o.Integer("max_tokens", *max_tokens);
    std::cout << o.str() << "\n";
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
