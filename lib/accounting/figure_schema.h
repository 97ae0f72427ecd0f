// The figures a record yields, described once. Each row names a figure, says how one record
// contributes to it and how it is exported; Totals::Add and Totals::Merge, the Prometheus exposition
// and the tests all walk these tables, so a new counter is one row here (and its name in the enum).
// The last tables describe Explain's fields the same way.
#ifndef KVLEDGER_LIB_ACCOUNTING_FIGURE_SCHEMA_H_
#define KVLEDGER_LIB_ACCOUNTING_FIGURE_SCHEMA_H_

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>
#include <variant>

#include "absl/types/span.h"
#include "lib/base/enum_table.h"
#include "lib/accounting/derived_figures.h"
#include "lib/cost_model/exact_int.h"

namespace kvledger {

// Seconds and ratios are summed as integers in 1e-9 units, so totals do not depend on order.
inline constexpr double kNanoUnitsPerUnit = 1e9;

// `value` is finite and >= 0 (validated latencies, ratios, recompute estimates); estimates can pass
// 2^64 nanoseconds for absurd records, so the result is 128-bit. Rounds half away from zero, as
// std::llround does, without its library call (three per record): below 2^53 the fraction is exact,
// above it a double is already whole.
inline Uint128 ToNanoUnits(double value) {
  const double scaled = value * kNanoUnitsPerUnit;
  if (scaled < 9.0e18) {
    const int64_t whole = static_cast<int64_t>(scaled);
    return static_cast<Uint128>(whole + (scaled - static_cast<double>(whole) >= 0.5 ? 1 : 0));
  }
  return static_cast<Uint128>(scaled);  // already an integer at this magnitude
}

// Why tokens inside the logical match were computed again.
enum class Cause : uint8_t { kAlignment = 0, kRestore = 1 };
inline constexpr EnumTable<Cause, 2> kCauseLabels = {{{Cause::kAlignment, "alignment"}, {Cause::kRestore, "restore"}}};
static_assert(IsDense(kCauseLabels));
inline constexpr std::array kAllCauses = ValuesOf(kCauseLabels);
inline const char* CauseLabel(Cause cause) { return LabelOf(kCauseLabels, cause, "unknown"); }

// The parts of a TTFT (docs/cost-model.md §12), the `part` label.
enum class TtftPart : uint8_t { kQueue = 0, kReload = 1, kSuffixPrefill = 2, kRest = 3 };
inline constexpr EnumTable<TtftPart, 4> kTtftPartLabels = {{{TtftPart::kQueue, "queue"},
                                                           {TtftPart::kReload, "reload"},
                                                           {TtftPart::kSuffixPrefill, "suffix_prefill"},
                                                           {TtftPart::kRest, "rest"}}};
static_assert(IsDense(kTtftPartLabels));
inline constexpr std::array kAllTtftParts = ValuesOf(kTtftPartLabels);
inline const char* TtftPartLabel(TtftPart part) { return LabelOf(kTtftPartLabels, part, "unknown"); }
inline Uint128 TtftPartNanoUnits(const TtftParts& p, int i) {
  const std::array<Uint128, 4> values = {p.queue, p.reload, p.suffix_prefill, p.rest};
  return values[static_cast<size_t>(i)];
}

// The reload and the suffix prefill as the TTFT holds them (whole_request.cc), in nanounits: for
// records with a charged reload (TTFT, suffix prefill and reload paid known).
inline Uint128 ChargedReload(const RecordFigures& d) { return d.whole.reload_charged_nanounits.value_or(0); }
inline Uint128 ChargedSuffix(const RecordFigures& d) {
  return std::min(ToNanoUnits(*d.suffix_prefill_seconds), ToNanoUnits(*d.ttft_seconds));
}

// The extra label a counter carries besides model and tier.
enum class Dimension : uint8_t { kNone, kCause, kBoundary, kPart };
inline constexpr int Width(Dimension d) {
  switch (d) {
    case Dimension::kCause: return static_cast<int>(kAllCauses.size());
    case Dimension::kBoundary: return static_cast<int>(kAllBoundaries.size());
    case Dimension::kPart: return static_cast<int>(kAllTtftParts.size());
    case Dimension::kNone: break;
  }
  return 1;
}
// The label name and value at index `i` of a dimension other than kNone.
const char* DimensionLabelName(Dimension d);  // "cause", "boundary", "part"
const char* DimensionLabelValue(Dimension d, int i);

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
  kTtftDecomposedRequests,
  kTtftPartSeconds,
  kTtftOverlapRequests,
  kTtftOverlapSeconds,
  kOverheadRequests,
  kOverheadFullPrefillSeconds,
  kOverheadReloadSeconds,
  kOverheadQueueSeconds,
  kTtftReuseRequests,
  kTtftReuseSeconds,
  kTtftWithoutReuseSeconds,
  kDecodeRequests,
  kDecodeTokens,
  kDecodeSeconds,
  kE2eRequests,
  kE2eSeconds,
  kE2ePrefillSeconds,
  kE2eWithoutReuseRequests,
  kE2eWithoutReuseSeconds,
  kE2eWithoutReusePrefillSeconds,
  kKvHeldRequests,
  kKvByteSeconds,
};

struct CounterSpec {
  Counter id;
  const char* name;
  const char* help;
  Dimension dimension;
  bool nanounits;  // summed in 1e-9 units, exported divided by 1e9 (seconds)
  // One record's contribution at index `i` of the dimension (0 without one).
  Uint128 (*contribution)(const RecordFigures& d, int i);
};

