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

ClientMetric CounterMetric(std::vector<ClientMetric::Label> labels, double value) {
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

  // The figures of figure_schema.h, one family per row, in table order.
  std::vector<MetricFamily> families;
  for (const CounterSpec& spec : kCounters) families.push_back(Family(spec.name, spec.help, MetricType::Counter));
  for (const LatencySpec& spec : kLatencies) families.push_back(Family(spec.name, spec.help, MetricType::Histogram));
  for (const RatioSpec& spec : kRatios) families.push_back(Family(spec.name, spec.help, MetricType::Histogram));

  for (const auto& cell : snapshot.cells) {
    const Totals& t = cell.totals;
    const std::vector<ClientMetric::Label> base = {{"model", model_of(cell.model_slot)},
                                                   {"tier", TierLabel(cell.tier)}};
    auto with = [&](const char* name, const char* value) {
      auto l = base;
      l.push_back({name, value});
      return l;
    };
    size_t f = 0;
    for (const CounterSpec& spec : kCounters) {
      auto& metrics = families[f++].metric;
      const double scale = spec.nanounits ? 1 / kNanoUnitsPerUnit : 1;
      auto value = [&](int i) { return Uint128ToDouble(t.counter(spec.id, i)) * scale; };
      switch (spec.dimension) {
        case Dimension::kNone:
          metrics.push_back(CounterMetric(base, value(0)));
          break;
        case Dimension::kCause:
          for (Cause c : kAllCauses) metrics.push_back(CounterMetric(with("cause", CauseLabel(c)), value(static_cast<int>(c))));
          break;
        case Dimension::kBoundary:
          for (Boundary b : kAllBoundaries) {
            metrics.push_back(CounterMetric(with("boundary", BoundaryLabel(b)), value(static_cast<int>(b))));
          }
          break;
      }
    }
    for (const LatencySpec& spec : kLatencies) families[f++].metric.push_back(Histogram(base, t.latency(spec.id), LatencyBound));
    for (const RatioSpec& spec : kRatios) families[f++].metric.push_back(Histogram(base, t.ratio(spec.id), RatioBound));
  }

  auto rejected = Family("kvledger_records_rejected_total", "Records rejected, by reason.",
                         MetricType::Counter);
  for (RejectReason reason : kAllRejectReasons) {
    rejected.metric.push_back(CounterMetric({{"reason", RejectReasonLabel(reason)}},
                                      static_cast<double>(snapshot.rejected[static_cast<size_t>(reason)])));
  }
  auto folded = Family("kvledger_model_label_folded_records_total",
                       "Records counted under model=\"other\" because --max_models distinct model "
                       "labels were already in use.",
                       MetricType::Counter);
  folded.metric.push_back(CounterMetric({}, static_cast<double>(snapshot.folded_records)));

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

  for (auto* f : {&rejected, &folded, &info, &build}) families.push_back(std::move(*f));
  return families;
}

}  // namespace kvledger
