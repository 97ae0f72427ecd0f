// Prometheus exposition of the aggregate (docs/operations.md, "Metrics"): a prometheus::Collectable that turns an
// Aggregator snapshot into metric families at scrape time. Nothing on the record path touches
// prometheus-cpp. Thread-safe.
#ifndef KVLEDGER_SERVER_METRICS_EXPOSITION_H_
#define KVLEDGER_SERVER_METRICS_EXPOSITION_H_

#include <string>
#include <vector>

#include "lib/accounting/aggregator.h"
#include "lib/profiles/model_registry.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace kvledger {

class MetricsExposition final : public prometheus::Collectable {
 public:
  // All references must outlive the exposition.
  MetricsExposition(const Aggregator& aggregator, const ModelRegistry& registry, std::string version)
      : aggregator_(aggregator), registry_(registry), version_(std::move(version)) {}

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const Aggregator& aggregator_;
  const ModelRegistry& registry_;
  const std::string version_;
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_METRICS_EXPOSITION_H_
