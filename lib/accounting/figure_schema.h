// The exported figures, described once. Each row names a figure, says how one record contributes to
// it and how it is exported; Totals::Add and Totals::Merge, the Prometheus exposition and the tests
// all walk these tables, so a new counter is one row here (and its name in the enum).
#ifndef KVLEDGER_LIB_ACCOUNTING_FIGURE_SCHEMA_H_
#define KVLEDGER_LIB_ACCOUNTING_FIGURE_SCHEMA_H_

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>

#include "lib/accounting/derived_figures.h"
#include "lib/cost_model/exact_int.h"

namespace kvledger {

// Seconds and ratios are summed as integers in 1e-9 units, so totals do not depend on order.
inline constexpr double kNanoUnitsPerUnit = 1e9;

// `value` is finite and >= 0 (validated latencies, ratios, recompute estimates); estimates can pass
// 2^64 nanoseconds for absurd records, so the result is 128-bit.
inline Uint128 ToNanoUnits(double value) {
  const double scaled = value * kNanoUnitsPerUnit;
  if (scaled < 9.0e18) return static_cast<Uint128>(std::llround(scaled));
  return static_cast<Uint128>(scaled);  // already an integer at this magnitude
}

// Why tokens inside the logical match were computed again.
enum class Cause : uint8_t { kAlignment = 0, kRestore = 1 };
inline constexpr std::array kAllCauses = {Cause::kAlignment, Cause::kRestore};
const char* CauseLabel(Cause cause);  // "alignment", "restore"

inline constexpr std::array kAllBoundaries = {Boundary::kLogical, Boundary::kRecoverable, Boundary::kReused};

// The extra label a counter carries besides model and tier.
enum class Dimension : uint8_t { kNone, kCause, kBoundary };
inline constexpr int Width(Dimension d) {
  return d == Dimension::kCause ? static_cast<int>(kAllCauses.size())
                                : d == Dimension::kBoundary ? static_cast<int>(kAllBoundaries.size()) : 1;
}

enum class Counter : uint8_t {
  kRequests,
  kPromptTokens,
  kLogicalMatchTokens,
  kRecoverableTokens,
  kReusedTokens,
  kRecomputeTokens,
  kAttentionBaselineFlops,
  kAttentionAvoidedFlops,
  kPrefillBaselineFlops,
  kPrefillAvoidedFlops,
  kReusedBytes,
  kReloadComparedRequests,
  kEstimatedRecomputeSeconds,
  kComparedReloadSeconds,
  kComparedSuffixPrefillSeconds,
  kComparedReusedBytes,
  kReloadSlowerThanRecompute,
  kRecoverableModelDisagreements,
  kAlignmentLossRequests,
  kPredictedRequests,
  kPredictedMatchTokens,
  kPredictionRealisedTokens,
  kPredictionOverTokens,
  kPredictionUnderTokens,
};

struct CounterSpec {
  Counter id;
  const char* name;
  const char* help;
  Dimension dimension;
  bool nanounits;  // summed in 1e-9 units, exported divided by 1e9 (seconds)
  // One record's contribution at index `i` of the dimension (0 without one).
  Uint128 (*contribution)(const DerivedFigures& d, int i);
};

// Only the records whose reload was compared with a recompute estimate feed the compared_* figures,
// so that they form honest ratios with one denominator.
inline constexpr std::array<CounterSpec, 24> kCounters = {{
    {Counter::kRequests, "kvledger_requests_total", "Records accepted.", Dimension::kNone, false,
     [](const DerivedFigures&, int) -> Uint128 { return 1; }},
    {Counter::kPromptTokens, "kvledger_prompt_tokens_total", "Sum of prompt tokens N.", Dimension::kNone, false,
     [](const DerivedFigures& d, int) -> Uint128 { return d.prompt_tokens; }},
    {Counter::kLogicalMatchTokens, "kvledger_logical_match_tokens_total",
     "Sum of logical prefix match tokens P_match.", Dimension::kNone, false,
     [](const DerivedFigures& d, int) -> Uint128 { return d.logical_match_tokens; }},
    {Counter::kRecoverableTokens, "kvledger_recoverable_tokens_total", "Sum of recoverable boundary tokens P_rec.",
     Dimension::kNone, false, [](const DerivedFigures& d, int) -> Uint128 { return d.recoverable_tokens; }},
    {Counter::kReusedTokens, "kvledger_reused_tokens_total", "Sum of effectively reused tokens P_eff.",
     Dimension::kNone, false, [](const DerivedFigures& d, int) -> Uint128 { return d.reused_tokens; }},
    {Counter::kRecomputeTokens, "kvledger_recompute_tokens_total",
     "Tokens inside the logical match computed again, by cause: alignment (P_match - P_rec) or restore "
     "(P_rec - P_eff).",
     Dimension::kCause, false,
     [](const DerivedFigures& d, int i) -> Uint128 {
       return i == static_cast<int>(Cause::kAlignment) ? d.recompute_alignment_tokens : d.recompute_restore_tokens;
     }},
    {Counter::kAttentionBaselineFlops, "kvledger_attention_baseline_flops_total",
     "Attention (sequence-mixing) FLOPs of a full prefill without reuse.", Dimension::kNone, false,
     [](const DerivedFigures& d, int) { return d.attention_baseline_flops; }},
    {Counter::kAttentionAvoidedFlops, "kvledger_attention_avoided_flops_total",
     "Attention FLOPs that reuse up to the boundary avoids.", Dimension::kBoundary, false,
     [](const DerivedFigures& d, int i) { return d.attention_avoided_flops[static_cast<size_t>(i)]; }},
    {Counter::kPrefillBaselineFlops, "kvledger_prefill_baseline_flops_total",
     "Whole-prefill FLOPs (attention + token-wise) without reuse.", Dimension::kNone, false,
     [](const DerivedFigures& d, int) { return d.prefill_baseline_flops; }},
    {Counter::kPrefillAvoidedFlops, "kvledger_prefill_avoided_flops_total",
     "Whole-prefill FLOPs that reuse up to the boundary avoids.", Dimension::kBoundary, false,
     [](const DerivedFigures& d, int i) { return d.prefill_avoided_flops[static_cast<size_t>(i)]; }},
    {Counter::kReusedBytes, "kvledger_reused_bytes_total", "KV/state bytes of the reused prefix.",
     Dimension::kNone, false, [](const DerivedFigures& d, int) { return d.reused_bytes; }},
    {Counter::kReloadComparedRequests, "kvledger_reload_compared_requests_total",
     "Records with a measured reload_seconds and a recompute estimate (a suffix prefill time or a profile "
     "throughput): the records the kvledger_compared_* and estimated/slower counters cover.",
     Dimension::kNone, false, [](const DerivedFigures& d, int) -> Uint128 { return d.reload_compared ? 1 : 0; }},
    {Counter::kEstimatedRecomputeSeconds, "kvledger_estimated_recompute_seconds_total",
     "Estimated seconds computing the reused prefix would have cost, over the records of "
     "kvledger_reload_compared_requests_total.",
     Dimension::kNone, true,
     [](const DerivedFigures& d, int) -> Uint128 {
       return d.reload_compared ? ToNanoUnits(*d.estimated_recompute_seconds) : 0;
     }},
    {Counter::kComparedReloadSeconds, "kvledger_compared_reload_seconds_total",
     "Reload seconds paid, over the records of kvledger_reload_compared_requests_total.", Dimension::kNone, true,
     [](const DerivedFigures& d, int) -> Uint128 { return d.reload_compared ? ToNanoUnits(*d.reload_seconds) : 0; }},
    {Counter::kComparedSuffixPrefillSeconds, "kvledger_compared_suffix_prefill_seconds_total",
     "Suffix prefill seconds (measured, else from the profile throughput), over the records of "
     "kvledger_reload_compared_requests_total.",
     Dimension::kNone, true,
     [](const DerivedFigures& d, int) -> Uint128 {
       return d.reload_compared ? ToNanoUnits(d.suffix_prefill_seconds_used) : 0;
     }},
    {Counter::kComparedReusedBytes, "kvledger_compared_reused_bytes_total",
     "KV/state bytes reused, over the records of kvledger_reload_compared_requests_total (bytes per reload "
     "second = effective reload bandwidth).",
     Dimension::kNone, false,
     [](const DerivedFigures& d, int) -> Uint128 { return d.reload_compared ? d.reused_bytes : 0; }},
    {Counter::kReloadSlowerThanRecompute, "kvledger_reload_slower_than_recompute_total",
     "Records of kvledger_reload_compared_requests_total whose reload took longer than the estimated "
     "recompute.",
     Dimension::kNone, false,
     [](const DerivedFigures& d, int) -> Uint128 { return d.reload_compared && d.reload_slower_than_recompute; }},
    {Counter::kRecoverableModelDisagreements, "kvledger_recoverable_model_disagreements_total",
     "Records whose reported recoverable boundary differs from the profile's model (a sign of a stale "
     "profile).",
     Dimension::kNone, false, [](const DerivedFigures& d, int) -> Uint128 { return d.model_disagrees ? 1 : 0; }},
    {Counter::kAlignmentLossRequests, "kvledger_alignment_loss_requests_total",
     "Records whose recoverable boundary fell short of the logical match (P_rec < P_match): page or "
     "checkpoint alignment cost them tokens.",
     Dimension::kNone, false,
     [](const DerivedFigures& d, int) -> Uint128 { return d.recompute_alignment_tokens > 0 ? 1 : 0; }},
    // A router's predictions (docs/cost-model.md §11): only records that carried one contribute.
    {Counter::kPredictedRequests, "kvledger_predicted_requests_total",
     "Records that carried a router's predicted prefix match (predicted_match_tokens).", Dimension::kNone, false,
     [](const DerivedFigures& d, int) -> Uint128 { return d.has_prediction ? 1 : 0; }},
    {Counter::kPredictedMatchTokens, "kvledger_predicted_match_tokens_total",
     "Sum of the prefix tokens routers predicted the engine would match.", Dimension::kNone, false,
     [](const DerivedFigures& d, int) -> Uint128 { return d.predicted_match_tokens; }},
    {Counter::kPredictionRealisedTokens, "kvledger_prediction_realised_tokens_total",
     "Predicted tokens the engine did match: sum of min(predicted, logical match).", Dimension::kNone, false,
     [](const DerivedFigures& d, int) -> Uint128 { return d.prediction_realised_tokens; }},
    {Counter::kPredictionOverTokens, "kvledger_prediction_over_tokens_total",
     "Predicted tokens the engine did not match (a prefix the router believed in that was not there): sum of "
     "predicted - realised.",
     Dimension::kNone, false, [](const DerivedFigures& d, int) -> Uint128 { return d.prediction_over_tokens; }},
    {Counter::kPredictionUnderTokens, "kvledger_prediction_under_tokens_total",
     "Matched tokens the router did not predict: sum of logical match - realised, over records with a prediction.",
     Dimension::kNone, false, [](const DerivedFigures& d, int) -> Uint128 { return d.prediction_under_tokens; }},
}};

// Where each counter's values start in Totals::counters, and how many there are in all.
inline constexpr std::array<int, kCounters.size() + 1> kCounterOffsets = [] {
  std::array<int, kCounters.size() + 1> offsets{};
  for (size_t i = 0; i < kCounters.size(); ++i) offsets[i + 1] = offsets[i] + Width(kCounters[i].dimension);
  return offsets;
}();
inline constexpr int kCounterSlots = kCounterOffsets.back();

// Latency histograms: only records that reported the latency are observed.
enum class Latency : uint8_t { kReload, kSuffixPrefill, kTtft };
struct LatencySpec {
  Latency id;
  const char* name;
  const char* help;
  std::optional<double> DerivedFigures::*seconds;
};
inline constexpr std::array<LatencySpec, 3> kLatencies = {{
    {Latency::kReload, "kvledger_reload_seconds", "Reload latency per record that reported one.",
     &DerivedFigures::reload_seconds},
    {Latency::kSuffixPrefill, "kvledger_suffix_prefill_seconds",
     "Suffix prefill latency per record that reported one.", &DerivedFigures::suffix_prefill_seconds},
    {Latency::kTtft, "kvledger_ttft_seconds", "Time to first token per record that reported one.",
     &DerivedFigures::ttft_seconds},
}};

// Per-record ratio histograms: part / whole, observed for records whose whole is > 0 (a prompt always
// is; a prediction may be 0 or absent), exported for a (model, tier) once it has observed one.
enum class Ratio : uint8_t { kLogicalHit, kReusedHit, kPredictionRealised };
struct RatioSpec {
  Ratio id;
  const char* name;
  const char* help;
  uint64_t DerivedFigures::*part;
  uint64_t DerivedFigures::*whole;
};
inline constexpr std::array<RatioSpec, 3> kRatios = {{
    {Ratio::kLogicalHit, "kvledger_logical_hit_ratio",
     "Per-record logical hit ratio P_match/N (spread only; use token counters for fleet ratios).",
     &DerivedFigures::logical_match_tokens, &DerivedFigures::prompt_tokens},
    {Ratio::kReusedHit, "kvledger_reused_hit_ratio",
     "Per-record effective hit ratio P_eff/N (spread only; use token counters for fleet ratios).",
     &DerivedFigures::reused_tokens, &DerivedFigures::prompt_tokens},
    {Ratio::kPredictionRealised, "kvledger_prediction_realised_ratio",
     "Per-record share of a router's predicted prefix that the engine matched, min(predicted, match)/predicted, "
     "for records with a prediction > 0 (spread only; use token counters for fleet ratios).",
     &DerivedFigures::prediction_realised_tokens, &DerivedFigures::predicted_match_tokens},
}};

// The tables are in enum order.
inline constexpr bool InEnumOrder() {
  for (size_t i = 0; i < kCounters.size(); ++i) {
    if (static_cast<size_t>(kCounters[i].id) != i) return false;
  }
  for (size_t i = 0; i < kLatencies.size(); ++i) {
    if (static_cast<size_t>(kLatencies[i].id) != i) return false;
  }
  for (size_t i = 0; i < kRatios.size(); ++i) {
    if (static_cast<size_t>(kRatios[i].id) != i) return false;
  }
  return true;
}
static_assert(InEnumOrder(), "figure tables must list their rows in enum order");

}  // namespace kvledger

#endif  // KVLEDGER_LIB_ACCOUNTING_FIGURE_SCHEMA_H_
