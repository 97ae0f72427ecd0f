// Plan(): a trace replayed through simulated cache tiers of given capacities, each request turned
// into the record an engine would have sent and costed by the same Derive() the server runs
// (docs/planning.md). Pure and deterministic.
#ifndef KVLEDGER_LIB_PLANNING_PLAN_H_
#define KVLEDGER_LIB_PLANNING_PLAN_H_

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/accounting/compute_time.h"
#include "lib/accounting/derived_figures.h"
#include "lib/capacity/use_order.h"
#include "lib/accounting/record_facts.h"
#include "lib/accounting/validation.h"
#include "lib/planning/block_cache.h"
#include "lib/planning/trace.h"
#include "lib/profiles/profile.h"

namespace kvledger {

// The simulated tiers, top first; a tier below holds what the one above evicts.
inline constexpr std::array kPlanTiers = {Tier::kDevice, Tier::kHost, Tier::kDisk};
inline constexpr size_t kPlanTierCount = kPlanTiers.size();

struct PlanConfig {
  uint64_t block_tokens = kDefaultTraceBlockTokens;
  // Tokens each tier holds (kUnlimited: never evicts); 0 for host or disk: no such tier.
  std::array<uint64_t, kPlanTierCount> capacity_tokens = {kUnlimited, 0, 0};
  // Reload bandwidth of host and disk in bytes/s (the device's is not used: a device hit reloads
  // nothing); unset: reload seconds unknown for hits from that tier.
  std::array<std::optional<double>, kPlanTierCount> bandwidth;
  // The compute-time model recompute seconds come from; unset: the profile's stated throughput.
  std::optional<ComputeTime> compute;
  // The deployment's context (prompt plus output); unset: the profile's, if it states one.
  std::optional<uint64_t> context_tokens;
  // The order each request's blocks are used in after their lookup (lib/capacity/use_order.h).
  UseOrder use_order = UseOrder::kTailFirst;

  // Blocks a tier holds: floor(capacity / block_tokens) (a partial last block takes a whole block).
  uint64_t CapacityBlocks(size_t tier) const;
  // Whether the tier is simulated (the device always is), and whether it has a finite capacity.
  bool HasTier(size_t tier) const { return tier == 0 || capacity_tokens[tier] > 0; }
  bool Finite(size_t tier) const { return HasTier(tier) && capacity_tokens[tier] != kUnlimited; }
};

// Sums over requests; tokens, FLOPs and bytes exact.
struct PlanTotals {
  uint64_t requests = 0;
  uint64_t hit_requests = 0;  // logical match > 0
  Uint128 prompt_tokens = 0, logical_match_tokens = 0, reused_tokens = 0;
  Uint128 attention_baseline_flops = 0, attention_avoided_flops = 0;  // avoided at the reused boundary
  Uint128 prefill_baseline_flops = 0, prefill_avoided_flops = 0;
  Uint128 reused_bytes = 0;
  // Over the hits whose reload seconds and recompute estimate are both known (`compared` of them):
  uint64_t compared = 0;
  double reload_seconds = 0, recompute_seconds = 0;
  uint64_t cheaper_recomputed = 0;  // reload slower than recomputing the reused prefix

  void Add(const RecordFigures& figures);
  void Add(const PlanTotals& other);
  double TokenHitRatio() const;       // logical match / prompt tokens
  double AttentionAvoided() const;    // avoided / baseline attention FLOPs
  double PrefillAvoided() const;      // avoided / baseline prefill FLOPs
};

// The requests an engine of that context refuses (docs/planning.md): not looked up, not cached, not
// costed, counted here.
struct BeyondContext {
  uint64_t requests = 0;
  Uint128 prompt_tokens = 0;
  int64_t longest_prompt_tokens = 0;
  size_t first_line = 0;  // the trace line of the first one; 0 when none
};

// Whether an engine serving `context_tokens` refuses a prompt of `prompt_tokens`: it leaves no room
// for one output token (vLLM's input check).
inline bool BeyondContextWindow(int64_t prompt_tokens, uint64_t context_tokens) {
  return static_cast<uint64_t>(prompt_tokens) + 1 > context_tokens;
}

// OK when `value` is a context a plan can apply (the profile's rule); INVALID_ARGUMENT naming `name`.
absl::Status CheckContextTokens(absl::string_view name, uint64_t value);

struct PlanResult {
  PlanConfig config;
  std::optional<uint64_t> context_tokens;  // the context applied: the config's, else the profile's
  BeyondContext beyond_context;
  std::array<Uint128, kPlanTierCount> capacity_bytes{};  // KV bytes each tier's capacity takes
  std::array<PlanTotals, kTierCount> by_tier;  // by the record's tier: none, device, host, disk, mixed
  PlanTotals total;
  // The matched tokens each tier served, counted block by block (a mixed hit adds to several).
  std::array<Uint128, kPlanTierCount> matched_tokens_from{};
};

// One simulated request as the record an engine would send (`facts.model` views the profile's name).
using PlannedRecordVisitor = std::function<void(const TraceRequest&, const RecordFacts&)>;

// Replays `trace` (in order) through the tiers of `config` and costs every request with `profile`,
// leaving out (and counting) the requests beyond the context.
// INVALID_ARGUMENT naming the trace line when the cost model refuses a request (a prompt past its
// limits). `each`, when given, sees every request's record in order.
absl::StatusOr<PlanResult> Plan(const std::vector<TraceRequest>& trace, const Profile& profile,
                                const PlanConfig& config, const PlannedRecordVisitor& each = nullptr);

// Plan() of every config, in order, with the same results. Configs that differ only in their tiers'
// capacities and bandwidths share one pass over one exact reuse stack (lib/capacity): by LRU's
// inclusion property a request's match at every capacity comes from its blocks' stack depths, and
// exclusive tiers are that stack cut at the running sums of their capacities (with host or disk tiers
// only where blocks are used tail first, when a block's own depth is its prefix depth). Others are
// simulated one by one.
absl::StatusOr<std::vector<PlanResult>> PlanAll(const std::vector<TraceRequest>& trace, const Profile& profile,
                                                const std::vector<PlanConfig>& configs);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_PLANNING_PLAN_H_
