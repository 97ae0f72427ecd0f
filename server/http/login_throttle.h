// Who may have a password checked now (pure policy, an injected clock; docs/security.md, "Basic
// auth"). Two rules:
//  - per client address, at most `failures_per_window` failed logins in a window; each address's
//    window is its own and expires by itself (no address's failures reset another's);
//  - across all addresses, password hashing (bcrypt) may take at most `hash_core_share` of one core
//    on average, with at most `hash_burst` of it at once: guessing from any number of addresses
//    cannot take more, while a remembered good login costs no hash and is never refused.
// Not thread-safe: the caller serializes.
#ifndef KVLEDGER_SERVER_HTTP_LOGIN_THROTTLE_H_
#define KVLEDGER_SERVER_HTTP_LOGIN_THROTTLE_H_

#include <chrono>
#include <cstddef>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "server/http/clock.h"

namespace kvledger {

class LoginThrottle {
 public:
  struct Limits {
    int failures_per_window = 5;
    std::chrono::milliseconds window{1000};
    // Addresses whose failures are remembered at once; past it a new address is not tracked (the
    // hash budget still holds it) until the oldest windows have expired.
    size_t tracked_addresses = 65536;
    double hash_core_share = 0.25;
    std::chrono::milliseconds hash_burst{1000};
  };

  LoginThrottle(Limits limits, HttpClockSource clock);

  // OK when `peer` may have a password hashed now; RESOURCE_EXHAUSTED saying which rule refused.
  // An OK reserves an estimate of one hash from the budget; Hashed settles it.
  absl::Status MayHash(const std::string& peer);
  // A hash that MayHash allowed took `spent`.
  void Hashed(std::chrono::nanoseconds spent);
  // OK when `peer` has failures left in its window (a check that needs no hash).
  absl::Status MayTry(const std::string& peer);
  void Failed(const std::string& peer);

  size_t tracked() const { return failures_.size(); }
  // Hash time the budget holds now (negative: overdrawn), for tests.
  std::chrono::nanoseconds budget() const { return budget_; }

 private:
  struct Failures {
    HttpClock::time_point window_start;
    int count = 0;
  };
  void Refill(HttpClock::time_point now);
  bool Expired(const Failures& f, HttpClock::time_point now) const { return now - f.window_start >= limits_.window; }
  void Sweep(HttpClock::time_point now);  // forgets expired windows, at most once a window

  const Limits limits_;
  const HttpClockSource clock_;
  absl::flat_hash_map<std::string, Failures> failures_;
  HttpClock::time_point last_sweep_;
  std::chrono::nanoseconds budget_;
  HttpClock::time_point refilled_at_;
  std::chrono::nanoseconds estimate_{std::chrono::milliseconds(50)};  // of one hash, learned
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_HTTP_LOGIN_THROTTLE_H_