// Only the records whose reload was compared with a recompute estimate feed the compared_* figures,
// so that they form honest ratios with one denominator.
inline constexpr std::array<CounterSpec, 46> kCounters = {{
    {Counter::kRequests, "kvledger_requests_total", "Records accepted.", Dimension::kNone, false,
     [](const RecordFigures&, int) -> Uint128 { return 1; }},
    {Counter::kPromptTokens, "kvledger_prompt_tokens_total", "Sum of prompt tokens N.", Dimension::kNone, false,
     [](const RecordFigures& d, int) -> Uint128 { return d.prompt_tokens; }},
    {Counter::kLogicalMatchTokens, "kvledger_logical_match_tokens_total",
     "Sum of logical prefix match tokens P_match.", Dimension::kNone, false,
     [](const RecordFigures& d, int) -> Uint128 { return d.logical_match_tokens; }},
    {Counter::kRecoverableTokens, "kvledger_recoverable_tokens_total", "Sum of recoverable boundary tokens P_rec.",
     Dimension::kNone, false, [](const RecordFigures& d, int) -> Uint128 { return d.recoverable_tokens; }},
    {Counter::kReusedTokens, "kvledger_reused_tokens_total", "Sum of effectively reused tokens P_eff.",
     Dimension::kNone, false, [](const RecordFigures& d, int) -> Uint128 { return d.reused_tokens; }},
    {Counter::kRecomputeTokens, "kvledger_recompute_tokens_total",
     "Tokens inside the logical match computed again, by cause: alignment (P_match - P_rec) or restore "
     "(P_rec - P_eff).",
     Dimension::kCause, false,
     [](const RecordFigures& d, int i) -> Uint128 {
       return i == static_cast<int>(Cause::kAlignment) ? d.recompute_alignment_tokens : d.recompute_restore_tokens;
     }},
    {Counter::kAttentionBaselineFlops, "kvledger_attention_baseline_flops_total",
     "Attention (sequence-mixing) FLOPs of a full prefill without reuse.", Dimension::kNone, false,
     [](const RecordFigures& d, int) { return d.attention_baseline_flops; }},
    {Counter::kAttentionAvoidedFlops, "kvledger_attention_avoided_flops_total",
     "Attention FLOPs that reuse up to the boundary avoids.", Dimension::kBoundary, false,
     [](const RecordFigures& d, int i) { return d.attention_avoided_flops[static_cast<size_t>(i)]; }},
    {Counter::kPrefillBaselineFlops, "kvledger_prefill_baseline_flops_total",
     "Whole-prefill FLOPs (attention + token-wise) without reuse.", Dimension::kNone, false,
     [](const RecordFigures& d, int) { return d.prefill_baseline_flops; }},
    {Counter::kPrefillAvoidedFlops, "kvledger_prefill_avoided_flops_total",
     "Whole-prefill FLOPs that reuse up to the boundary avoids.", Dimension::kBoundary, false,
     [](const RecordFigures& d, int i) { return d.prefill_avoided_flops[static_cast<size_t>(i)]; }},
    {Counter::kReusedBytes, "kvledger_reused_bytes_total", "KV/state bytes of the reused prefix.",
     Dimension::kNone, false, [](const RecordFigures& d, int) { return d.reused_bytes; }},
    {Counter::kReloadComparedRequests, "kvledger_reload_compared_requests_total",
     "Records with a measured reload_seconds and a recompute estimate (a suffix prefill time or a profile "
     "throughput): the records the kvledger_compared_* and estimated/slower counters cover.",
     Dimension::kNone, false, [](const RecordFigures& d, int) -> Uint128 { return d.reload_compared ? 1 : 0; }},
    {Counter::kEstimatedRecomputeSeconds, "kvledger_estimated_recompute_seconds_total",
     "Estimated seconds computing the reused prefix would have cost, over the records of "
     "kvledger_reload_compared_requests_total.",
     Dimension::kNone, true,
     [](const RecordFigures& d, int) -> Uint128 {
       return d.reload_compared ? ToNanoUnits(*d.estimated_recompute_seconds) : 0;
     }},
    {Counter::kComparedReloadSeconds, "kvledger_compared_reload_seconds_total",
     "Reload seconds paid, over the records of kvledger_reload_compared_requests_total.", Dimension::kNone, true,
     [](const RecordFigures& d, int) -> Uint128 { return d.reload_compared ? ToNanoUnits(*d.reload_seconds) : 0; }},
    {Counter::kComparedSuffixPrefillSeconds, "kvledger_compared_suffix_prefill_seconds_total",
     "Suffix prefill seconds (measured, else from the profile throughput), over the records of "
     "kvledger_reload_compared_requests_total.",
     Dimension::kNone, true,
     [](const RecordFigures& d, int) -> Uint128 {
       return d.reload_compared ? ToNanoUnits(d.suffix_prefill_seconds_used) : 0;
     }},
    {Counter::kComparedReusedBytes, "kvledger_compared_reused_bytes_total",
     "KV/state bytes reused, over the records of kvledger_reload_compared_requests_total (bytes per reload "
     "second = effective reload bandwidth).",
     Dimension::kNone, false,
     [](const RecordFigures& d, int) -> Uint128 { return d.reload_compared ? d.reused_bytes : 0; }},
    {Counter::kReloadSlowerThanRecompute, "kvledger_reload_slower_than_recompute_total",
     "Records of kvledger_reload_compared_requests_total whose reload took longer than the estimated "
     "recompute.",
     Dimension::kNone, false,
     [](const RecordFigures& d, int) -> Uint128 { return d.reload_compared && d.reload_slower_than_recompute; }},
    {Counter::kRecoverableModelDisagreements, "kvledger_recoverable_model_disagreements_total",
     "Records whose reported recoverable boundary differs from the profile's model (a sign of a stale "
     "profile).",
     Dimension::kNone, false, [](const RecordFigures& d, int) -> Uint128 { return d.model_disagrees ? 1 : 0; }},
    {Counter::kAlignmentLossRequests, "kvledger_alignment_loss_requests_total",
     "Records whose recoverable boundary fell short of the logical match (P_rec < P_match): page or "
     "checkpoint alignment cost them tokens.",
     Dimension::kNone, false,
     [](const RecordFigures& d, int) -> Uint128 { return d.recompute_alignment_tokens > 0 ? 1 : 0; }},
    // A router's predictions (docs/cost-model.md §11): only records that carried one contribute.
    {Counter::kPredictedRequests, "kvledger_predicted_requests_total",
     "Records that carried a router's predicted prefix match (predicted_match_tokens).", Dimension::kNone, false,
     [](const RecordFigures& d, int) -> Uint128 { return d.has_prediction ? 1 : 0; }},
    {Counter::kPredictedMatchTokens, "kvledger_predicted_match_tokens_total",
     "Sum of the prefix tokens routers predicted the engine would match.", Dimension::kNone, false,
     [](const RecordFigures& d, int) -> Uint128 { return d.predicted_match_tokens; }},
    {Counter::kPredictionRealisedTokens, "kvledger_prediction_realised_tokens_total",
     "Predicted tokens the engine did match: sum of min(predicted, logical match).", Dimension::kNone, false,
     [](const RecordFigures& d, int) -> Uint128 { return d.prediction_realised_tokens; }},
    {Counter::kPredictionOverTokens, "kvledger_prediction_over_tokens_total",
     "Predicted tokens the engine did not match (a prefix the router believed in that was not there): sum of "
     "predicted - realised.",
     Dimension::kNone, false, [](const RecordFigures& d, int) -> Uint128 { return d.prediction_over_tokens; }},
    {Counter::kPredictionUnderTokens, "kvledger_prediction_under_tokens_total",
     "Matched tokens the router did not predict: sum of logical match - realised, over records with a prediction.",
     Dimension::kNone, false, [](const RecordFigures& d, int) -> Uint128 { return d.prediction_under_tokens; }},
    // The whole request (docs/cost-model.md §12): each set of records is named by its _requests_total.
    {Counter::kTtftDecomposedRequests, "kvledger_ttft_decomposed_requests_total",
     "Records with TTFT, queue, suffix prefill and reload (or nothing matched) measured: the records "
     "kvledger_ttft_part_seconds_total splits.",
     Dimension::kNone, false, [](const RecordFigures& d, int) -> Uint128 { return d.whole.ttft_parts ? 1 : 0; }},
    {Counter::kTtftPartSeconds, "kvledger_ttft_part_seconds_total",
     "TTFT seconds of the decomposed records by part: suffix_prefill, queue and reload as the TTFT holds them "
     "(overlapping parts charged once: suffix prefill first, then the wait, then the reload), and rest (TTFT "
     "minus the others: sampling, detokenisation, IPC, time before the engine queued the request). The parts "
     "sum to their TTFT.",
     Dimension::kPart, true,
     [](const RecordFigures& d, int i) -> Uint128 {
       return d.whole.ttft_parts ? TtftPartNanoUnits(*d.whole.ttft_parts, i) : 0;
     }},
    {Counter::kTtftOverlapRequests, "kvledger_ttft_overlap_requests_total",
     "Decomposed records whose queue + reload + suffix prefill as reported exceed their TTFT (the parts "
     "overlapped, e.g. an asynchronous reload during the wait).",
     Dimension::kNone, false,
     [](const RecordFigures& d, int) -> Uint128 { return d.whole.ttft_overlap_nanounits.value_or(0) > 0; }},
    {Counter::kTtftOverlapSeconds, "kvledger_ttft_overlap_seconds_total",
     "Seconds by which the overlapping records' parts exceed their TTFT.", Dimension::kNone, true,
     [](const RecordFigures& d, int) -> Uint128 { return d.whole.ttft_overlap_nanounits.value_or(0); }},
    {Counter::kOverheadRequests, "kvledger_overhead_requests_total",
     "Decomposed records with a full-prefill estimate: the records the kvledger_overhead_* counters cover "
     "(h with the wait = (reload + queue as the TTFT holds them) / full prefill).",
     Dimension::kNone, false,
     [](const RecordFigures& d, int) -> Uint128 { return d.whole.overhead_with_wait ? 1 : 0; }},
    {Counter::kOverheadFullPrefillSeconds, "kvledger_overhead_full_prefill_seconds_total",
     "Estimated seconds of a full prefill without reuse, over the records of kvledger_overhead_requests_total.",
     Dimension::kNone, true,
     [](const RecordFigures& d, int) -> Uint128 {
       return d.whole.overhead_with_wait ? ToNanoUnits(*d.whole.estimated_full_prefill_seconds) : 0;
     }},
    {Counter::kOverheadReloadSeconds, "kvledger_overhead_reload_seconds_total",
     "Reload seconds the TTFT holds, over the records of kvledger_overhead_requests_total.", Dimension::kNone, true,
     [](const RecordFigures& d, int) -> Uint128 { return d.whole.overhead_with_wait ? d.whole.ttft_parts->reload : 0; }},
    {Counter::kOverheadQueueSeconds, "kvledger_overhead_queue_seconds_total",
     "Scheduling wait seconds the TTFT holds, over the records of kvledger_overhead_requests_total.",
     Dimension::kNone, true,
     [](const RecordFigures& d, int) -> Uint128 { return d.whole.overhead_with_wait ? d.whole.ttft_parts->queue : 0; }},
    {Counter::kTtftReuseRequests, "kvledger_ttft_reuse_requests_total",
     "Records with a TTFT, a suffix prefill, a recompute estimate and a known reload: the records the TTFT "
     "speedup bought by reuse covers.",
     Dimension::kNone, false,
     [](const RecordFigures& d, int) -> Uint128 { return d.whole.ttft_without_reuse_seconds ? 1 : 0; }},
    {Counter::kTtftReuseSeconds, "kvledger_ttft_reuse_seconds_total",
     "TTFT seconds as measured, over the records of kvledger_ttft_reuse_requests_total.", Dimension::kNone, true,
     [](const RecordFigures& d, int) -> Uint128 {
       return d.whole.ttft_without_reuse_seconds ? ToNanoUnits(*d.ttft_seconds) : 0;
     }},
    {Counter::kTtftWithoutReuseSeconds, "kvledger_ttft_without_reuse_seconds_total",
     "Estimated TTFT seconds had nothing been reused, queueing held fixed (TTFT - reload as the TTFT holds it + "
     "estimated recompute), over the records of kvledger_ttft_reuse_requests_total.",
     Dimension::kNone, true,
     [](const RecordFigures& d, int) -> Uint128 { return d.whole.ttft_without_reuse_nanounits.value_or(0); }},
    {Counter::kDecodeRequests, "kvledger_decode_requests_total",
     "Records with decode_seconds and at least 2 output tokens: the records the decode counters cover.",
     Dimension::kNone, false,
     [](const RecordFigures& d, int) -> Uint128 { return d.whole.time_per_output_token_seconds ? 1 : 0; }},
    {Counter::kDecodeTokens, "kvledger_decode_tokens_total",
     "Output tokens after the first (output_tokens - 1), over the records of kvledger_decode_requests_total.",
     Dimension::kNone, false,
     [](const RecordFigures& d, int) -> Uint128 {
       return d.whole.time_per_output_token_seconds ? *d.whole.output_tokens - 1 : 0;
     }},
    {Counter::kDecodeSeconds, "kvledger_decode_seconds_total",
     "Decode seconds (first output token to last), over the records of kvledger_decode_requests_total.",
     Dimension::kNone, true,
     [](const RecordFigures& d, int) -> Uint128 {
       return d.whole.time_per_output_token_seconds ? ToNanoUnits(*d.whole.decode_seconds) : 0;
     }},
    {Counter::kE2eRequests, "kvledger_e2e_requests_total",
     "Records with TTFT, decode, suffix prefill and a known reload: the records the prefill's share of the "
     "end-to-end latency as served covers.",
     Dimension::kNone, false, [](const RecordFigures& d, int) -> Uint128 { return d.whole.e2e_prefill_seconds ? 1 : 0; }},
    {Counter::kE2eSeconds, "kvledger_e2e_seconds_total",
     "End-to-end seconds (TTFT + decode), over the records of kvledger_e2e_requests_total.", Dimension::kNone, true,
     [](const RecordFigures& d, int) -> Uint128 { return d.whole.e2e_prefill_nanounits ? *d.whole.e2e_nanounits : 0; }},
    {Counter::kE2ePrefillSeconds, "kvledger_e2e_prefill_seconds_total",
     "Seconds of reload and suffix prefill the TTFT holds (overlapping parts charged once), over the records of "
     "kvledger_e2e_requests_total: its share of kvledger_e2e_seconds_total is the prefill's share as served.",
     Dimension::kNone, true,
     [](const RecordFigures& d, int) -> Uint128 { return d.whole.e2e_prefill_nanounits.value_or(0); }},
    {Counter::kE2eWithoutReuseRequests, "kvledger_e2e_without_reuse_requests_total",
     "Records of kvledger_e2e_requests_total with a recompute estimate: the records the prefill's share of the "
     "end-to-end latency without reuse covers.",
     Dimension::kNone, false,
     [](const RecordFigures& d, int) -> Uint128 { return d.whole.e2e_without_reuse_seconds ? 1 : 0; }},
    {Counter::kE2eWithoutReuseSeconds, "kvledger_e2e_without_reuse_seconds_total",
     "Estimated end-to-end seconds had nothing been reused (TTFT - reload charged + estimated recompute + "
     "decode), over the records of kvledger_e2e_without_reuse_requests_total.",
     Dimension::kNone, true,
     [](const RecordFigures& d, int) -> Uint128 { return d.whole.e2e_without_reuse_nanounits.value_or(0); }},
    {Counter::kE2eWithoutReusePrefillSeconds, "kvledger_e2e_without_reuse_prefill_seconds_total",
     "The prefill within it (suffix prefill + estimated recompute), over the records of "
     "kvledger_e2e_without_reuse_requests_total: the most any cache could save of the request without reuse.",
     Dimension::kNone, true,
     [](const RecordFigures& d, int) -> Uint128 { return d.whole.e2e_without_reuse_prefill_nanounits.value_or(0); }},
    {Counter::kKvHeldRequests, "kvledger_kv_held_requests_total",
     "Records with TTFT, output tokens and decode seconds: the records kvledger_kv_byte_seconds_total covers.",
     Dimension::kNone, false, [](const RecordFigures& d, int) -> Uint128 { return d.whole.kv_byte_seconds ? 1 : 0; }},
    {Counter::kKvByteSeconds, "kvledger_kv_byte_seconds_total",
     "KV/state bytes x seconds held by the requests (Little's law): its rate is the average bytes resident.",
     Dimension::kNone, true,
     [](const RecordFigures& d, int) -> Uint128 { return d.whole.kv_byte_seconds ? ToNanoUnits(*d.whole.kv_byte_seconds) : 0; }},
}};

