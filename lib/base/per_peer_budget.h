// A budget shared by client addresses: what is taken counts against a total cap and against the
// taker's own share, so one address never takes the whole of it. The one per-address budget of the
// server: the parts of gRPC requests being parsed (server/wire_admission.h, half per address) and
// the answers parked for slow HTTP readers (server/http/listener.cc, a quarter per address).
// Thread-safe.
#ifndef KVLEDGER_LIB_BASE_PER_PEER_BUDGET_H_
#define KVLEDGER_LIB_BASE_PER_PEER_BUDGET_H_

#include <cstddef>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "lib/base/mutex.h"

namespace kvledger {

class PerPeerBudget {
 public:
  PerPeerBudget(size_t cap, size_t peer_cap) : cap_(cap), peer_cap_(peer_cap) {}
  size_t cap() const { return cap_; }
  size_t peer_cap() const { return peer_cap_; }

  // Takes `amount` for `peer` when both the total and the peer's share allow; false: nothing taken.
  bool TryTake(const std::string& peer, size_t amount) {
    MutexLock lock(&mu_);
    const auto it = per_peer_.find(peer);
    const size_t mine = it == per_peer_.end() ? 0 : it->second;
    if (used_ + amount > cap_ || mine + amount > peer_cap_) return false;
    if (amount == 0) return true;
    per_peer_[peer] = mine + amount;
    used_ += amount;
    return true;
  }
  // Gives back what `peer` took.
  void Give(const std::string& peer, size_t amount) {
    if (amount == 0) return;
    MutexLock lock(&mu_);
    used_ -= amount;
    if (auto it = per_peer_.find(peer); it != per_peer_.end() && (it->second -= amount) == 0) per_peer_.erase(it);
  }
  size_t used() const {
    MutexLock lock(&mu_);
    return used_;
  }

 private:
  const size_t cap_;
  const size_t peer_cap_;
  mutable Mutex mu_;
  size_t used_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, size_t> per_peer_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvledger

#endif  // KVLEDGER_LIB_BASE_PER_PEER_BUDGET_H_
