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

// Every input of a calculator (lib/wire/calculators.h) as a flag named after its field.
template <typename Params>
void RegisterInputs(FlagSet& flags, const std::vector<CalculatorInput<Params>>& inputs, Params& params) {
  for (const auto& input : inputs) {
    const std::string flag = FlagName(input.field).substr(2);
    std::visit(
        [&](auto member) {
          using T = std::decay_t<decltype(params.*member)>;
          if constexpr (std::is_same_v<T, std::string>) {
            flags.String(flag.c_str(), &(params.*member), input.help, input.required);
          } else if constexpr (std::is_same_v<T, std::optional<double>>) {
            flags.Double(flag.c_str(), &(params.*member), input.help, input.required);
          } else {
            flags.Uint64(flag.c_str(), &(params.*member), input.help, input.required);
          }
        },
        input.member);
  }
}

int Calc(const Args& args) {
  CalcParams params;
  bool json = false;
  FlagSet flags("calc", "What a token hit ratio alpha buys: attention, block and end-to-end remaining work and speedups.");
  RegisterInputs(flags, CalcInputs(), params);
  flags.Switch("json", &json, "print one JSON object");
  if (int code = ParseOrExit(flags, args, "calc"); code >= 0) return code;

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
  std::cout << absl::StrFormat("%-22s %s\n", "alpha", params.alpha);
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
  if (params.overhead) std::cout << absl::StrFormat("%-22s %s\n", "end-to-end speedup", Speedup(r.e2e_speedup));
  if (params.queue_share || params.decode_share) {
    std::cout << absl::StrFormat("%-22s %s  (bound %s)\n", "whole-request speedup", Speedup(r.request_speedup),
                                 Speedup(r.request_speedup_bound));
  }
  return 0;
}

int KvBytes(const Args& args) {
  KvBytesParams params;
  std::string profiles;
  bool json = false;
  FlagSet flags("kv-bytes",
                "KV cache bytes for S sequences of T cached tokens, and how many tokens fit a memory budget.\n"
                "Give an explicit shape (--layers --kv-heads --head-dim --bytes-per-element) or --model.");
  RegisterInputs(flags, KvBytesInputs(), params);
  flags.String("profiles", &profiles, "profile file adding or overriding built-in profiles (with --model)");
  flags.Switch("json", &json, "print one JSON object");
  if (int code = ParseOrExit(flags, args, "kv-bytes"); code >= 0) return code;
  auto catalog = ProfileCatalog::LoadFile(params.model.empty() ? std::string() : profiles);
  if (!catalog.ok()) {
    std::cerr << "kvledger kv-bytes: " << catalog.status().message() << "\n";
    return 2;
  }
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
  if (!params.model.empty()) {
    std::cout << absl::StrFormat("%-20s %s\n", "recurrent state", Uint128ToString(fixed_bytes));
  }
  if (max_tokens) {
    std::cout << absl::StrFormat("%-20s %s (sum over all sequences)\n", "max cached tokens",
                                 Uint128ToString(*max_tokens));
  }
  return 0;
}

}  // namespace kvledger::cli