// Where each counter's values start in Totals::counters, and how many there are in all.
inline constexpr std::array<int, kCounters.size() + 1> kCounterOffsets = [] {
  std::array<int, kCounters.size() + 1> offsets{};
  for (size_t i = 0; i < kCounters.size(); ++i) offsets[i + 1] = offsets[i] + Width(kCounters[i].dimension);
  return offsets;
}();
inline constexpr int kCounterSlots = kCounterOffsets.back();

// Latency bucket upper bounds in exact integer nanoseconds (an observation's bucket is decided in
// integers), 17 per histogram (+Inf). Request latencies: 1 ms to 20 minutes on a 1-2.5-5 scale, p50/p90/p99
// within a factor of 2-2.5 of the truth at a third fewer series than a dense scale.
inline constexpr size_t kLatencyBuckets = 17;
using LatencyBounds = std::array<uint64_t, kLatencyBuckets>;
inline constexpr LatencyBounds kLatencyBucketsNanos = {
    1'000'000,         2'500'000,         5'000'000,         10'000'000,         25'000'000,  50'000'000,
    100'000'000,       250'000'000,       500'000'000,       1'000'000'000,      2'500'000'000, 5'000'000'000,
    10'000'000'000,    30'000'000'000,    60'000'000'000,    300'000'000'000,    1'200'000'000'000};
