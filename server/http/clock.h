// The one clock of the HTTP module: every rule that decides by time (head and answer deadlines, the
// login throttle's windows, the password-hash budget) reads it through an HttpClockSource, so a test
// hands in a fake one and moves time by hand.
#ifndef KVLEDGER_SERVER_HTTP_CLOCK_H_
#define KVLEDGER_SERVER_HTTP_CLOCK_H_

#include <chrono>
#include <functional>

namespace kvledger {

using HttpClock = std::chrono::steady_clock;
using HttpClockSource = std::function<HttpClock::time_point()>;

inline HttpClockSource SystemHttpClock() {
  return [] { return HttpClock::now(); };
}

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_HTTP_CLOCK_H_
