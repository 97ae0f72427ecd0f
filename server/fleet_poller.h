// --fleet_prometheus_url: reads the fleet's live rates back from Prometheus (the recording rules of
// the group kvledger.fleet, lib/accounting/fleet_rates.h) every --fleet_refresh_seconds, so Advise
// answers alike on every replica. Plain HTTP GET of the instant-query API, one query per rule,
// selected by --fleet_job; a failed fetch keeps the last table until it is too old, after which
// Advise answers from this replica's own rates again.
#ifndef KVLEDGER_SERVER_FLEET_POLLER_H_
#define KVLEDGER_SERVER_FLEET_POLLER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "lib/accounting/fleet_rates.h"

namespace kvledger {

class ServerMetrics;

// The recording rules a replica reads (deploy/prometheus/rules/kvledger-rules.yml).
inline constexpr char kFleetReloadRule[] = "model_tier:kvledger_live_reload_sums:increase10m";
inline constexpr char kFleetComputeRule[] = "model:kvledger_live_compute_fit_sums:increase10m";

// Where Prometheus answers: http://HOST[:PORT][/PATH_PREFIX].
struct PrometheusUrl {
  std::string host;
  std::string port = "80";
  std::string path_prefix;  // "" or "/prefix", no trailing slash
};
// INVALID_ARGUMENT naming `flag` for anything but an http:// URL with a host.
absl::StatusOr<PrometheusUrl> ParsePrometheusUrl(const std::string& flag, const std::string& url);

// The largest answer read from Prometheus: the fleet rules' answer is ~160 bytes a sample.
inline constexpr size_t kMaxFleetAnswerBytes = size_t{8} << 20;

// GET `path` (with its query) from `url`'s server, HTTP/1.0; the body of a 200 answer by `timeout`,
// at most kMaxFleetAnswerBytes. Anything else is UNAVAILABLE saying what happened (connection
// refused, the status line, a timeout, the size), with Prometheus's own error when the body has
// one; CANCELLED within 100 ms of `cancel` being notified.
absl::StatusOr<std::string> HttpGet(const PrometheusUrl& url, const std::string& path, absl::Duration timeout,
                                    const absl::Notification* cancel = nullptr);

class FleetPoller {
 public:
  // Polls at once and then every `refresh` on a thread of its own until destroyed. `metrics` may
  // be null.
  FleetPoller(PrometheusUrl url, std::string job, absl::Duration refresh, FleetRates& rates,
              ServerMetrics* metrics);
  ~FleetPoller();

  // One fetch of both rules into `rates`.
  absl::Status PollOnce();

 private:
  absl::StatusOr<std::vector<LabeledSample>> Query(const char* rule) const;
  void Run();

  const PrometheusUrl url_;
  const std::string job_;
  const absl::Duration refresh_;
  FleetRates& rates_;
  ServerMetrics* const metrics_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_FLEET_POLLER_H_
