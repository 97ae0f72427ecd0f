// `kvledger advise`: reload or recompute, asked of the server's Advise RPC before scheduling.
#include <iostream>

#include "absl/strings/str_format.h"
#include "client/commands.h"
#include "client/connection.h"
#include "client/flag_set.h"
#include "lib/accounting/compute_time.h"
#include "lib/wire/advice_proto.h"

namespace kvledger::cli {
namespace {

std::string Seconds(bool known, double seconds) {
  return known ? absl::StrFormat("%.6f s", seconds) : std::string("unknown");
}

std::string RateText(const v1::Rate& rate, const char* unit) {
  if (!rate.has_value()) return "unknown (basis none)";
  if (rate.basis() == v1::BASIS_LIVE || rate.basis() == v1::BASIS_FLEET) {
    return absl::StrFormat("%.4g %s (%s: %d records, weight %.3g)", rate.value(), unit,
                           BasisLabel(static_cast<Basis>(rate.basis())), rate.samples(), rate.weight());
  }
  return absl::StrFormat("%.4g %s (profile)", rate.value(), unit);
}

void PrintAdvice(const v1::Advice& advice) {
  std::cout << absl::StrFormat("%-22s %s%s\n", "recommendation",
                               advice.recommendation().empty() ? "unknown (a rate is missing)" : advice.recommendation(),
                               advice.recommended_replica().empty()
                                   ? ""
                                   : absl::StrCat(" on replica ", advice.recommended_replica()));
  if (advice.has_saving_seconds()) std::cout << absl::StrFormat("%-22s %.6f s\n", "saving", advice.saving_seconds());
  if (advice.has_gain_seconds()) {
    std::cout << absl::StrFormat(
        "%-22s %.6f s over the next choice%s\n", "gain", advice.gain_seconds(),
        advice.tie() ? absl::StrFormat(": a tie (within the estimate's %.0f %% error; the simpler choice stands)",
                                       100 * kRecomputeEstimateError)
                     : "");
  }
  std::cout << absl::StrFormat("%-22s %s\n", "compute rate", RateText(advice.compute(), "FLOP/s"));
  std::cout << absl::StrFormat("%-22s %s\n", "recompute all",
                               Seconds(advice.has_recompute_all_seconds(), advice.recompute_all_seconds()));
  for (const auto& c : advice.candidates()) {
    std::cout << absl::StrFormat("\n%s:%d (reusable %d tokens, %s bytes)\n",
                                 TierLabel(static_cast<Tier>(c.tier())), c.logical_match_tokens(), c.reused_tokens(),
                                 c.reused_bytes());
    std::cout << absl::StrFormat("  %-20s %s\n", "bandwidth", RateText(c.bandwidth(), "bytes/s"));
    std::cout << absl::StrFormat("  %-20s %s\n", "reload", Seconds(c.has_reload_seconds(), c.reload_seconds()));
    std::cout << absl::StrFormat("  %-20s %s\n", "recompute instead",
                                 Seconds(c.has_recompute_seconds(), c.recompute_seconds()));
    std::cout << absl::StrFormat("  %-20s %s\n", "prefill with reload",
                                 Seconds(c.has_prefill_seconds(), c.prefill_seconds()));
    if (c.has_partial_reload_tokens()) {
      std::cout << absl::StrFormat("  %-20s %s (reloading the first %d tokens, computing the rest)\n",
                                   "prefill, partial", Seconds(true, c.partial_prefill_seconds()),
                                   c.partial_reload_tokens());
    }
    if (!c.replica().empty() || c.has_wait_seconds()) {
      std::cout << absl::StrFormat("  %-20s %s, wait %s\n", "replica", c.replica().empty() ? "-" : c.replica(),
                                   Seconds(c.has_wait_seconds(), c.wait_seconds()));
    }
    std::cout << absl::StrFormat("  %-20s %s\n", "break-even",
                                 c.has_break_even_tokens()
                                     ? absl::StrCat("reloading pays from ", c.break_even_tokens(), " reusable tokens on")
                                     : "unknown (a rate is missing) or never");
    std::cout << absl::StrFormat("  %-20s %s%s\n", "expected (rank)", Seconds(c.has_expected_seconds(), c.expected_seconds()),
                                 c.rank() > 0 ? absl::StrCat(" (", c.rank(), ", ", c.choice(), ")") : " (not ranked)");
  }
}

}  // namespace

int Advise(const Args& args) {
  Connection connection;
  std::string model;
  std::optional<int64_t> prompt_tokens;
  std::vector<std::string> candidates;
  bool json = false;
  FlagSet flags("advise",
                "Reload or recompute: for a request about to be scheduled, the estimated seconds of reloading\n"
                "each candidate's cached prefix or recomputing, from the server's live rates (or the profile's).");
  flags.String("model", &model, "model name", true);
  flags.Int64("prompt-tokens", &prompt_tokens, "prompt length N", true);
  flags.Repeated("candidate", &candidates,
                 "TIER:MATCH_TOKENS[:RECOVERABLE_TOKENS], a tier holding a prefix (repeatable), e.g. host:3000;\n"
                 "or replica=ID,tier=TIER,tokens=N[,recoverable=N][,wait=SECONDS] to rank replicas");
  flags.Switch("json", &json, "print one JSON object");
  connection.Register(flags);
  if (int code = ParseOrExit(flags, args, "advise"); code >= 0) return code;

  v1::AdviceRequest request;
  request.set_model(model);
  request.set_prompt_tokens(*prompt_tokens);
  for (const auto& text : candidates) {
    auto candidate = ParseCandidate(text, "--candidate");
    if (!candidate.ok()) {
      std::cerr << "kvledger advise: " << candidate.status().message() << "\n";
      return kExitBadInput;
    }
    *request.add_candidates() = *candidate;
  }
  grpc::ClientContext context;
  connection.SetDeadline(context);
  v1::Advice advice;
  const grpc::Status status = connection.Stub()->Advise(&context, request, &advice);
  if (!status.ok()) {
    std::cerr << "kvledger advise: " << DescribeRpcError(status, connection) << "\n";
    return RpcExitCode(status);
  }
  if (json) {
    std::cout << AdviceToJson(advice) << "\n";
  } else {
    PrintAdvice(advice);
  }
  return kExitOk;
}

}  // namespace kvledger::cli
