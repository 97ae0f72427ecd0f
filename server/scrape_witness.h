// Which scrapers have read /metrics since an instant: what the SIGTERM sequence waits for before the
// process exits, so that every record a replica acknowledged reaches each Prometheus scraping it,
// and what readiness waits for at start (docs/operations.md, "SIGTERM"; docs/security.md).
//
// Who counts: a client address that says it is a scraper (HttpRequest::scraper) and had a /metrics
// page delivered whole (acknowledged by its TCP: HttpResponse::delivered). One counts as active
// while its latest delivered scrape began within kActiveSeconds of the instant asked about.
//
// No client can shorten the wait, only lengthen it up to the caller's grace: at most kMaxScrapers
// addresses are remembered, an active one is never forgotten to make room, and a scraper that found
// no room is remembered as an overflow whose instant makes AllSince false for every cutoff up to
// kActiveSeconds after it (the witness cannot tell whether that scraper read again). Freeze() at the cutoff stops
// admitting addresses, so a flood during the wait changes nothing.
//
// Pure: times are seconds on any monotonic clock, passed in. Thread-safe.
#ifndef KVLEDGER_SERVER_SCRAPE_WITNESS_H_
#define KVLEDGER_SERVER_SCRAPE_WITNESS_H_

#include <cstddef>
#include <limits>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "lib/base/mutex.h"

namespace kvledger {

class ScrapeWitness {
 public:
  // Scrapers remembered at most: more than any fleet of Prometheus servers, few enough that a
  // client making up addresses costs nothing.
  static constexpr size_t kMaxScrapers = 64;
  // A scraper whose latest scrape began longer before the instant asked about is not waited for
  // (eight scrape intervals of 15 s).
  static constexpr double kActiveSeconds = 120;

  // A scrape by `peer` that began at `started` was delivered whole.
  void Delivered(const std::string& peer, double started);
  // Whether any page has been delivered whole yet.
  bool Any() const;
  // From now on no address is admitted (nor forgotten): the set waited for is the one of the cutoff.
  void Freeze();
  // True when at least one scraper was active at `cutoff`, every active one has had a scrape that
  // began at or after `cutoff` delivered whole, and no scraper active at `cutoff` went untracked;
  // false otherwise (the caller waits until its grace ends).
  bool AllSince(double cutoff) const;

 private:
  mutable Mutex mu_;
  absl::flat_hash_map<std::string, double> latest_ ABSL_GUARDED_BY(mu_);  // peer -> latest scrape's start
  // The latest start of a scrape whose scraper found no room.
  double overflow_ ABSL_GUARDED_BY(mu_) = -std::numeric_limits<double>::infinity();
  bool frozen_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_SCRAPE_WITNESS_H_
