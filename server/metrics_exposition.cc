#include "server/metrics_exposition.h"

#include <cmath>
#include <limits>
#include <optional>
#include <ostream>
#include <streambuf>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/advice/advisor.h"
#include "prometheus/text_serializer.h"

namespace kvledger {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

// HELP text as the text format requires it (backslash and newline escaped): TextSerializer
// writes HELP verbatim.
std::string EscapeHelp(absl::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

MetricFamily Family(const char* name, const char* help, MetricType type) {
  return MetricFamily{name, EscapeHelp(help), type, {}};
}

double NanoUnitsToDouble(Uint128 nanos) { return Uint128ToDouble(nanos) / kNanoUnitsPerUnit; }

// Everything one scrape exports, read once so that every family agrees.
struct Scrape {
  AggregateSnapshot snapshot;
  std::vector<ModelLabel> models;
  std::vector<Labels> cell_labels;  // {model, tier} per snapshot cell
  std::optional<EngineStats::Snapshot> engine;
  std::optional<std::vector<LiveRates::Entry>> rates;
  std::optional<LiveRates::Sums> totals;  // with rates
  std::optional<std::vector<CapacityCurves::ModelCurve>> curves;
  std::vector<std::string> capacity_labels;  // with curves, one per rung
  std::vector<Labels> tier_labels;           // with curves, {tier, tier_bytes} per tier size
  const ModelRegistry* registry = nullptr;
  const LiveRates* live = nullptr;    // with rates
  const FleetRates* fleet = nullptr;  // may be null

  ClientMetric::Label Model(uint32_t slot) const {
    return {"model", slot < models.size() ? models[slot].model : std::string(kOtherModelLabel)};
  }
};

ClientMetric CounterMetric(Labels labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  m.counter.value = value;
  return m;
}

ClientMetric GaugeMetric(Labels labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  m.gauge.value = value;
  return m;
}

template <size_t kBuckets>
ClientMetric HistogramMetric(const Labels& labels, const FixedHistogram<kBuckets>& h,
                       const std::array<double, kBuckets>& upper_bounds) {
  ClientMetric m;
  m.label = labels;
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= kBuckets; ++i) {
    cumulative += h.counts[i];
    m.histogram.bucket.push_back({cumulative, i < kBuckets ? upper_bounds[i] : std::numeric_limits<double>::infinity()});
  }
  m.histogram.sample_sum = NanoUnitsToDouble(h.sum_nanounits);
  m.histogram.sample_count = h.count;
  return m;
}

std::array<double, kLatencyBuckets> SecondsBounds(const LatencyBounds& nanos) {
  std::array<double, kLatencyBuckets> out{};
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(nanos[i]) / kNanoUnitsPerUnit;
  return out;
}

const std::array<double, kRatioBuckets>& RatioBounds() {
  static const auto bounds = [] {
    std::array<double, kRatioBuckets> out{};
    for (int k = 1; k <= kRatioBuckets; ++k) out[k - 1] = static_cast<double>(k) / kRatioBuckets;
    return out;
  }();
  return bounds;
}

void AddCounterRow(const CounterSpec& spec, const Scrape& s, MetricFamily& f) {
  for (size_t c = 0; c < s.snapshot.cells.size(); ++c) {
    const Totals& t = s.snapshot.cells[c].totals;
    for (int i = 0; i < Width(spec.dimension); ++i) {
      Labels labels = s.cell_labels[c];
      if (spec.dimension != Dimension::kNone) {
        labels.push_back({DimensionLabelName(spec.dimension), DimensionLabelValue(spec.dimension, i)});
      }
      const Uint128 sum = t.counter(spec.id, i);
      f.metric.push_back(CounterMetric(std::move(labels), spec.nanounits ? NanoUnitsToDouble(sum) : Uint128ToDouble(sum)));
    }
  }
}

// The families that are not rows of the figure schema, each described here once.
struct ServedFamily {
  const char* name;
  const char* help;
  MetricType type;
  void (*fill)(const Scrape& s, MetricFamily& f);
  enum Needs { kAggregate, kEngine, kRates, kCurves } needs = kAggregate;
};

void FillRejected(const Scrape& s, MetricFamily& f) {
  for (RejectReason reason : kAllRejectReasons) {
    f.metric.push_back(CounterMetric({{"reason", RejectReasonLabel(reason)}},
                               static_cast<double>(s.snapshot.rejected[static_cast<size_t>(reason)])));
  }
}

void FillFolded(const Scrape& s, MetricFamily& f) {
  f.metric.push_back(CounterMetric({}, static_cast<double>(s.snapshot.folded_records)));
}

// One info series per profile in the catalog, and per label whose name costs with another profile
// (an opted-in unknown model costed as "generic").
void FillModelInfo(const Scrape& s, MetricFamily& f) {
  auto add = [&](const std::string& model, const Profile& p) {
    uint64_t layers = 0;
    for (const auto& g : p.shape().groups) layers += g.num_layers;
    const auto& serving = p.definition().serving();
    f.metric.push_back(GaugeMetric({{"model", model},
                              {"profile", p.name()},
                              {"attention", p.attention_summary()},
                              {"layers", absl::StrCat(layers)},
                              {"kv_page_tokens", absl::StrCat(serving.kv_page_tokens())},
                              {"recurrent_checkpoint_tokens", absl::StrCat(serving.recurrent_checkpoint_tokens())}},
                             1));
  };
  const ProfileCatalog& catalog = s.registry->catalog();
  for (const auto& name : catalog.Names()) add(name, *catalog.Find(name));
  for (const auto& model : s.models) {
    if (catalog.Find(model.model) == nullptr) add(model.model, *model.profile);
  }
}

template <Uint128 EngineStats::TransferTotals::*kField, bool kSeconds>
void FillTransfers(const Scrape& s, MetricFamily& f) {
  for (const auto& [key, t] : s.engine->transfers) {
    const Uint128 v = t.*kField;
    f.metric.push_back(CounterMetric({s.Model(key.first), {"tier", TierLabel(key.second)}},
                               kSeconds ? NanoUnitsToDouble(v) : Uint128ToDouble(v)));
  }
}

void FillTransferCount(const Scrape& s, MetricFamily& f) {
  for (const auto& [key, t] : s.engine->transfers) {
    f.metric.push_back(CounterMetric({s.Model(key.first), {"tier", TierLabel(key.second)}}, Uint128ToDouble(t.transfers)));
  }
}

template <bool kTokens>
void FillUnrecorded(const Scrape& s, MetricFamily& f) {
  for (const auto& [key, u] : s.engine->unrecorded) {
    f.metric.push_back(CounterMetric({s.Model(key.first), {"reason", UnrecordedReasonLabel(key.second)}},
                               kTokens ? Uint128ToDouble(u.logical_match_tokens) : Uint128ToDouble(u.requests)));
  }
}

void FillEngineRejected(const Scrape& s, MetricFamily& f) {
  for (int r = 0; r < kEngineStatsRejectReasonCount; ++r) {
    f.metric.push_back(CounterMetric({{"reason", EngineStatsRejectReasonLabel(static_cast<EngineStatsRejectReason>(r))}},
                               static_cast<double>(s.engine->rejected[static_cast<size_t>(r)])));
  }
}

// Live rates (soft state of this replica, decayed with --advice_half_life_seconds): a rate, the
// decayed weight of the samples behind it, or (compute) the fixed seconds per pass, for the reload
// bandwidths (per tier) or the compute-time model.
enum class RateValue { kRate, kWeight, kFixedSeconds };
template <bool kReload, RateValue kValue>
void FillRates(const Scrape& s, MetricFamily& f) {
  for (const auto& e : *s.rates) {
    if (e.tier.has_value() != kReload) continue;
    const double value = kValue == RateValue::kWeight   ? e.evidence.weight
                         : kValue == RateValue::kRate   ? e.evidence.rate
                                                        : e.fixed_seconds;
    if (!std::isfinite(value)) continue;  // never exported: not a measurement
    Labels labels = {s.Model(e.model_slot)};
    if (e.tier) labels.push_back({"tier", TierLabel(*e.tier)});
    f.metric.push_back(GaugeMetric(std::move(labels), value));
  }
}

// The break-even of reloading from each tier with a live bandwidth on this replica (docs/cost-model.md
// §13): the reusable prefix from which on reloading pays, from the rates Advise answers with
// (ReloadBreakEvenTokens: the fleet's when the replica reads them). Absent where reloading never pays.
void FillBreakEven(const Scrape& s, MetricFamily& f) {
  for (const auto& reload : *s.rates) {
    if (!reload.tier || reload.model_slot >= s.models.size()) continue;
    const auto tokens =
        ReloadBreakEvenTokens(*s.registry, s.models[reload.model_slot].model, *reload.tier, s.live, s.fleet);
    if (!tokens) continue;
    f.metric.push_back(
        GaugeMetric({s.Model(reload.model_slot), {"tier", TierLabel(*reload.tier)}}, static_cast<double>(*tokens)));
  }
}

// The undecayed sums behind the live rates, one counter per term (kReloadParts, ComputeFitParts()):
// their increase over a window is what the kvledger.fleet rules add over the replicas
// (lib/accounting/fleet_rates.h).
void FillReloadSums(const Scrape& s, MetricFamily& f) {
  for (const auto& e : s.totals->reload) {
    for (size_t i = 0; i < kReloadParts.size(); ++i) {
      f.metric.push_back(
          CounterMetric({s.Model(e.model_slot), {"tier", TierLabel(e.tier)}, {"term", kReloadParts[i]}}, e.parts[i]));
    }
  }
}

void FillComputeSums(const Scrape& s, MetricFamily& f) {
  for (const auto& e : s.totals->compute) {
    for (size_t i = 0; i < kComputeFitPartCount; ++i) {
      f.metric.push_back(CounterMetric({s.Model(e.model_slot), {"term", ComputeFitParts()[i]}}, e.parts[i]));
    }
  }
}

// The capacity curves (docs/cost-model.md §14): per model, a figure over every replayed record, or
// one value per capacity of the ladder.
template <uint64_t CapacityCurves::ModelCurve::*kField>
void FillCurveCount(const Scrape& s, MetricFamily& f) {
  for (const auto& c : *s.curves) f.metric.push_back(CounterMetric({s.Model(c.model_slot)}, static_cast<double>(c.*kField)));
}

void FillCurveCaches(const Scrape& s, MetricFamily& f) {
  for (const auto& c : *s.curves) f.metric.push_back(GaugeMetric({s.Model(c.model_slot)}, static_cast<double>(c.caches)));
}

template <Uint128 CapacityCurves::ModelCurve::*kField>
void FillCurveBaseline(const Scrape& s, MetricFamily& f) {
  for (const auto& c : *s.curves) f.metric.push_back(CounterMetric({s.Model(c.model_slot)}, Uint128ToDouble(c.*kField)));
}

template <Uint128 CapacityCurves::Rung::*kField, bool kSeconds = false>
void FillCurveRungs(const Scrape& s, MetricFamily& f) {
  for (const auto& c : *s.curves) {
    for (size_t i = 0; i < c.rungs.size(); ++i) {
      const Uint128 v = c.rungs[i].*kField;
      f.metric.push_back(CounterMetric({s.Model(c.model_slot), {"capacity_tokens", s.capacity_labels[i]}},
                                       kSeconds ? NanoUnitsToDouble(v) : Uint128ToDouble(v)));
    }
  }
}

// The second tiers (docs/cost-model.md §15): one value per model and tier size.
template <size_t kField, bool kSeconds = false>
void FillTierRungs(const Scrape& s, MetricFamily& f) {
  for (const auto& c : *s.curves) {
    for (size_t t = 0; t < c.tier_rungs.size() && t < s.tier_labels.size(); ++t) {
      const Uint128 v = c.tier_rungs[t][kField];
      Labels labels = {s.Model(c.model_slot)};
      labels.insert(labels.end(), s.tier_labels[t].begin(), s.tier_labels[t].end());
      f.metric.push_back(CounterMetric(std::move(labels), kSeconds ? NanoUnitsToDouble(v) : Uint128ToDouble(v)));
    }
  }
}

constexpr ServedFamily kServedFamilies[] = {
    {"kvledger_records_rejected_total", "Records rejected, by reason.", MetricType::Counter, FillRejected},
    {"kvledger_model_label_folded_records_total",
     "Records counted under model=\"other\" because --max_models distinct model labels were already in use.",
     MetricType::Counter, FillFolded},
    {"kvledger_engine_transfer_bytes_total",
     "Bytes engines reported moving from a tier into working memory (aggregate transfer statistics, no request "
     "attached).",
     MetricType::Counter, FillTransfers<&EngineStats::TransferTotals::bytes, false>, ServedFamily::kEngine},
    {"kvledger_engine_transfer_seconds_total",
     "Seconds those aggregate transfers took (bytes / seconds = the tier's transfer bandwidth).", MetricType::Counter,
     FillTransfers<&EngineStats::TransferTotals::seconds_nanounits, true>, ServedFamily::kEngine},
    {"kvledger_engine_transfers_total", "Transfer operations behind those aggregates.", MetricType::Counter,
     FillTransferCount, ServedFamily::kEngine},
    {"kvledger_unrecorded_requests_total",
     "Finished requests that did not become records, by reason: aborted or failed before their first output token.",
     MetricType::Counter, FillUnrecorded<false>, ServedFamily::kEngine},
    {"kvledger_unrecorded_logical_match_tokens_total",
     "Prefix tokens the engine had matched for those requests, where it reported them (a failed KV load's prefix).",
     MetricType::Counter, FillUnrecorded<true>, ServedFamily::kEngine},
    {"kvledger_engine_stats_rejected_total", "Engine-statistics entries rejected, by reason.", MetricType::Counter,
     FillEngineRejected, ServedFamily::kEngine},
    {"kvledger_model_info", "Profile facts per model label, value 1; join on model.", MetricType::Gauge, FillModelInfo},
    {"kvledger_reload_bandwidth_bytes_per_second",
     "Effective reload bandwidth from one tier: reused bytes per reload second of records, and bytes per second of "
     "engines' aggregate transfers, decayed over recent samples.",
     MetricType::Gauge, FillRates<true, RateValue::kRate>, ServedFamily::kRates},
    {"kvledger_reload_bandwidth_weight",
     "Decayed weight of the samples (records and transfer observations) behind "
     "kvledger_reload_bandwidth_bytes_per_second (1 per sample now, 0.5 one half-life ago).",
     MetricType::Gauge, FillRates<true, RateValue::kWeight>, ServedFamily::kRates},
    {"kvledger_prefill_flops_per_second",
     "Prefill compute rate of the live compute-time model (a pass over F FLOPs takes "
     "kvledger_prefill_fixed_seconds + F / this), fitted to recent records' suffix prefills; exported once "
     "the model is ready.",
     MetricType::Gauge, FillRates<false, RateValue::kRate>, ServedFamily::kRates},
    {"kvledger_prefill_fixed_seconds", "Fixed seconds per prefill pass of the live compute-time model.",
     MetricType::Gauge, FillRates<false, RateValue::kFixedSeconds>, ServedFamily::kRates},
    {"kvledger_prefill_fit_weight",
     "Decayed weight (records, 1 per record now, 0.5 one half-life ago) behind the live compute-time model.",
     MetricType::Gauge, FillRates<false, RateValue::kWeight>, ServedFamily::kRates},
    {"kvledger_reload_break_even_tokens",
     "Reusable prefix (tokens, at a boundary the model resumes at) from which on reloading from the tier is faster "
     "than recomputing it, with the live bandwidth and the compute rate Advise uses: the threshold an engine's "
     "reload knob wants; absent where reloading never pays.",
     MetricType::Gauge, FillBreakEven, ServedFamily::kRates},
    {"kvledger_live_reload_sums_total",
     "Sums of the samples behind kvledger_reload_bandwidth_bytes_per_second since start, undecayed, by term: "
     "bytes, seconds, weight and samples (equal), of different units: never add them over term. Their increase "
     "over a window, per term and summed over replicas, gives the fleet's rate (bytes / seconds).",
     MetricType::Counter, FillReloadSums, ServedFamily::kRates},
    {"kvledger_live_compute_fit_sums_total",
     "Least-squares sums of the suffix passes behind the live compute-time model since start, undecayed, by "
     "term: the affine summary's tflops, seconds, tflops_squared, tflops_seconds; the pass curve's pass_<k>_<k>, "
     "pass_<k>_<next knot>, pass_<k>_attention_tflops, pass_<k>_seconds per knot k, attention_tflops_squared, "
     "attention_tflops_seconds; weight and samples (equal). FLOPs in units of 1e12. The terms are one "
     "least-squares system's sums, of different units: never add them over term; their increase over a window, "
     "per term and summed over replicas, gives the fleet's model.",
     MetricType::Counter, FillComputeSums, ServedFamily::kRates},
    {"kvledger_capacity_requests_total",
     "Records with prefix block ids replayed through their cache's LRU stack for the capacity curves (exact, or "
     "estimated from a sample: kvledger_capacity_sampled_requests_total).",
     MetricType::Counter, FillCurveCount<&CapacityCurves::ModelCurve::requests>, ServedFamily::kCurves},
    {"kvledger_capacity_untracked_requests_total",
     "Records with prefix block ids not replayed: their (model, cache_id) was new while all --capacity_caches "
     "places were held by caches active within --capacity_cache_idle_seconds.",
     MetricType::Counter, FillCurveCount<&CapacityCurves::ModelCurve::untracked>, ServedFamily::kCurves},
    {"kvledger_capacity_caches", "(model, cache_id) pairs replayed now, each with a stack of its own.",
     MetricType::Gauge, FillCurveCaches, ServedFamily::kCurves},
    {"kvledger_capacity_released_caches_total",
     "Caches that gave their place (and their stack's memory) to a new cache after --capacity_cache_idle_seconds "
     "without a record: an engine gone, e.g. a pod replaced by a rolling update.",
     MetricType::Counter, FillCurveCount<&CapacityCurves::ModelCurve::released_caches>, ServedFamily::kCurves},
    {"kvledger_capacity_sampled_requests_total",
     "Replayed records whose cache held more blocks than its share of --capacity_memory_bytes: their figures "
     "are estimated from a hashed sample of the cache's blocks.",
     MetricType::Counter, FillCurveCount<&CapacityCurves::ModelCurve::sampled>, ServedFamily::kCurves},
    {"kvledger_capacity_forgotten_blocks_total",
     "Blocks dropped from a cache's sample as its sampling rate fell to keep within its share of "
     "--capacity_memory_bytes.",
     MetricType::Counter, FillCurveCount<&CapacityCurves::ModelCurve::forgotten_blocks>, ServedFamily::kCurves},
    {"kvledger_capacity_seconds_known_requests_total",
     "Replayed records whose recompute seconds were estimated (the live compute model was ready).",
     MetricType::Counter, FillCurveCount<&CapacityCurves::ModelCurve::seconds_known>, ServedFamily::kCurves},
    {"kvledger_capacity_prompt_tokens_total", "Prompt tokens of the replayed records.", MetricType::Counter,
     FillCurveBaseline<&CapacityCurves::ModelCurve::prompt_tokens>, ServedFamily::kCurves},
    {"kvledger_capacity_attention_baseline_flops_total",
     "Attention FLOPs the replayed records' prompts take without reuse.", MetricType::Counter,
     FillCurveBaseline<&CapacityCurves::ModelCurve::attention_baseline_flops>, ServedFamily::kCurves},
    {"kvledger_capacity_prefill_baseline_flops_total", "Prefill FLOPs the replayed records' prompts take without reuse.",
     MetricType::Counter, FillCurveBaseline<&CapacityCurves::ModelCurve::prefill_baseline_flops>,
     ServedFamily::kCurves},
    {"kvledger_capacity_match_tokens_total",
     "Prefix tokens an LRU cache of capacity_tokens would have matched for the replayed records.",
     MetricType::Counter, FillCurveRungs<&CapacityCurves::Rung::match_tokens>, ServedFamily::kCurves},
    {"kvledger_capacity_attention_avoided_flops_total",
     "Attention FLOPs that cache would have avoided, at the boundary the model resumes at.", MetricType::Counter,
     FillCurveRungs<&CapacityCurves::Rung::attention_avoided_flops>, ServedFamily::kCurves},
    {"kvledger_capacity_prefill_avoided_flops_total",
     "Prefill FLOPs that cache would have avoided, at the boundary the model resumes at.", MetricType::Counter,
     FillCurveRungs<&CapacityCurves::Rung::prefill_avoided_flops>, ServedFamily::kCurves},
    {"kvledger_capacity_recompute_avoided_seconds_total",
     "Estimated prefill seconds that cache would have avoided, over the records of "
     "kvledger_capacity_seconds_known_requests_total.",
     MetricType::Counter, FillCurveRungs<&CapacityCurves::Rung::recompute_avoided_nanos, true>,
     ServedFamily::kCurves},
    {"kvledger_capacity_tier_no_device_requests_total",
     "Records with prefix block ids not costed with the second tiers: no device capacity to stand them below "
     "(no cache_capacity_blocks, and --capacity_device_tokens 0).",
     MetricType::Counter, FillCurveCount<&CapacityCurves::ModelCurve::tier_no_device>, ServedFamily::kCurves},
    {"kvledger_capacity_tier_match_tokens_total",
     "Prefix tokens a second tier of tier_bytes below each cache's device would have held that the device did not.",
     MetricType::Counter, FillTierRungs<kTierMatchTokens>, ServedFamily::kCurves},
    {"kvledger_capacity_tier_attention_avoided_flops_total",
     "Attention FLOPs reusing those tokens avoids, at the boundary the model resumes at.", MetricType::Counter,
     FillTierRungs<kTierAttentionFlops>, ServedFamily::kCurves},
    {"kvledger_capacity_tier_prefill_avoided_flops_total", "Prefill FLOPs reusing those tokens avoids.",
     MetricType::Counter, FillTierRungs<kTierPrefillFlops>, ServedFamily::kCurves},
    {"kvledger_capacity_tier_hit_requests_total", "Records the second tier would have held part of.",
     MetricType::Counter, FillTierRungs<kTierHitRequests>, ServedFamily::kCurves},
    {"kvledger_capacity_tier_seconds_known_requests_total",
     "Of those, the records with a live compute model: the seconds below are over them.", MetricType::Counter,
     FillTierRungs<kTierSecondsKnown>, ServedFamily::kCurves},
    {"kvledger_capacity_tier_recompute_avoided_seconds_total",
     "Prefill seconds the tier's reloads would have avoided, where reloading is faster than recomputing (the "
     "break-even threshold on).",
     MetricType::Counter, FillTierRungs<kTierRecomputeNanos, true>, ServedFamily::kCurves},
    {"kvledger_capacity_tier_reload_seconds_total",
     "Seconds those reloads would have taken: the tier's wait plus their KV bytes over its bandwidth (net seconds "
     "avoided = recompute avoided - reload).",
     MetricType::Counter, FillTierRungs<kTierReloadNanos, true>, ServedFamily::kCurves},
    {"kvledger_capacity_tier_slower_requests_total",
     "Records whose reload from the tier would be slower than recomputing it: the threshold recomputes them.",
     MetricType::Counter, FillTierRungs<kTierSlowerRequests>, ServedFamily::kCurves},
    {"kvledger_capacity_tier_slower_tokens_total", "The tokens the tier holds for those records.",
     MetricType::Counter, FillTierRungs<kTierSlowerTokens>, ServedFamily::kCurves},
    {"kvledger_capacity_tier_slower_excess_seconds_total",
     "Seconds reloading those records regardless would have cost (reload - recompute): the time the tier costs "
     "with the threshold off.",
     MetricType::Counter, FillTierRungs<kTierSlowerExcessNanos, true>, ServedFamily::kCurves},
};

// An ostream target that appends straight to the piece being filled, so a family's text is not
// built in a stringstream and copied out of it (measured: the same CPU, one copy of each family less;
// TextSerializer's own per-character insertions are the cost, docs/performance.md).
class AppendBuffer final : public std::streambuf {
 public:
  explicit AppendBuffer(std::string& out) : out_(out) {}

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    out_.append(s, static_cast<size_t>(n));
    return n;
  }
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof())) out_.push_back(traits_type::to_char_type(c));
    return traits_type::not_eof(c);
  }

 private:
  std::string& out_;
};

}  // namespace

