#include "lib/accounting/derived_figures.h"

#include <algorithm>
#include <cmath>

#include "lib/cost_model/model_shape.h"

namespace kvledger {
namespace {

double Fraction(Uint128 part, Uint128 whole) {
  return whole == 0 ? 0.0 : Uint128ToDouble(part) / Uint128ToDouble(whole);
}

}  // namespace

double RecordFigures::AttentionRemaining() const {
  return Fraction(attention_baseline_flops - ReusedAttentionFlops(), attention_baseline_flops);
}

double RecordFigures::PrefillRemaining() const {
  return Fraction(RemainingPrefillFlops(), prefill_baseline_flops);
}

double RecordFigures::AttentionShare() const {
  return Fraction(attention_baseline_flops, prefill_baseline_flops);
}

namespace {

// The recoverable boundary and the tokens reused (docs/cost-model.md §3-4): the engine's boundary,
// else the state groups' minimum, else the profile's model.
void DeriveBoundaries(const RecordFacts& facts, const Profile& profile, RecordFigures& d) {
  const ModelShape& shape = profile.shape();
  const uint64_t n = d.prompt_tokens;
  const uint64_t match = d.logical_match_tokens;
  d.modelled_recoverable_tokens = ModelledRecoverableTokens(shape, match, n);
  d.groups.resize(shape.groups.size());
  for (size_t i = 0; i < shape.groups.size(); ++i) {
    d.groups[i].group = &shape.groups[i];
    d.groups[i].modelled_boundary_tokens = GroupBoundary(shape.groups[i], match, n);
  }
  uint64_t recoverable = d.modelled_recoverable_tokens;
  d.recoverable_source = BoundarySourceKind::kModel;
  if (!facts.state_boundaries.empty()) {
    int64_t minimum = facts.logical_match_tokens;
    for (const auto& b : facts.state_boundaries) {
      minimum = std::min(minimum, b.boundary_tokens);
      const int index = profile.GroupIndex(b.state_group);
      if (index >= 0) d.groups[index].reported_boundary_tokens = b.boundary_tokens;
    }
    recoverable = static_cast<uint64_t>(minimum);
    d.recoverable_source = BoundarySourceKind::kStateBoundaries;
  }
  if (facts.recoverable_tokens) {
    recoverable = static_cast<uint64_t>(*facts.recoverable_tokens);
    d.recoverable_source = BoundarySourceKind::kEngine;
  }
  uint64_t reused = facts.recompute_tokens ? match - static_cast<uint64_t>(*facts.recompute_tokens)
                                           : recoverable;
  if (d.recoverable_source == BoundarySourceKind::kModel) {
    // The engine restored more than the model allows: the profile is stale; trust the engine.
    if (reused > recoverable) {
      recoverable = reused;
      d.model_disagrees = true;
    }
  } else {
    d.model_disagrees = recoverable != d.modelled_recoverable_tokens;
  }
  d.recoverable_tokens = recoverable;
  d.reused_tokens = reused;
  d.recompute_alignment_tokens = match - recoverable;
  d.recompute_restore_tokens = recoverable - reused;
}

// Work: baseline over all N queries; avoided = the work of the first P queries (docs/cost-model.md §5).
void DeriveWork(const ModelShape& shape, RecordFigures& d) {
  const uint64_t n = d.prompt_tokens;
  const std::array<uint64_t, kBoundaryCount> boundaries = {d.logical_match_tokens, d.recoverable_tokens,
                                                           d.reused_tokens};
  for (size_t i = 0; i < shape.groups.size(); ++i) {
    const auto& g = shape.groups[i];
    const Uint128 mixing_n = GroupMixingFlops(g, n);
    const Uint128 tokens_n = GroupTokenFlops(g, n);
    d.attention_baseline_flops += mixing_n;
    d.prefill_baseline_flops += mixing_n + tokens_n;
    for (int b = 0; b < kBoundaryCount; ++b) {
      const Uint128 mixing_p = GroupMixingFlops(g, boundaries[b]);
      d.attention_avoided_flops[b] += mixing_p;
      d.prefill_avoided_flops[b] += mixing_p + GroupTokenFlops(g, boundaries[b]);
    }
    d.groups[i].attention_baseline_flops = mixing_n;
    d.groups[i].attention_avoided_flops = GroupMixingFlops(g, d.reused_tokens);
  }
  d.reused_bytes = CacheBytes(shape, d.reused_tokens);
}

// Seconds (docs/cost-model.md §8) from the compute-time model: the live fit, else the profile's
// throughput, else (offline explain only) the record alone above its floor. Recomputing the reused
// prefix lengthens a pass that happens anyway, so the estimate is what the full pass costs beyond
// the suffix's; a miss recomputes nothing (0 s, whatever the model). No model, no estimate: a suffix
// that is mostly fixed cost is never scaled up to the prefix.
void DeriveSeconds(const RecordFacts& facts, const Profile& profile, const EstimateSource& source,
                   RecordFigures& d) {
  const Uint128 avoided = d.ReusedPrefillFlops();
  std::optional<ComputeTime> compute = ModelComputeTime(source.live, profile.prefill_flops_per_second());
  if (!compute && source.record_alone) {
    compute = RecordAloneComputeTime(d.RemainingPrefillFlops(), avoided, facts.suffix_prefill_seconds);
  }
  if (compute) {
    d.estimated_recompute_seconds = compute->RecomputeSeconds(d.FullPass(), d.SuffixPass());
    d.estimate_basis = compute->basis;
  } else if (avoided == 0) {
    d.estimated_recompute_seconds = 0.0;
    d.estimate_basis = Basis::kRecord;
  } else {
    return;
  }
  // The full prefill: the measured suffix pass plus the reused prefix's recompute, else the model's pass.
  std::optional<double> suffix = facts.suffix_prefill_seconds;
  if (!suffix && compute) suffix = compute->PassSeconds(d.SuffixPass());
  if (!suffix) return;
  d.suffix_prefill_seconds_used = *suffix;
  const double full_prefill_seconds = *suffix + *d.estimated_recompute_seconds;
  d.whole.estimated_full_prefill_seconds = full_prefill_seconds;
  // Compared with the reload only when the reload time was measured.
  if (!facts.reload_seconds) return;
  d.reload_compared = true;
  d.reload_slower_than_recompute = *facts.reload_seconds > *d.estimated_recompute_seconds;
  const double h = *facts.reload_seconds / full_prefill_seconds;
  if (full_prefill_seconds > 0 && std::isfinite(h)) {  // never an infinite h from a vanishing prefill
    d.overhead_fraction = h;
    const double e2e_remaining = d.PrefillRemaining() + h;
    if (e2e_remaining > 0) d.e2e_speedup = 1.0 / e2e_remaining;
  }
}

}  // namespace

RecordFigures Derive(const RecordFacts& facts, const Profile& profile, const EstimateSource& source) {
  RecordFigures d;
  d.profile = &profile;
  d.tier = static_cast<Tier>(facts.tier_value);
  d.prompt_tokens = static_cast<uint64_t>(facts.prompt_tokens);
  d.logical_match_tokens = static_cast<uint64_t>(facts.logical_match_tokens);
  d.reload_seconds = facts.reload_seconds;
  d.suffix_prefill_seconds = facts.suffix_prefill_seconds;
  d.ttft_seconds = facts.ttft_seconds;
  if (facts.predicted_match_tokens) {
    d.has_prediction = true;
    d.predicted_match_tokens = static_cast<uint64_t>(*facts.predicted_match_tokens);
    d.prediction_realised_tokens = std::min(d.predicted_match_tokens, d.logical_match_tokens);
    d.prediction_over_tokens = d.predicted_match_tokens - d.prediction_realised_tokens;
    d.prediction_under_tokens = d.logical_match_tokens - d.prediction_realised_tokens;
  }
  DeriveBoundaries(facts, profile, d);
  DeriveWork(profile.shape(), d);
  DeriveSeconds(facts, profile, source, d);
  DeriveWholeRequest(facts, profile.shape(), d);
  return d;
}

}  // namespace kvledger
