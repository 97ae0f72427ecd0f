#include "lib/planning/tier_plan.h"

#include "lib/planning/plan.h"

namespace kvledger {

CapacityCurves::ModelCurve PlanTiers(const std::vector<TraceRequest>& trace, const Profile& profile,
                                     const TierPlanInput& input) {
  CurveLimits limits{1, input.samples, 1e9};
  limits.tiers.sizes = input.tiers;
  limits.tiers.device_tokens = input.device_tokens;
  limits.tiers.inclusive = input.inclusive;
  auto curves = CapacityCurves::Create({input.device_tokens}, 1, limits);
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < trace.size(); ++i) {
    const TraceRequest& request = trace[i];
    if (input.context_tokens && BeyondContextWindow(request.input_length, *input.context_tokens)) continue;
    RecordFacts facts = FactsAtMatch(profile.name(), request.input_length, std::nullopt, 0);
    if (request.output_length > 0) facts.output_tokens = request.output_length;
    if (input.ids != nullptr) {
      facts.prefix_block_ids = (*input.ids)[i];
    } else {
      ids.assign(request.hash_ids.begin(), request.hash_ids.end());
      facts.prefix_block_ids = ids;
    }
    facts.block_tokens = static_cast<int64_t>(input.block_tokens);
    (*curves)->Observe(0, facts, profile, EstimateSource{input.compute, false});
  }
  auto snapshot = (*curves)->Snapshot();
  if (snapshot.empty()) {
    CapacityCurves::ModelCurve empty;
    empty.tier_rungs.assign(input.tiers.size(), TierRung{});
    return empty;
  }
  return snapshot.front();
}

}  // namespace kvledger
