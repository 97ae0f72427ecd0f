#include "server/http/admission.h"

#include "absl/strings/str_cat.h"

namespace kvledger {

int ConnectionTable::open(const std::string& peer) const {
  const auto it = per_peer_.find(peer);
  return it == per_peer_.end() ? 0 : it->second;
}

absl::Status ConnectionTable::MayOpen(const std::string& peer, std::optional<std::string>* victim) const {
  victim->reset();
  const int mine = open(peer);
  if (mine >= limits_.connections_per_client) {
    return absl::UnavailableError(
        absl::StrCat("this address has ", mine, " connections open, the most one address may"));
  }
  if (total_ < limits_.connections) return absl::OkStatus();
  // Full: the address with the most connections gives one up, if it would still hold more than
  // the newcomer after (the busiest address loses the first of ties: the map's order).
  const std::pair<const std::string, int>* busiest = nullptr;
  for (const auto& entry : per_peer_) {
    if (busiest == nullptr || entry.second > busiest->second) busiest = &entry;
  }
  if (busiest == nullptr || busiest->second <= mine + 1) {
    return absl::UnavailableError(absl::StrCat("all ", limits_.connections, " connections are open"));
  }
  *victim = busiest->first;
  return absl::OkStatus();
}

bool ParkedBudget::Reserve(const std::string& peer, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = per_peer_.find(peer);
  const size_t mine = it == per_peer_.end() ? 0 : it->second;
  if (used_ + bytes > cap_ || mine + bytes > cap_ / 4) return false;
  per_peer_[peer] = mine + bytes;
  used_ += bytes;
  return true;
}

void ParkedBudget::Release(const std::string& peer, size_t bytes) {
  if (bytes == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  used_ -= bytes;
  if (auto it = per_peer_.find(peer); it != per_peer_.end() && (it->second -= bytes) == 0) per_peer_.erase(it);
}

size_t ParkedBudget::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

void ConnectionTable::Opened(const std::string& peer) {
  ++per_peer_[peer];
  ++total_;
}

void ConnectionTable::Closed(const std::string& peer) {
  const auto it = per_peer_.find(peer);
  if (it == per_peer_.end()) return;
  --total_;
  if (--it->second == 0) per_peer_.erase(it);
}

}  // namespace kvledger
