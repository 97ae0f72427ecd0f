#include "server/metrics_exposition.h"

#include <functional>
#include <set>

#include "absl/strings/str_cat.h"

namespace kvledger {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(const char* name, const char* help, MetricType type) {
  MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = type;
  return family;
}

ClientMetric Counter(std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric metric;
  metric.label = std::move(labels);
  metric.counter.value = value;
  return metric;
}

template <size_t kBuckets>
ClientMetric Histogram(std::vector<ClientMetric::Label> labels, const FixedHistogram<kBuckets>& h,
                       const std::function<double(size_t)>& bound) {
  ClientMetric metric;
  metric.label = std::move(labels);
  metric.histogram.sample_count = h.count;
  metric.histogram.sample_sum = Uint128ToDouble(h.sum_nanounits) / kNanoUnitsPerUnit;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kBuckets; ++i) {
    cumulative += h.counts[i];
    metric.histogram.bucket.push_back({cumulative, bound(i)});
  }
  cumulative += h.counts[kBuckets];
  metric.histogram.bucket.push_back({cumulative, std::numeric_limits<double>::infinity()});
  return metric;
}

double LatencyBound(size_t i) { return kLatencyBucketsSeconds[i]; }
double RatioBound(size_t i) { return static_cast<double>(i + 1) / kRatioBuckets; }

}  // namespace

