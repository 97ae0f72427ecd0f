// `kvledger capacity`: what each capacity of a server's --capacity_ladder would have bought for the
// records that carry prefix block ids (the CapacityCurve RPC, docs/cost-model.md §14). The JSON is
// /api/v1/capacity's.
#include <algorithm>
#include <iostream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/commands.h"
#include "client/connection.h"
#include "client/flag_set.h"
#include "client/tier_table.h"
#include "lib/capacity/second_tier.h"
#include "lib/wire/proto_json.h"

namespace kvledger::cli {
namespace {

std::string CapacityText(const v1::CapacityPoint& p) {
  return p.has_capacity_tokens() ? std::to_string(p.capacity_tokens()) : std::string("inf");
}

std::string GibText(const v1::CapacityPoint& p) {
  return p.has_capacity_bytes() ? absl::StrFormat("%.1f GiB", p.capacity_bytes() / (1024.0 * 1024 * 1024))
                                : std::string("-");
}

// One model: its records, then a row per capacity with what the step up from the row above adds.
void PrintModel(const v1::ModelCapacityCurve& m) {
  std::cout << absl::StrFormat("%s: %d records replayed, %d prompt tokens", m.model(), m.requests(), m.prompt_tokens());
  if (m.untracked_requests() > 0) std::cout << absl::StrFormat("; %d not replayed (past --capacity_caches)", m.untracked_requests());
  if (m.sampled_requests() > 0) {
    std::cout << absl::StrFormat("; %d estimated from a sample of their cache's blocks (past its share of "
                                 "--capacity_memory_bytes)", m.sampled_requests());
  }
  std::cout << "\n"
            << absl::StrFormat("%14s %12s %10s %10s %10s %14s %12s\n", "capacity", "KV", "token hit", "attention",
                               "prefill", "+prefill/step", "recompute s");
  double previous = 0;
  for (const v1::CapacityPoint& p : m.points()) {
    const std::string seconds =
        p.has_recompute_avoided_seconds() ? absl::StrFormat("%.1f", p.recompute_avoided_seconds()) : std::string("-");
    std::cout << absl::StrFormat("%14s %12s %9.2f%% %9.2f%% %9.2f%% %13.2f%% %12s\n", CapacityText(p), GibText(p),
                                 100 * p.token_hit_ratio(), 100 * p.attention_avoided_ratio(),
                                 100 * p.prefill_avoided_ratio(), 100 * (p.prefill_avoided_ratio() - previous), seconds);
    previous = p.prefill_avoided_ratio();
  }
}

// With today's capacity on the ladder: what the capacity twice as large (or the next one above it)
// would add, and what half of it would cost, in prefill FLOPs avoided. Nothing when today's capacity
// is not a capacity of the ladder.
void PrintToday(const v1::ModelCapacityCurve& m, uint64_t today) {
  const v1::CapacityPoint* now = nullptr;
  for (const auto& p : m.points()) {
    if (p.has_capacity_tokens() && p.capacity_tokens() == today) now = &p;
  }
  if (now == nullptr) {
    std::cout << absl::StrFormat("today's capacity %d tokens is not on the server's --capacity_ladder\n", today);
    return;
  }
  auto at_least = [&](uint64_t tokens) -> const v1::CapacityPoint* {
    for (const auto& p : m.points()) {
      if (!p.has_capacity_tokens() || p.capacity_tokens() >= tokens) return &p;  // unlimited is last
    }
    return nullptr;
  };
  auto at_most = [&](uint64_t tokens) -> const v1::CapacityPoint* {
    const v1::CapacityPoint* found = nullptr;
    for (const auto& p : m.points()) {
      if (p.has_capacity_tokens() && p.capacity_tokens() <= tokens) found = &p;
    }
    return found;
  };
  const v1::CapacityPoint* larger = at_least(2 * today);
  if (larger != nullptr && larger != now) {
    std::cout << absl::StrFormat("growing the cache from %d to %s tokens would raise the prefill FLOPs avoided from "
                                 "%.2f%% to %.2f%% (+%.2f points)\n", today, CapacityText(*larger),
                                 100 * now->prefill_avoided_ratio(), 100 * larger->prefill_avoided_ratio(),
                                 100 * (larger->prefill_avoided_ratio() - now->prefill_avoided_ratio()));
  }
  const v1::CapacityPoint* smaller = at_most(today / 2);
  if (smaller != nullptr) {
    std::cout << absl::StrFormat("shrinking it to %s tokens would lower them to %.2f%% (-%.2f points)\n",
                                 CapacityText(*smaller), 100 * smaller->prefill_avoided_ratio(),
                                 100 * (now->prefill_avoided_ratio() - smaller->prefill_avoided_ratio()));
  }
}

// The tier sizes --tier lists, each one of the server's; INVALID_ARGUMENT naming the one that is not.
absl::Status CheckTiersListed(const v1::CapacityCurve& curve, const std::vector<TierSize>& only) {
  for (const TierSize& t : only) {
    bool found = false;
    for (const auto& m : curve.models()) {
      for (const auto& p : m.tiers()) found = found || (p.tier() == TierLabel(t.kind) && p.tier_bytes() == t.bytes);
    }
    if (!found && curve.models_size() > 0) {
      return absl::InvalidArgumentError(absl::StrCat("--tier: the ", TierLabel(t.kind), " tier of ", t.bytes,
                                                     " bytes is not one of the server's --capacity_tiers"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

int Capacity(const Args& args) {
  Connection connection;
  std::string model;
  std::optional<uint64_t> today;
  bool json = false;
  std::string tier_text;
  FlagSet flags("capacity",
                "What each cache capacity of the server's --capacity_ladder would have bought for the records\n"
                "that carry prefix_block_ids: token hit, attention and prefill FLOPs avoided (at the boundary\n"
                "the model resumes at), and prefill seconds where the live compute model was ready. Each\n"
                "capacity is an LRU cache of that many tokens replaying the same requests (docs/cost-model.md).");
  connection.Register(flags);
  flags.String("model", &model, "one model's curve (default: every model with one)");
  flags.Switch("json", &json, "print the curve as /api/v1/capacity does");
  flags.Uint64("today", &today, "the capacity the cache has today (one of the ladder's, in tokens): what doubling or "
               "halving it would change");
  flags.String("tier", &tier_text, "KIND:SIZE,...: only these of the server's --capacity_tiers (e.g. host:1TiB); "
               "every one by default");
  if (int code = ParseOrExit(flags, args, "capacity"); code >= 0) return code;
  auto only = ParseTierLadder(tier_text, "--tier");
  if (!only.ok()) {
    std::cerr << "kvledger capacity: " << only.status().message() << "\n";
    return kExitBadInput;
  }
  grpc::ClientContext context;
  connection.SetDeadline(context);
  v1::CapacityCurveRequest request;
  request.set_model(model);
  v1::CapacityCurve curve;
  const grpc::Status status = connection.Stub()->CapacityCurve(&context, request, &curve);
  if (!status.ok()) {
    std::cerr << "kvledger capacity: " << DescribeRpcError(status, connection) << "\n";
    return RpcExitCode(status);
  }
  if (json) {
    std::cout << ProtoToJson(curve, /*null_unset=*/true) << "\n";
    return kExitOk;
  }
  if (absl::Status listed = CheckTiersListed(curve, *only); !listed.ok()) {
    std::cerr << "kvledger capacity: " << listed.message() << "\n";
    return kExitBadInput;
  }
  if (curve.models_size() == 0) std::cout << "no capacity curve yet: no record carried prefix_block_ids\n";
  for (int i = 0; i < curve.models_size(); ++i) {
    if (i > 0) std::cout << "\n";
    PrintModel(curve.models(i));
    if (today) PrintToday(curve.models(i), *today);
    PrintTierTable(std::cout, curve.models(i), *only);
  }
  return kExitOk;
}

}  // namespace kvledger::cli
