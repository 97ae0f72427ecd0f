#include "lib/wire/record_proto.h"

#include <array>
#include <cmath>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/accounting/figure_schema.h"

namespace kvledger {

namespace {

const google::protobuf::FieldDescriptor& PerBoundaryField(absl::string_view prefix, Boundary b,
                                                         absl::string_view suffix) {
  const auto* field = v1::DerivedFigures::descriptor()->FindFieldByName(absl::StrCat(prefix, BoundaryLabel(b), suffix));
  if (field == nullptr) {  // a proto without a field for a boundary label: a build that cannot work
    std::fprintf(stderr, "kvledger: DerivedFigures has no field %s%s%s\n", std::string(prefix).c_str(),
                 BoundaryLabel(b), std::string(suffix).c_str());
    std::abort();
  }
  return *field;
}

double Seconds(Uint128 nanounits) { return Uint128ToDouble(nanounits) / kNanoUnitsPerUnit; }

// A ratio of two figures, or nothing when it is not finite (an extreme record's tiny denominator):
// no figure is ever infinite or NaN on any surface.
std::optional<double> Ratio(double part, double whole) {
  const double r = part / whole;
  return std::isfinite(r) ? std::optional<double>(r) : std::nullopt;
}

// docs/cost-model.md §12: a figure whose inputs were not all measured stays unset.
void WholeRequestToProto(const RecordFigures& d, v1::DerivedFigures& p) {
  const WholeRequest& w = d.whole;
  if (w.ttft_parts) {
    auto* parts = p.mutable_ttft_parts();
    parts->set_queue_seconds(Seconds(w.ttft_parts->queue));
    parts->set_reload_seconds(Seconds(w.ttft_parts->reload));
    parts->set_suffix_prefill_seconds(Seconds(w.ttft_parts->suffix_prefill));
    parts->set_rest_seconds(Seconds(w.ttft_parts->rest));
  }
  if (w.ttft_overlap_nanounits) p.set_ttft_overlap_seconds(Seconds(*w.ttft_overlap_nanounits));
  if (w.estimated_full_prefill_seconds) p.set_estimated_full_prefill_seconds(*w.estimated_full_prefill_seconds);
  if (w.overhead_with_wait) p.set_overhead_fraction_with_wait(*w.overhead_with_wait);
  if (w.ttft_without_reuse_seconds) {
    p.set_ttft_without_reuse_seconds(*w.ttft_without_reuse_seconds);
    if (auto r = Ratio(*w.ttft_without_reuse_seconds, *d.ttft_seconds)) p.set_ttft_speedup(*r);
  }
  if (w.time_per_output_token_seconds) {
    p.set_time_per_output_token_seconds(*w.time_per_output_token_seconds);
    if (auto r = Ratio(1.0, *w.time_per_output_token_seconds)) p.set_output_tokens_per_second(*r);
  }
  if (w.e2e_seconds) p.set_e2e_seconds(*w.e2e_seconds);
  if (w.e2e_prefill_seconds) {
    if (auto r = Ratio(*w.e2e_prefill_seconds, *w.e2e_seconds)) p.set_prefill_share_of_e2e(*r);
  }
  if (w.e2e_without_reuse_seconds) {
    p.set_e2e_without_reuse_seconds(*w.e2e_without_reuse_seconds);
    if (auto r = Ratio(*w.e2e_without_reuse_prefill_seconds, *w.e2e_without_reuse_seconds)) {
      p.set_prefill_share_of_e2e_without_reuse(*r);
    }
  }
  if (w.kv_byte_seconds) {
    p.set_kv_byte_seconds(*w.kv_byte_seconds);
    if (auto r = Ratio(*w.kv_byte_seconds, *w.e2e_seconds)) p.set_kv_bytes_held_average(*r);
  }
}

}  // namespace

double PerBoundary(const v1::DerivedFigures& figures, absl::string_view prefix, Boundary b, absl::string_view suffix) {
  return figures.GetReflection()->GetDouble(figures, &PerBoundaryField(prefix, b, suffix));
}

void SetPerBoundary(v1::DerivedFigures& figures, absl::string_view prefix, Boundary b, absl::string_view suffix,
                    double value) {
  figures.GetReflection()->SetDouble(&figures, &PerBoundaryField(prefix, b, suffix), value);
}

RecordFacts FactsFromProto(const v1::Record& r) {
  RecordFacts f;
  f.request_id = r.request_id();
  f.model = r.model();
  f.tier_value = r.tier();
  f.prompt_tokens = r.prompt_tokens();
  f.logical_match_tokens = r.logical_match_tokens();
  if (r.has_recoverable_tokens()) f.recoverable_tokens = r.recoverable_tokens();
  if (r.has_recompute_tokens()) f.recompute_tokens = r.recompute_tokens();
  if (r.has_reload_seconds()) f.reload_seconds = r.reload_seconds();
  if (r.has_suffix_prefill_seconds()) f.suffix_prefill_seconds = r.suffix_prefill_seconds();
  if (r.has_ttft_seconds()) f.ttft_seconds = r.ttft_seconds();
  if (r.has_predicted_match_tokens()) f.predicted_match_tokens = r.predicted_match_tokens();
  if (r.has_queue_seconds()) f.queue_seconds = r.queue_seconds();
  if (r.has_output_tokens()) f.output_tokens = r.output_tokens();
  if (r.has_decode_seconds()) f.decode_seconds = r.decode_seconds();
  f.state_boundaries.reserve(r.state_boundaries_size());
  for (const auto& b : r.state_boundaries()) {
    f.state_boundaries.push_back(StateBoundaryFact{b.state_group(), b.boundary_tokens()});
  }
  return f;
}

v1::Record FactsToProto(const RecordFacts& f) {
  v1::Record r;
  r.set_request_id(std::string(f.request_id));
  r.set_model(std::string(f.model));
  r.set_tier(static_cast<v1::Tier>(f.tier_value));
  r.set_prompt_tokens(f.prompt_tokens);
  r.set_logical_match_tokens(f.logical_match_tokens);
  if (f.recoverable_tokens) r.set_recoverable_tokens(*f.recoverable_tokens);
  if (f.recompute_tokens) r.set_recompute_tokens(*f.recompute_tokens);
  if (f.reload_seconds) r.set_reload_seconds(*f.reload_seconds);
  if (f.suffix_prefill_seconds) r.set_suffix_prefill_seconds(*f.suffix_prefill_seconds);
  if (f.ttft_seconds) r.set_ttft_seconds(*f.ttft_seconds);
  if (f.predicted_match_tokens) r.set_predicted_match_tokens(*f.predicted_match_tokens);
  if (f.queue_seconds) r.set_queue_seconds(*f.queue_seconds);
  if (f.output_tokens) r.set_output_tokens(*f.output_tokens);
  if (f.decode_seconds) r.set_decode_seconds(*f.decode_seconds);
  for (const StateBoundaryFact& b : f.state_boundaries) {
    v1::StateBoundary* out = r.add_state_boundaries();
    out->set_state_group(std::string(b.state_group));
    out->set_boundary_tokens(b.boundary_tokens);
  }
  return r;
}

v1::DerivedFigures FiguresToProto(const RecordFigures& d, absl::string_view model) {
  v1::DerivedFigures p;
  p.set_model(std::string(model));
  p.set_profile(d.profile->name());
  p.set_prompt_tokens(d.prompt_tokens);
  p.set_logical_match_tokens(d.logical_match_tokens);
  p.set_recoverable_tokens(d.recoverable_tokens);
  p.set_reused_tokens(d.reused_tokens);
  p.set_recoverable_source(static_cast<v1::BoundarySource>(d.recoverable_source));
  p.set_modelled_recoverable_tokens(d.modelled_recoverable_tokens);
  p.set_model_disagrees(d.model_disagrees);
  p.set_recompute_alignment_tokens(d.recompute_alignment_tokens);
  p.set_recompute_restore_tokens(d.recompute_restore_tokens);
  const std::array<uint64_t, kBoundaryCount> tokens = {d.logical_match_tokens, d.recoverable_tokens, d.reused_tokens};
  for (Boundary b : kAllBoundaries) {
    const auto i = static_cast<size_t>(b);
    SetPerBoundary(p, "alpha_", b, "", d.Alpha(tokens[i]));
    SetPerBoundary(p, "attention_avoided_", b, "_flops", Uint128ToDouble(d.attention_avoided_flops[i]));
    SetPerBoundary(p, "prefill_avoided_", b, "_flops", Uint128ToDouble(d.prefill_avoided_flops[i]));
  }
  p.set_attention_baseline_flops(Uint128ToDouble(d.attention_baseline_flops));
  const double attention_remaining = d.AttentionRemaining();
  p.set_attention_remaining_fraction(attention_remaining);
  if (attention_remaining > 0) p.set_attention_speedup(1.0 / attention_remaining);
  p.set_prefill_baseline_flops(Uint128ToDouble(d.prefill_baseline_flops));
  const double prefill_remaining = d.PrefillRemaining();
  p.set_prefill_remaining_fraction(prefill_remaining);
  if (prefill_remaining > 0) p.set_prefill_speedup(1.0 / prefill_remaining);
  p.set_attention_share(d.AttentionShare());
  p.set_reused_bytes(Uint128ToDouble(d.reused_bytes));
  p.set_recompute_estimate_available(d.estimated_recompute_seconds.has_value());
  if (d.estimated_recompute_seconds) p.set_estimated_recompute_seconds(*d.estimated_recompute_seconds);
  p.set_estimate_basis(static_cast<v1::Basis>(d.estimate_basis));
  p.set_reload_slower_than_recompute(d.reload_slower_than_recompute);
  p.set_reload_compared(d.reload_compared);
  if (d.overhead_fraction) p.set_overhead_fraction(*d.overhead_fraction);
  if (d.e2e_speedup) p.set_e2e_speedup(*d.e2e_speedup);
  if (d.has_prediction) {
    p.set_predicted_match_tokens(static_cast<int64_t>(d.predicted_match_tokens));
    p.set_prediction_realised_tokens(static_cast<int64_t>(d.prediction_realised_tokens));
    p.set_prediction_over_tokens(static_cast<int64_t>(d.prediction_over_tokens));
    p.set_prediction_under_tokens(static_cast<int64_t>(d.prediction_under_tokens));
  }
  WholeRequestToProto(d, p);
  for (const auto& g : d.groups) {
    auto* out = p.add_groups();
    out->set_name(g.group->name);
    out->set_kind(g.group->latent ? "mla" : MixerKindName(g.group->kind));
    out->set_num_layers(g.group->num_layers);
    out->set_alignment_tokens(static_cast<uint32_t>(g.group->alignment_tokens));
    out->set_modelled_boundary_tokens(g.modelled_boundary_tokens);
    if (g.reported_boundary_tokens) out->set_reported_boundary_tokens(*g.reported_boundary_tokens);
    out->set_attention_baseline_flops(Uint128ToDouble(g.attention_baseline_flops));
    out->set_attention_avoided_flops(Uint128ToDouble(g.attention_avoided_flops));
  }
  return p;
}

}  // namespace kvledger
