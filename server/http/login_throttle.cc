#include "server/http/login_throttle.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kvledger {

LoginThrottle::LoginThrottle(Limits limits, HttpClockSource clock)
    : limits_(limits), clock_(std::move(clock)), budget_(limits.hash_burst) {
  refilled_at_ = clock_();
  last_sweep_ = refilled_at_;
}

void LoginThrottle::Refill(HttpClock::time_point now) {
  const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(now - refilled_at_);
  refilled_at_ = now;
  const auto earned = std::chrono::nanoseconds(static_cast<int64_t>(elapsed.count() * limits_.hash_core_share));
  budget_ = std::min<std::chrono::nanoseconds>(budget_ + earned, limits_.hash_burst);
}

void LoginThrottle::Sweep(HttpClock::time_point now) {
  if (now - last_sweep_ < limits_.window) return;
  last_sweep_ = now;
  absl::erase_if(failures_, [&](const auto& entry) { return Expired(entry.second, now); });
}

absl::Status LoginThrottle::MayTry(const std::string& peer) {
  const auto now = clock_();
  const auto it = failures_.find(peer);
  if (it == failures_.end() || Expired(it->second, now) || it->second.count < limits_.failures_per_window) {
    return absl::OkStatus();
  }
  return absl::ResourceExhaustedError(absl::StrCat(limits_.failures_per_window, " failed logins from ", peer,
                                                   " within ", limits_.window.count(), " ms"));
}

absl::Status LoginThrottle::MayHash(const std::string& peer) {
  if (absl::Status s = MayTry(peer); !s.ok()) return s;
  Refill(clock_());
  if (budget_.count() <= 0) {
    return absl::ResourceExhaustedError(absl::StrCat("password checks are using their share of the CPU (",
                                                     limits_.hash_core_share, " of a core)"));
  }
  budget_ -= estimate_;
  return absl::OkStatus();
}

void LoginThrottle::Hashed(std::chrono::nanoseconds spent) {
  budget_ += estimate_ - spent;  // settles the reservation at the measured cost
  estimate_ = (estimate_ * 3 + spent) / 4;
}

void LoginThrottle::Failed(const std::string& peer) {
  const auto now = clock_();
  auto it = failures_.find(peer);
  if (it == failures_.end()) {
    Sweep(now);
    if (failures_.size() >= limits_.tracked_addresses) return;  // full of live windows: the budget holds it
    it = failures_.emplace(peer, Failures{now, 0}).first;
  }
  Failures& f = it->second;
  if (Expired(f, now)) f = Failures{now, 0};
  ++f.count;
}

}  // namespace kvledger
