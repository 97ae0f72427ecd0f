// Which scrapers have read /metrics since an instant: what the SIGTERM sequence waits for before the
// process exits, so that every record a replica acknowledged reaches each Prometheus scraping it
// (docs/operations.md, "SIGTERM"). A scraper is a client address that had a /metrics page written
// to it whole; one counts as active while its latest such scrape began within kActiveSeconds of the
// instant asked about. Pure: times are seconds on any monotonic clock, passed in. Thread-safe.
#ifndef KVLEDGER_SERVER_SCRAPE_WITNESS_H_
#define KVLEDGER_SERVER_SCRAPE_WITNESS_H_

#include <cstddef>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "lib/base/mutex.h"

namespace kvledger {

class ScrapeWitness {
 public:
  // Scrapers remembered at most (the oldest is forgotten past it): more than any fleet of
  // Prometheus servers, few enough that a client making up addresses costs nothing.
  static constexpr size_t kMaxScrapers = 64;
  // A scraper whose latest scrape began longer before the instant asked about is not waited for
  // (eight scrape intervals of 15 s).
  static constexpr double kActiveSeconds = 120;

  // A scrape by `peer` that began at `started` was written whole.
  void Delivered(const std::string& peer, double started);
  // Whether any page has been written whole yet.
  bool Any() const;
  // True when at least one scraper was active at `cutoff` and every active one has had a scrape
  // that began at or after `cutoff` written whole; false while none is known (one may still come).
  bool AllSince(double cutoff) const;

 private:
  mutable Mutex mu_;
  absl::flat_hash_map<std::string, double> latest_ ABSL_GUARDED_BY(mu_);  // peer -> latest scrape's start
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_SCRAPE_WITNESS_H_
