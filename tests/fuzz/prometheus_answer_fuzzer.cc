// libFuzzer target: arbitrary bytes as what a Prometheus at --fleet_prometheus_url answers, through
// the bounded answer parser and the fleet table built from it. Under ASan/UBSan no input crashes,
// the bounds hold, and every rate a table accepts is finite and plausible.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "lib/accounting/fleet_rates.h"
#include "lib/wire/prometheus_vector.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto samples = kvledger::ParsePrometheusVector(text);
  if (!samples.ok()) return 0;
  if (samples->size() > kvledger::kMaxPrometheusSamples) std::abort();
  for (const auto& s : *samples) {
    if (s.labels.size() > kvledger::kMaxPrometheusLabels) std::abort();
  }
  auto table = kvledger::FleetRates::FromSamples(*samples, *samples);
  if (!table.ok()) return 0;
  for (const auto& [key, rate] : table->reload) {
    const auto evidence = rate.Evidence();
    if (evidence && !(evidence->rate >= kvledger::kPlausibleBandwidth[0] && evidence->rate <= kvledger::kPlausibleBandwidth[1])) {
      std::abort();
    }
  }
  for (const auto& [model, fit] : table->compute) {
    const auto time = fit.Fit();
    if (time && !std::isfinite(time->FlopsPerSecond())) std::abort();
  }
  return 0;
}