// Time per output token: 1 ms to 500 ms, dense between 5 and 200 ms where decode lives.
inline constexpr LatencyBounds kTokenLatencyBucketsNanos = {
    1'000'000,   2'500'000,   5'000'000,   7'500'000,   10'000'000,  15'000'000,  20'000'000,  25'000'000, 30'000'000,
    40'000'000,  50'000'000,  75'000'000,  100'000'000, 150'000'000, 200'000'000, 300'000'000, 500'000'000};

// Latency histograms: only records that reported (or could derive) the latency are observed. Each
// is read by a dashboard panel (docs/operations.md, "A series budget"); the scheduling wait is
// exported as a sum only (kvledger_ttft_part_seconds_total{part="queue"}), which its panel reads.
enum class Latency : uint8_t { kReload, kSuffixPrefill, kTtft, kTimePerOutputToken };
struct LatencySpec {
  Latency id;
  const char* name;
  const char* help;
  std::optional<double> (*seconds)(const RecordFigures& d);
  const LatencyBounds* bounds;
};
inline constexpr std::array<LatencySpec, 4> kLatencies = {{
    {Latency::kReload, "kvledger_reload_seconds", "Reload latency per record that reported one.",
     [](const RecordFigures& d) { return d.reload_seconds; }, &kLatencyBucketsNanos},
    {Latency::kSuffixPrefill, "kvledger_suffix_prefill_seconds",
     "Suffix prefill latency per record that reported one.",
     [](const RecordFigures& d) { return d.suffix_prefill_seconds; }, &kLatencyBucketsNanos},
    {Latency::kTtft, "kvledger_ttft_seconds", "Time to first token per record that reported one.",
     [](const RecordFigures& d) { return d.ttft_seconds; }, &kLatencyBucketsNanos},
    {Latency::kTimePerOutputToken, "kvledger_time_per_output_token_seconds",
     "Decode time per output token, decode_seconds / (output_tokens - 1), per record with decode_seconds "
     "and at least 2 output tokens.",
     [](const RecordFigures& d) { return d.whole.time_per_output_token_seconds; }, &kTokenLatencyBucketsNanos},
}};

