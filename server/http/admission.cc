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
