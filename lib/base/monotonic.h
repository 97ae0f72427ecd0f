// Seconds on the coarse monotonic clock (resolution of a few milliseconds): the default clock of the
// rules that decide by time in lib/ (live rates' half-lives, the capacity curves' idle caches), each
// of which takes a std::function<double()> instead so that a test moves time by hand.
#ifndef KVLEDGER_LIB_BASE_MONOTONIC_H_
#define KVLEDGER_LIB_BASE_MONOTONIC_H_

#include <time.h>

namespace kvledger {

inline double MonotonicSeconds() {
  // A few milliseconds of resolution, plenty against half-lives and idle times of minutes, for a
  // fraction of a fine clock read on the record path.
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

}  // namespace kvledger

#endif  // KVLEDGER_LIB_BASE_MONOTONIC_H_
