// The /metrics writer (docs/operations.md, "Metrics"), on prometheus-cpp's data model: it turns an
// Aggregator snapshot (and the live rates and engine statistics) into MetricFamily values at scrape
// time, one family per row of lib/accounting/figure_schema.h plus the rows of kServedFamilies
// (metrics_exposition.cc), then the families of every prometheus::Collectable it was handed (the
// server's own registry), as prometheus-cpp's Exposer writes its list; prometheus::TextSerializer
// writes them, family by family. Nothing on the record path touches it. Thread-safe.
//
// Values pass through doubles, as everywhere in Prometheus (float64 samples): integers are exact up
// to 2^53 and print in full; larger ones print with 16 significant digits. The exact integer totals
// stay available where a person reads them (/api/v1/totals, Explain).
#ifndef KVLEDGER_SERVER_METRICS_EXPOSITION_H_
#define KVLEDGER_SERVER_METRICS_EXPOSITION_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "lib/accounting/aggregator.h"
#include "lib/capacity/capacity_curves.h"
#include "lib/accounting/engine_stats.h"
#include "lib/accounting/fleet_rates.h"
#include "lib/accounting/live_rates.h"
#include "lib/profiles/model_registry.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace kvledger {

inline constexpr char kExpositionContentType[] = "text/plain; version=0.0.4; charset=utf-8";

class MetricsExposition final {
 public:
  // All references must outlive the exposition; `rates`, `engine_stats`, `curves` and `fleet` may be
  // null. `collectables` (e.g. the server's operational metrics, ServerMetrics) are written after
  // the figures, in order. `fleet` (--fleet_prometheus_url) is where the break-even gauge reads its
  // rates first, as Advise does.
  MetricsExposition(const Aggregator& aggregator, const ModelRegistry& registry, const LiveRates* rates = nullptr,
                    const EngineStats* engine_stats = nullptr,
                    std::vector<const prometheus::Collectable*> collectables = {},
                    const CapacityCurves* curves = nullptr, const FleetRates* fleet = nullptr)
      : aggregator_(aggregator),
        registry_(registry),
        rates_(rates),
        engine_stats_(engine_stats),
        collectables_(std::move(collectables)),
        curves_(curves),
        fleet_(fleet) {}

  // Every family one at a time, from one snapshot; `emit` may move from each. Per populated
  // (model, tier): every counter of the schema, the ratio histograms, and each latency histogram
  // once the cell has observed that latency.
  void CollectEach(const std::function<void(prometheus::MetricFamily&)>& emit) const;

  // The whole text exposition.
  std::string Text() const;
  // The same text in pieces of about `chunk_bytes`, serialized family by family: `emit` receives
  // each piece and may consume it, so a scrape of 1,000 models never holds every series at once.
  void Write(const std::function<void(std::string& piece)>& emit, size_t chunk_bytes = 256 * 1024) const;

 private:
  const Aggregator& aggregator_;
  const ModelRegistry& registry_;
  const LiveRates* const rates_;
  const EngineStats* const engine_stats_;
  const std::vector<const prometheus::Collectable*> collectables_;
  const CapacityCurves* const curves_;
  const FleetRates* const fleet_;
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_METRICS_EXPOSITION_H_
