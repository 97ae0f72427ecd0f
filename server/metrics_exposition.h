// Prometheus exposition of the aggregate (docs/operations.md, "Metrics"): turns an Aggregator
// snapshot into the text format (version 0.0.4) at scrape time, walking the tables of
// lib/accounting/figure_schema.h. Counters are printed exactly (integers in full, seconds to the
// nanosecond), not through a double. Nothing on the record path touches it. Thread-safe.
#ifndef KVLEDGER_SERVER_METRICS_EXPOSITION_H_
#define KVLEDGER_SERVER_METRICS_EXPOSITION_H_

#include <functional>
#include <string>
#include <vector>

#include "lib/accounting/aggregator.h"
#include "lib/accounting/engine_stats.h"
#include "lib/accounting/live_rates.h"
#include "lib/profiles/model_registry.h"

namespace kvledger {

inline constexpr char kExpositionContentType[] = "text/plain; version=0.0.4; charset=utf-8";

class MetricsExposition {
 public:
  // All references must outlive the exposition.
  MetricsExposition(const Aggregator& aggregator, const ModelRegistry& registry, std::string version,
                    const LiveRates* rates = nullptr, const EngineStats* engine_stats = nullptr)
      : aggregator_(aggregator), registry_(registry), version_(std::move(version)), rates_(rates),
        engine_stats_(engine_stats) {}

  // The whole exposition. Per populated (model, tier): every counter of the schema, the ratio
  // histograms, and each latency histogram once the cell has observed that latency.
  std::string Text() const;
  // The same text in pieces of about `chunk_bytes`: `emit` receives each piece and may consume it.
  // A scrape of 1,000 models then never holds its 40 MB at once.
  void Write(const std::function<void(std::string& piece)>& emit, size_t chunk_bytes = 256 * 1024) const;

 private:
  void WriteEngineStats(std::string& out, const std::vector<ModelLabel>& models) const;

  const Aggregator& aggregator_;
  const ModelRegistry& registry_;
  const std::string version_;
  const LiveRates* const rates_;
  const EngineStats* const engine_stats_;
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_METRICS_EXPOSITION_H_
