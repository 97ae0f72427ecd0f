#include "lib/wire/capacity_proto.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/accounting/figure_schema.h"
#include "lib/base/quote.h"
#include "lib/cost_model/model_shape.h"

namespace kvledger {
namespace {

double Share(Uint128 part, Uint128 whole) { return whole == 0 ? 0.0 : Uint128ToDouble(part) / Uint128ToDouble(whole); }

double Seconds(Uint128 nanos) { return Uint128ToDouble(nanos) / kNanoUnitsPerUnit; }

}  // namespace

void TiersToProto(const CapacityCurves::ModelCurve& c, const std::vector<TierSize>& sizes, const Profile* profile,
                  v1::ModelCapacityCurve& out) {
  out.set_tier_no_device_requests(c.tier_no_device);
  for (size_t t = 0; t < sizes.size() && t < c.tier_rungs.size(); ++t) {
    const TierRung& r = c.tier_rungs[t];
    v1::TierPoint* p = out.add_tiers();
    p->set_tier(TierLabel(sizes[t].kind));
    p->set_tier_bytes(sizes[t].bytes);
    if (profile != nullptr) p->set_tier_tokens(sizes[t].bytes / BytesPerCachedToken(profile->shape()));
    p->set_bytes_per_second(sizes[t].StatedBandwidth());
    p->set_wait_seconds(sizes[t].wait_seconds);
    p->set_match_tokens(static_cast<uint64_t>(r[kTierMatchTokens]));
    p->set_token_hit_ratio(Share(r[kTierMatchTokens], c.prompt_tokens));
    p->set_attention_avoided_ratio(Share(r[kTierAttentionFlops], c.attention_baseline_flops));
    p->set_prefill_avoided_ratio(Share(r[kTierPrefillFlops], c.prefill_baseline_flops));
    p->set_hit_requests(static_cast<uint64_t>(r[kTierHitRequests]));
    p->set_seconds_known_requests(static_cast<uint64_t>(r[kTierSecondsKnown]));
    p->set_recompute_avoided_seconds(Seconds(r[kTierRecomputeNanos]));
    p->set_reload_seconds(Seconds(r[kTierReloadNanos]));
    p->set_net_seconds_avoided(Seconds(r[kTierRecomputeNanos]) - Seconds(r[kTierReloadNanos]));
    p->set_slower_requests(static_cast<uint64_t>(r[kTierSlowerRequests]));
    p->set_slower_tokens(static_cast<uint64_t>(r[kTierSlowerTokens]));
    p->set_slower_excess_seconds(Seconds(r[kTierSlowerExcessNanos]));
  }
}

namespace {

void FillModel(const CapacityCurves::ModelCurve& c, const std::vector<uint64_t>& capacities, const Profile* profile,
               v1::ModelCapacityCurve& out) {
  out.set_requests(c.requests);
  out.set_untracked_requests(c.untracked);
  out.set_forgotten_blocks(c.forgotten_blocks);
  out.set_sampled_requests(c.sampled);
  out.set_seconds_known_requests(c.seconds_known);
  out.set_prompt_tokens(static_cast<uint64_t>(c.prompt_tokens));
  for (size_t i = 0; i < capacities.size() && i < c.rungs.size(); ++i) {
    const CapacityCurves::Rung& r = c.rungs[i];
    v1::CapacityPoint* p = out.add_points();
    if (capacities[i] != kUnlimited) {
      p->set_capacity_tokens(capacities[i]);
      if (profile != nullptr) {
        p->set_capacity_bytes(static_cast<double>(capacities[i]) *
                              static_cast<double>(BytesPerCachedToken(profile->shape())));
      }
    }
    p->set_match_tokens(static_cast<uint64_t>(r.match_tokens));
    p->set_token_hit_ratio(Share(r.match_tokens, c.prompt_tokens));
    p->set_attention_avoided_ratio(Share(r.attention_avoided_flops, c.attention_baseline_flops));
    p->set_prefill_avoided_ratio(Share(r.prefill_avoided_flops, c.prefill_baseline_flops));
    p->set_prefill_avoided_flops(Uint128ToDouble(r.prefill_avoided_flops));
    if (c.seconds_known > 0) p->set_recompute_avoided_seconds(Uint128ToDouble(r.recompute_avoided_nanos) / kNanoUnitsPerUnit);
  }
}

}  // namespace

absl::Status NoCurvesStatus() {
  return absl::FailedPreconditionError(
      "this server keeps no capacity curves: start it with a --capacity_ladder (docs/cost-model.md §14)");
}

absl::StatusOr<v1::CapacityCurve> CurveToProto(const CapacityCurves& curves, const ModelRegistry& registry,
                                               absl::string_view model) {
  const std::vector<ModelLabel> labels = registry.slots().LabelsBySlot();
  v1::CapacityCurve out;
  for (const CapacityCurves::ModelCurve& c : curves.Snapshot()) {
    const std::string name = c.model_slot < labels.size() ? labels[c.model_slot].model : std::string(kOtherModelLabel);
    if (!model.empty() && name != model) continue;
    v1::ModelCapacityCurve* m = out.add_models();
    m->set_model(name);
    const Profile* profile = c.model_slot < labels.size() ? labels[c.model_slot].profile : nullptr;
    FillModel(c, curves.capacities(), profile, *m);
    TiersToProto(c, curves.limits().tiers.sizes, profile, *m);
  }
  std::sort(out.mutable_models()->begin(), out.mutable_models()->end(),
            [](const auto& a, const auto& b) { return a.model() < b.model(); });
  if (!model.empty() && out.models_size() == 0) {
    return absl::NotFoundError(absl::StrCat("model = ", Quoted(model),
                                            ": no capacity curve yet (no record of it carried prefix_block_ids)"));
  }
  return out;
}

}  // namespace kvledger