// Per-record ratio histograms: part / whole, observed for records whose whole is > 0 (a prompt always
// is; a prediction may be 0 or absent), exported for a (model, tier) once it has observed one.
enum class Ratio : uint8_t { kLogicalHit, kReusedHit, kPredictionRealised };
struct RatioSpec {
  Ratio id;
  const char* name;
  const char* help;
  uint64_t RecordFigures::*part;
  uint64_t RecordFigures::*whole;
  bool every_record;  // its whole is never 0, so every record observes it
};
inline constexpr std::array<RatioSpec, 3> kRatios = {{
    {Ratio::kLogicalHit, "kvledger_logical_hit_ratio",
     "Per-record logical hit ratio P_match/N (spread only; use token counters for fleet ratios).",
     &RecordFigures::logical_match_tokens, &RecordFigures::prompt_tokens, true},
    {Ratio::kReusedHit, "kvledger_reused_hit_ratio",
     "Per-record effective hit ratio P_eff/N (spread only; use token counters for fleet ratios).",
     &RecordFigures::reused_tokens, &RecordFigures::prompt_tokens, true},
    {Ratio::kPredictionRealised, "kvledger_prediction_realised_ratio",
     "Per-record share of a router's predicted prefix that the engine matched, min(predicted, match)/predicted, "
     "for records with a prediction > 0 (spread only; use token counters for fleet ratios).",
     &RecordFigures::prediction_realised_tokens, &RecordFigures::predicted_match_tokens, false},
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


// Explain: what one record's figures are as the DerivedFigures message (record.proto) carries them
// and the CLI prints them. Each row names its field, says how the value is made from the derived
// figures, and how the CLI prints it; FiguresToProto (lib/wire) sets each row's field by name, the
// CLI's text walks the same rows, and the JSON API is the message by reflection. A new Explain figure
// is its field in the message and one row here; a test holds the rows to the message, field for
// field and type for type.
// A figure's value: integers (and enum numbers) as int64_t, then double, bool and text. The wire
// field's type must take it: int64/int32/uint32/enum, double, bool, string.
using ExplainValue = std::variant<int64_t, double, bool, std::string_view>;

// How the CLI prints a value.
enum class ExplainUnit : uint8_t {
  kCount,           // 19
  kTokens,          // 2048 tokens
  kFraction,        // 0.500000
  kPercent,         // a fraction as 12.34%
  kSpeedup,         // 2.0000x
  kFlops,           // 1.1e+12 FLOPs
  kBytes,           // 134217728 bytes
  kByteSeconds,     // 2.5e+08 byte-seconds
  kSeconds,         // 0.2 s
  kTokensPerSecond, // 50 tokens/s
  kYesNo,           // yes / no
  kEnum,            // the enum value's name without the enum's prefix, as lower-case words
  kText,
};

template <typename Subject>
struct ExplainRow {
  // The field; a field of a message field as "message.field" (one level).
  const char* field;
  const char* label;  // the CLI's label (a column header for a group)
  ExplainUnit unit;
  // The value, or nothing: the field stays unset (null in JSON) and the CLI prints `when_unset`.
  std::optional<ExplainValue> (*value)(const Subject& subject);
  const char* when_unset = "unavailable";
  const char* share_of = nullptr;  // the CLI also prints the value as a share of this field
  // A bool field without which this one means nothing: the CLI prints `when_unset` while it is false
  // (for a field the wire cannot leave unset, such as a bool).
  const char* only_if = nullptr;
};
using ExplainFigure = ExplainRow<RecordFigures>;
using ExplainGroupColumn = ExplainRow<GroupFigure>;

namespace explain_rows {

using Value = std::optional<ExplainValue>;
using D = RecordFigures;

inline Value Count(uint64_t v) { return ExplainValue(static_cast<int64_t>(v)); }
inline Value Real(double v) { return ExplainValue(v); }
inline Value Real(const std::optional<double>& v) { return v ? Real(*v) : std::nullopt; }
inline Value Exact(Uint128 v) { return Real(Uint128ToDouble(v)); }  // exact below 2^53 (record.proto)
inline Value Flag(bool v) { return ExplainValue(v); }
inline Value Seconds(Uint128 nanounits) { return Real(Uint128ToDouble(nanounits) / kNanoUnitsPerUnit); }

// A ratio of two figures, or nothing when it is not finite (an extreme record's tiny denominator):
// no figure is ever infinite or NaN on any surface.
inline Value Ratio(double part, double whole) {
  const double r = part / whole;
  return std::isfinite(r) ? Real(r) : std::nullopt;
}
// 1 / remaining; nothing when nothing remains (the speedup is unbounded).
inline Value Speedup(double remaining) { return remaining > 0 ? Real(1.0 / remaining) : std::nullopt; }

template <Boundary b>
inline Value Alpha(const D& d) {
  const std::array<uint64_t, kBoundaryCount> tokens = {d.logical_match_tokens, d.recoverable_tokens, d.reused_tokens};
  return Real(d.Alpha(tokens[static_cast<size_t>(b)]));
}
template <Boundary b>
inline Value AttentionAvoided(const D& d) { return Exact(d.attention_avoided_flops[static_cast<size_t>(b)]); }
template <Boundary b>
inline Value PrefillAvoided(const D& d) { return Exact(d.prefill_avoided_flops[static_cast<size_t>(b)]); }
template <TtftPart p>
inline Value TtftPartSeconds(const D& d) {
  if (!d.whole.ttft_parts) return std::nullopt;
  return Seconds(TtftPartNanoUnits(*d.whole.ttft_parts, static_cast<int>(p)));
}
// The router's prediction: every figure of it unset without one.
template <uint64_t D::*tokens>
inline Value Predicted(const D& d) { return d.has_prediction ? Count(d.*tokens) : std::nullopt; }

inline constexpr char kNeedsParts[] = "unavailable (needs TTFT, queue, suffix prefill and reload)";
// Why there is no estimate (docs/cost-model.md §8): the floor the record alone must clear.
inline constexpr char kNoEstimate[] =
    "unknown (basis none): no live compute model (a server's, from records of several suffix sizes), no "
    "profile throughput, and the record alone only when its suffix carries at least the reused prefix's "
    "prefill FLOPs";
inline constexpr char kNotCompared[] = "unknown (no reload time or no recompute estimate)";

using U = ExplainUnit;
inline constexpr ExplainFigure kFigures[] = {
    {"profile", "profile", U::kText, [](const D& d) -> Value { return ExplainValue(d.profile->name()); }},
    {"prompt_tokens", "prompt tokens N", U::kTokens, [](const D& d) { return Count(d.prompt_tokens); }},
    {"logical_match_tokens", "logical match P_match", U::kTokens,
     [](const D& d) { return Count(d.logical_match_tokens); }},
    {"recoverable_tokens", "recoverable P_rec", U::kTokens, [](const D& d) { return Count(d.recoverable_tokens); }},
    {"recoverable_source", "  boundary from", U::kEnum,
     [](const D& d) { return Count(static_cast<uint64_t>(d.recoverable_source)); }},
    {"modelled_recoverable_tokens", "  the profile's model says", U::kTokens,
     [](const D& d) { return Count(d.modelled_recoverable_tokens); }},
    {"model_disagrees", "  disagrees with the model", U::kYesNo, [](const D& d) { return Flag(d.model_disagrees); }},
    {"reused_tokens", "reused P_eff", U::kTokens, [](const D& d) { return Count(d.reused_tokens); }},
    {"alpha_logical", "alpha at logical", U::kFraction, &Alpha<Boundary::kLogical>},
    {"alpha_recoverable", "alpha at recoverable", U::kFraction, &Alpha<Boundary::kRecoverable>},
    {"alpha_reused", "alpha at reused", U::kFraction, &Alpha<Boundary::kReused>},
    {"recompute_alignment_tokens", "recompute: alignment loss", U::kTokens,
     [](const D& d) { return Count(d.recompute_alignment_tokens); }},
    {"recompute_restore_tokens", "recompute: restore failures", U::kTokens,
     [](const D& d) { return Count(d.recompute_restore_tokens); }},
    {"attention_baseline_flops", "attention FLOPs baseline", U::kFlops,
     [](const D& d) { return Exact(d.attention_baseline_flops); }},
    {"attention_avoided_logical_flops", "  avoided at logical", U::kFlops, &AttentionAvoided<Boundary::kLogical>,
     "unavailable", "attention_baseline_flops"},
    {"attention_avoided_recoverable_flops", "  avoided at recoverable", U::kFlops,
     &AttentionAvoided<Boundary::kRecoverable>, "unavailable", "attention_baseline_flops"},
    {"attention_avoided_reused_flops", "  avoided at reused", U::kFlops, &AttentionAvoided<Boundary::kReused>,
     "unavailable", "attention_baseline_flops"},
    {"attention_remaining_fraction", "  remaining", U::kFraction,
     [](const D& d) { return Real(d.AttentionRemaining()); }},
    {"attention_speedup", "  ideal speedup", U::kSpeedup, [](const D& d) { return Speedup(d.AttentionRemaining()); },
     "unbounded"},
    {"prefill_baseline_flops", "prefill FLOPs baseline", U::kFlops,
     [](const D& d) { return Exact(d.prefill_baseline_flops); }},
    {"attention_share", "  attention share beta", U::kFraction, [](const D& d) { return Real(d.AttentionShare()); }},
    {"prefill_avoided_logical_flops", "  avoided at logical", U::kFlops, &PrefillAvoided<Boundary::kLogical>,
     "unavailable", "prefill_baseline_flops"},
    {"prefill_avoided_recoverable_flops", "  avoided at recoverable", U::kFlops,
     &PrefillAvoided<Boundary::kRecoverable>, "unavailable", "prefill_baseline_flops"},
    {"prefill_avoided_reused_flops", "  avoided at reused", U::kFlops, &PrefillAvoided<Boundary::kReused>,
     "unavailable", "prefill_baseline_flops"},
    {"prefill_remaining_fraction", "  remaining", U::kFraction, [](const D& d) { return Real(d.PrefillRemaining()); }},
    {"prefill_speedup", "  ideal speedup", U::kSpeedup, [](const D& d) { return Speedup(d.PrefillRemaining()); },
     "unbounded"},
    {"reused_bytes", "reused KV/state bytes", U::kBytes, [](const D& d) { return Exact(d.reused_bytes); }},
    {"recompute_estimate_available", "recompute estimate available", U::kYesNo,
     [](const D& d) { return Flag(d.estimated_recompute_seconds.has_value()); }},
    {"estimated_recompute_seconds", "estimated recompute seconds", U::kSeconds,
     [](const D& d) { return Real(d.estimated_recompute_seconds); }, kNoEstimate},
    {"estimate_basis", "  estimate basis", U::kEnum,
     [](const D& d) { return Count(static_cast<uint64_t>(d.estimate_basis)); }},
    {"reload_compared", "reload compared", U::kYesNo, [](const D& d) { return Flag(d.reload_compared); }},
    {"reload_slower_than_recompute", "reload slower than recompute", U::kYesNo,
     [](const D& d) { return Flag(d.reload_slower_than_recompute); }, kNotCompared, nullptr, "reload_compared"},
    {"overhead_fraction", "overhead h", U::kFraction, [](const D& d) { return Real(d.overhead_fraction); }},
    {"e2e_speedup", "e2e speedup", U::kSpeedup, [](const D& d) { return Real(d.e2e_speedup); }},
    // The whole request (docs/cost-model.md §12): a figure whose inputs were not all measured stays unset.
    {"ttft_parts.queue_seconds", "TTFT part: queue", U::kSeconds, &TtftPartSeconds<TtftPart::kQueue>, kNeedsParts},
    {"ttft_parts.reload_seconds", "TTFT part: reload", U::kSeconds, &TtftPartSeconds<TtftPart::kReload>, kNeedsParts},
    {"ttft_parts.suffix_prefill_seconds", "TTFT part: suffix prefill", U::kSeconds,
     &TtftPartSeconds<TtftPart::kSuffixPrefill>, kNeedsParts},
    {"ttft_parts.rest_seconds", "TTFT part: rest", U::kSeconds, &TtftPartSeconds<TtftPart::kRest>, kNeedsParts},
    {"ttft_overlap_seconds", "  parts overlapped by", U::kSeconds,
     [](const D& d) {
       return d.whole.ttft_overlap_nanounits ? Seconds(*d.whole.ttft_overlap_nanounits) : std::nullopt;
     }},
    {"estimated_full_prefill_seconds", "estimated full prefill", U::kSeconds,
     [](const D& d) { return Real(d.whole.estimated_full_prefill_seconds); }},
    {"overhead_fraction_with_wait", "overhead h with the wait", U::kFraction,
     [](const D& d) { return Real(d.whole.overhead_with_wait); }},
    {"ttft_without_reuse_seconds", "TTFT without reuse", U::kSeconds,
     [](const D& d) { return Real(d.whole.ttft_without_reuse_seconds); }},
    {"ttft_speedup", "TTFT speedup", U::kSpeedup,
     [](const D& d) {
       return d.whole.ttft_without_reuse_seconds ? Ratio(*d.whole.ttft_without_reuse_seconds, *d.ttft_seconds)
                                                 : std::nullopt;
     }},
    {"time_per_output_token_seconds", "time per output token", U::kSeconds,
     [](const D& d) { return Real(d.whole.time_per_output_token_seconds); }},
    {"output_tokens_per_second", "  output tokens per second", U::kTokensPerSecond,
     [](const D& d) {
       return d.whole.time_per_output_token_seconds ? Ratio(1.0, *d.whole.time_per_output_token_seconds) : std::nullopt;
     }},
    {"e2e_seconds", "end to end", U::kSeconds, [](const D& d) { return Real(d.whole.e2e_seconds); }},
    {"prefill_share_of_e2e", "  prefill share as served", U::kPercent,
     [](const D& d) {
       return d.whole.e2e_prefill_seconds ? Ratio(*d.whole.e2e_prefill_seconds, *d.whole.e2e_seconds) : std::nullopt;
     }},
    {"e2e_without_reuse_seconds", "end to end without reuse", U::kSeconds,
     [](const D& d) { return Real(d.whole.e2e_without_reuse_seconds); }},
    {"prefill_share_of_e2e_without_reuse", "  prefill share without reuse", U::kPercent,
     [](const D& d) {
       const WholeRequest& w = d.whole;
       return w.e2e_without_reuse_seconds ? Ratio(*w.e2e_without_reuse_prefill_seconds, *w.e2e_without_reuse_seconds)
                                          : std::nullopt;
     }},
    {"kv_byte_seconds", "KV byte-seconds", U::kByteSeconds, [](const D& d) { return Real(d.whole.kv_byte_seconds); }},
    {"kv_bytes_held_average", "  KV bytes held on average", U::kBytes,
     [](const D& d) {
       return d.whole.kv_byte_seconds ? Ratio(*d.whole.kv_byte_seconds, *d.whole.e2e_seconds) : std::nullopt;
     }},
    {"predicted_match_tokens", "router predicted", U::kTokens, &Predicted<&D::predicted_match_tokens>,
     "no prediction"},
    {"prediction_realised_tokens", "  realised", U::kTokens, &Predicted<&D::prediction_realised_tokens>,
     "no prediction"},
    {"prediction_over_tokens", "  over-predicted", U::kTokens, &Predicted<&D::prediction_over_tokens>,
     "no prediction"},
    {"prediction_under_tokens", "  under-predicted", U::kTokens, &Predicted<&D::prediction_under_tokens>,
     "no prediction"},
};

using G = GroupFigure;
inline constexpr ExplainGroupColumn kGroupColumns[] = {
    {"name", "group", U::kText, [](const G& g) -> Value { return ExplainValue(std::string_view(g.group->name)); }},
    {"kind", "kind", U::kText,
     [](const G& g) -> Value {
       return ExplainValue(std::string_view(g.group->latent ? "mla" : MixerKindName(g.group->kind)));
     }},
    {"num_layers", "layers", U::kCount, [](const G& g) { return Count(g.group->num_layers); }},
    {"alignment_tokens", "align", U::kCount, [](const G& g) { return Count(g.group->alignment_tokens); }},
    {"modelled_boundary_tokens", "modelled", U::kCount, [](const G& g) { return Count(g.modelled_boundary_tokens); }},
    {"reported_boundary_tokens", "reported", U::kCount,
     [](const G& g) -> Value {
       return g.reported_boundary_tokens ? Count(static_cast<uint64_t>(*g.reported_boundary_tokens)) : std::nullopt;
     },
     "-"},
    {"attention_baseline_flops", "attn baseline", U::kFlops,
     [](const G& g) { return Exact(g.attention_baseline_flops); }},
    {"attention_avoided_flops", "attn avoided", U::kFlops, [](const G& g) { return Exact(g.attention_avoided_flops); },
     "-", "attention_baseline_flops"},
};

}  // namespace explain_rows

// Every DerivedFigures field but `model` (the record's own) and `groups`, in the CLI's order.
inline absl::Span<const ExplainFigure> ExplainFigures() { return explain_rows::kFigures; }
// Every GroupFigures field, one per layer group, in the CLI's column order.
inline absl::Span<const ExplainGroupColumn> ExplainGroupColumns() { return explain_rows::kGroupColumns; }


}  // namespace kvledger

#endif  // KVLEDGER_LIB_ACCOUNTING_FIGURE_SCHEMA_H_