void MetricsExposition::CollectEach(const std::function<void(MetricFamily&)>& emit) const {
  Scrape s;
  s.snapshot = aggregator_.Snapshot();
  s.models = registry_.slots().LabelsBySlot();
  s.registry = &registry_;
  s.live = rates_;
  s.fleet = fleet_;
  if (engine_stats_ != nullptr) s.engine = engine_stats_->Totals();
  if (rates_ != nullptr) {
    s.rates = rates_->Snapshot();
    s.totals = rates_->TotalsNow();
  }
  if (curves_ != nullptr) {
    s.curves = curves_->Snapshot();
    for (uint64_t capacity : curves_->capacities()) s.capacity_labels.push_back(CapacityLabel(capacity));
    for (const TierSize& size : curves_->limits().tiers.sizes) {
      s.tier_labels.push_back({{"tier", TierLabel(size.kind)}, {"tier_bytes", TierBytesLabel(size.bytes)}});
    }
  }
  s.cell_labels.reserve(s.snapshot.cells.size());
  for (const auto& cell : s.snapshot.cells) s.cell_labels.push_back({s.Model(cell.model_slot), {"tier", TierLabel(cell.tier)}});

  // The figures of figure_schema.h, one family per row, in table order.
  for (const CounterSpec& spec : kCounters) {
    MetricFamily f = Family(spec.name, spec.help, MetricType::Counter);
    AddCounterRow(spec, s, f);
    emit(f);
  }
  for (const LatencySpec& spec : kLatencies) {
    MetricFamily f = Family(spec.name, spec.help, MetricType::Histogram);
    const std::array<double, kLatencyBuckets> bounds = SecondsBounds(*spec.bounds);
    for (size_t c = 0; c < s.snapshot.cells.size(); ++c) {
      const LatencyHistogram& h = s.snapshot.cells[c].totals.latency(spec.id);
      if (h.count > 0) f.metric.push_back(HistogramMetric(s.cell_labels[c], h, bounds));
    }
    emit(f);
  }
  for (const RatioSpec& spec : kRatios) {
    MetricFamily f = Family(spec.name, spec.help, MetricType::Histogram);
    for (size_t c = 0; c < s.snapshot.cells.size(); ++c) {
      // A cell declared before its first record has at 0 the ratios every record will observe.
      const RatioHistogram& h = s.snapshot.cells[c].totals.ratio(spec.id);
      if (h.count > 0 || (spec.every_record && s.snapshot.cells[c].totals.requests() == 0)) {
        f.metric.push_back(HistogramMetric(s.cell_labels[c], h, RatioBounds()));
      }
    }
    emit(f);
  }
  for (const ServedFamily& served : kServedFamilies) {
    if ((served.needs == ServedFamily::kEngine && !s.engine) || (served.needs == ServedFamily::kRates && !s.rates) ||
        (served.needs == ServedFamily::kCurves && !s.curves)) {
      continue;
    }
    MetricFamily f = Family(served.name, served.help, served.type);
    served.fill(s, f);
    emit(f);
  }
  for (const prometheus::Collectable* collectable : collectables_) {
    for (MetricFamily& f : collectable->Collect()) {
      f.help = EscapeHelp(f.help);
      emit(f);
    }
  }
}

std::string MetricsExposition::Text() const {
  std::string text;
  Write([&](std::string& piece) { text += piece; });
  return text;
}

void MetricsExposition::Write(const std::function<void(std::string& piece)>& emit, size_t chunk_bytes) const {
  const prometheus::TextSerializer serializer;
  std::vector<MetricFamily> one(1);
  std::string out;
  out.reserve(chunk_bytes + 64 * 1024);
  AppendBuffer buffer(out);
  std::ostream stream(&buffer);
  CollectEach([&](MetricFamily& f) {
    one[0] = std::move(f);
    serializer.Serialize(stream, one);
    if (out.size() >= chunk_bytes) {
      emit(out);
      out.clear();
    }
  });
  emit(out);
}

}  // namespace kvledger
