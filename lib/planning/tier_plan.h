// A second tier's what-if from a trace (docs/planning.md, "A second tier"): the trace's requests,
// as records carrying its block ids, replayed through the live capacity curves (CapacityCurves,
// exact unless told to sample) with the device at one capacity and each tier size below it, so `kvledger plan --tier` and
// the server give the same figures.
#ifndef KVLEDGER_LIB_PLANNING_TIER_PLAN_H_
#define KVLEDGER_LIB_PLANNING_TIER_PLAN_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "lib/accounting/compute_time.h"
#include "lib/capacity/capacity_curves.h"
#include "lib/capacity/second_tier.h"
#include "lib/planning/trace.h"
#include "lib/profiles/profile.h"

namespace kvledger {

struct TierPlanInput {
  uint64_t block_tokens = kDefaultTraceBlockTokens;
  uint64_t device_tokens = 0;  // the device's capacity (finite, at least one block)
  std::vector<TierSize> tiers;
  bool inclusive = false;  // the tiers hold copies of the device's blocks (TierOptions::inclusive)
  std::optional<ComputeTime> compute;       // unset: seconds unknown
  std::optional<uint64_t> context_tokens;   // requests beyond it are left out, as Plan does
  uint64_t samples = SampledStack::kUnlimitedSamples;  // blocks the stack holds; past it, sampled
  // The trace's block ids at block_tokens, one list per request; empty: each request's hash_ids.
  const std::vector<std::vector<uint64_t>>* ids = nullptr;
};

// The curve of the trace at the device's capacity, with its tier rungs (one per input tier, in order).
CapacityCurves::ModelCurve PlanTiers(const std::vector<TraceRequest>& trace, const Profile& profile,
                                     const TierPlanInput& input);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_PLANNING_TIER_PLAN_H_