std::vector<MetricFamily> MetricsExposition::Collect() const {
  const AggregateSnapshot snapshot = aggregator_.Snapshot();
  const std::vector<ModelLabel> labels = registry_.Labels();
  auto model_of = [&](uint32_t slot) {
    return slot < labels.size() ? labels[slot].model : std::string(kOtherModelLabel);
  };

  auto requests = Family("kvledger_requests_total", "Records accepted.", MetricType::Counter);
  auto prompt = Family("kvledger_prompt_tokens_total", "Sum of prompt tokens N.", MetricType::Counter);
  auto logical = Family("kvledger_logical_match_tokens_total",
                        "Sum of logical prefix match tokens P_match.", MetricType::Counter);
  auto recoverable = Family("kvledger_recoverable_tokens_total",
                            "Sum of recoverable boundary tokens P_rec.", MetricType::Counter);
  auto reused = Family("kvledger_reused_tokens_total", "Sum of effectively reused tokens P_eff.",
                       MetricType::Counter);
  auto recompute = Family("kvledger_recompute_tokens_total",
                          "Tokens inside the logical match computed again, by cause: alignment "
                          "(P_match - P_rec) or restore (P_rec - P_eff).",
                          MetricType::Counter);
  auto attention_baseline = Family("kvledger_attention_baseline_flops_total",
                                   "Attention (sequence-mixing) FLOPs of a full prefill without reuse.",
                                   MetricType::Counter);
  auto attention_avoided = Family("kvledger_attention_avoided_flops_total",
                                  "Attention FLOPs that reuse up to the boundary avoids.",
                                  MetricType::Counter);
  auto prefill_baseline = Family("kvledger_prefill_baseline_flops_total",
                                 "Whole-prefill FLOPs (attention + token-wise) without reuse.",
                                 MetricType::Counter);
  auto prefill_avoided = Family("kvledger_prefill_avoided_flops_total",
                                "Whole-prefill FLOPs that reuse up to the boundary avoids.",
                                MetricType::Counter);
  auto bytes = Family("kvledger_reused_bytes_total", "KV/state bytes of the reused prefix.",
                      MetricType::Counter);
  auto compared = Family("kvledger_reload_compared_requests_total",
                         "Records with a measured reload_seconds and a recompute estimate (a suffix "
                         "prefill time or a profile throughput): the records the kvledger_compared_* "
                         "and estimated/slower counters cover.",
                         MetricType::Counter);
  auto estimated = Family("kvledger_estimated_recompute_seconds_total",
                          "Estimated seconds computing the reused prefix would have cost, over the "
                          "records of kvledger_reload_compared_requests_total.",
                          MetricType::Counter);
  auto compared_reload = Family("kvledger_compared_reload_seconds_total",
                                "Reload seconds paid, over the records of "
                                "kvledger_reload_compared_requests_total.",
                                MetricType::Counter);
  auto compared_suffix = Family("kvledger_compared_suffix_prefill_seconds_total",
                                "Suffix prefill seconds (measured, else from the profile throughput), "
                                "over the records of kvledger_reload_compared_requests_total.",
                                MetricType::Counter);
  auto compared_bytes = Family("kvledger_compared_reused_bytes_total",
                               "KV/state bytes reused, over the records of "
                               "kvledger_reload_compared_requests_total (bytes per reload second = "
                               "effective reload bandwidth).",
                               MetricType::Counter);
  auto slower = Family("kvledger_reload_slower_than_recompute_total",
                       "Records of kvledger_reload_compared_requests_total whose reload took longer "
                       "than the estimated recompute.",
                       MetricType::Counter);
  auto disagreements = Family("kvledger_recoverable_model_disagreements_total",
                              "Records whose reported recoverable boundary differs from the "
                              "profile's model (a sign of a stale profile).",
                              MetricType::Counter);
  auto reload_h = Family("kvledger_reload_seconds", "Reload latency per record that reported one.",
                         MetricType::Histogram);
  auto suffix_h = Family("kvledger_suffix_prefill_seconds",
                         "Suffix prefill latency per record that reported one.", MetricType::Histogram);
  auto ttft_h = Family("kvledger_ttft_seconds", "Time to first token per record that reported one.",
                       MetricType::Histogram);
  auto logical_h = Family("kvledger_logical_hit_ratio",
                          "Per-record logical hit ratio P_match/N (spread only; use token counters "
                          "for fleet ratios).",
                          MetricType::Histogram);
  auto reused_h = Family("kvledger_reused_hit_ratio",
                         "Per-record effective hit ratio P_eff/N (spread only; use token counters "
                         "for fleet ratios).",
                         MetricType::Histogram);

  for (const auto& cell : snapshot.cells) {
    const Totals& t = cell.totals;
    const std::vector<ClientMetric::Label> base = {{"model", model_of(cell.model_slot)},
                                                   {"tier", TierLabel(cell.tier)}};
    auto with = [&](const char* name, const char* value) {
      auto l = base;
      l.push_back({name, value});
      return l;
    };
    auto d = Uint128ToDouble;
    requests.metric.push_back(Counter(base, static_cast<double>(t.requests)));
    prompt.metric.push_back(Counter(base, d(t.prompt_tokens)));
    logical.metric.push_back(Counter(base, d(t.logical_match_tokens)));
    recoverable.metric.push_back(Counter(base, d(t.recoverable_tokens)));
    reused.metric.push_back(Counter(base, d(t.reused_tokens)));
    recompute.metric.push_back(Counter(with("cause", "alignment"), d(t.recompute_alignment_tokens)));
    recompute.metric.push_back(Counter(with("cause", "restore"), d(t.recompute_restore_tokens)));
    attention_baseline.metric.push_back(Counter(base, d(t.attention_baseline_flops)));
    prefill_baseline.metric.push_back(Counter(base, d(t.prefill_baseline_flops)));
    for (int b = 0; b < kBoundaryCount; ++b) {
      const char* boundary = BoundaryLabel(static_cast<Boundary>(b));
      attention_avoided.metric.push_back(Counter(with("boundary", boundary), d(t.attention_avoided_flops[b])));
      prefill_avoided.metric.push_back(Counter(with("boundary", boundary), d(t.prefill_avoided_flops[b])));
    }
    bytes.metric.push_back(Counter(base, d(t.reused_bytes)));
    compared.metric.push_back(Counter(base, static_cast<double>(t.reload_compared_requests)));
    estimated.metric.push_back(Counter(base, d(t.estimated_recompute_nanoseconds) / kNanoUnitsPerUnit));
    compared_reload.metric.push_back(Counter(base, d(t.compared_reload_nanoseconds) / kNanoUnitsPerUnit));
    compared_suffix.metric.push_back(Counter(base, d(t.compared_suffix_prefill_nanoseconds) / kNanoUnitsPerUnit));
    compared_bytes.metric.push_back(Counter(base, d(t.compared_reused_bytes)));
    slower.metric.push_back(Counter(base, static_cast<double>(t.reload_slower_than_recompute)));
    disagreements.metric.push_back(Counter(base, static_cast<double>(t.recoverable_model_disagreements)));
    reload_h.metric.push_back(Histogram(base, t.reload_seconds, LatencyBound));
    suffix_h.metric.push_back(Histogram(base, t.suffix_prefill_seconds, LatencyBound));
    ttft_h.metric.push_back(Histogram(base, t.ttft_seconds, LatencyBound));
    logical_h.metric.push_back(Histogram(base, t.logical_hit_ratio, RatioBound));
    reused_h.metric.push_back(Histogram(base, t.reused_hit_ratio, RatioBound));
  }

  auto rejected = Family("kvledger_records_rejected_total", "Records rejected, by reason.",
                         MetricType::Counter);
  for (int r = 0; r < kRejectReasonCount; ++r) {
    rejected.metric.push_back(Counter({{"reason", RejectReasonLabel(static_cast<RejectReason>(r))}},
                                      static_cast<double>(snapshot.rejected[r])));
  }
  auto folded = Family("kvledger_model_label_folded_records_total",
                       "Records counted under model=\"other\" because --max_models distinct model "
                       "labels were already in use.",
                       MetricType::Counter);
  folded.metric.push_back(Counter({}, static_cast<double>(snapshot.folded_records)));

  // One info series per profile in the catalog, and per label whose name costs with another
  // profile (an opted-in unknown model costed as "generic").
  auto info = Family("kvledger_model_info",
                     "Profile facts per model label, value 1; join on model.", MetricType::Gauge);
  auto add_info = [&](const std::string& model, const Profile& p) {
    ClientMetric metric;
    uint64_t layers = 0;
    for (const auto& g : p.shape().groups) layers += g.num_layers;
    const auto& serving = p.definition().serving();
    metric.label = {{"model", model},
                    {"profile", p.name()},
                    {"attention", p.attention_summary()},
                    {"layers", absl::StrCat(layers)},
                    {"kv_page_tokens", absl::StrCat(serving.kv_page_tokens())},
                    {"recurrent_checkpoint_tokens", absl::StrCat(serving.recurrent_checkpoint_tokens())}};
    metric.gauge.value = 1;
    info.metric.push_back(std::move(metric));
  };
  const ProfileCatalog& catalog = registry_.catalog();
  for (const auto& name : catalog.Names()) add_info(name, *catalog.Find(name));
  for (const auto& label : labels) {
    if (catalog.Find(label.model) == nullptr) add_info(label.model, *label.profile);
  }

  auto build = Family("kvledger_build_info", "Build facts, value 1.", MetricType::Gauge);
  ClientMetric build_metric;
  build_metric.label = {{"version", version_}};
  build_metric.gauge.value = 1;
  build.metric.push_back(std::move(build_metric));

  std::vector<MetricFamily> families;
  for (auto* f : {&requests, &prompt, &logical, &recoverable, &reused, &recompute, &attention_baseline,
                  &attention_avoided, &prefill_baseline, &prefill_avoided, &bytes, &compared, &estimated,
                  &compared_reload, &compared_suffix, &compared_bytes, &slower,
                  &disagreements, &reload_h, &suffix_h, &ttft_h, &logical_h, &reused_h, &rejected,
                  &folded, &info, &build}) {
    families.push_back(std::move(*f));
  }
  return families;
}

}  // namespace kvledger
