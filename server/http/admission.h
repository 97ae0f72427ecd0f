// Who gets a connection, a place in line and a worker on the HTTP port (pure policy: no sockets,
// no threads, no clock; the listener holds its lock around every call). docs/security.md, "The
// metrics port". The rules, each fair per client address:
//  - Connections: at most `connections_per_client` for one address. When all `connections` are
//    open, a new one is admitted by closing a waiting connection of the address holding the most,
//    if that address holds more than the newcomer would: N busy addresses end up with equal
//    shares, and an address with few connections always finds room.
//  - Requests: an address with nothing in flight is always admitted (so a new scraper is never
//    refused); otherwise at most `in_flight_per_client` for one address and `max_in_flight` in all.
//  - Workers: addresses take turns (round robin), each with at most `served_per_client` in service.
//  - Parking: a slow reader's answer is held whole within a budget, a quarter of it per address.
#ifndef KVLEDGER_SERVER_HTTP_ADMISSION_H_
#define KVLEDGER_SERVER_HTTP_ADMISSION_H_

#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "lib/base/per_peer_budget.h"
#include "server/http/limits.h"

namespace kvledger {

// The listener's bounds these policies apply, their defaults those of server/http/limits.h.
struct AdmissionLimits {
  int connections = HttpLimits().connections;
  int connections_per_client = HttpLimits().connections_per_client;
  int max_in_flight = HttpLimits().max_in_flight;
  int in_flight_per_client = HttpLimits().in_flight_per_client;
  int served_per_client = HttpLimits().served_per_client;
};

// Open connections per address.
class ConnectionTable {
 public:
  explicit ConnectionTable(const AdmissionLimits& limits) : limits_(limits) {}
  // OK: open it (Opened follows). With the table full, `victim` names the address one of whose
  // waiting connections must close first (Closed, then Opened). UNAVAILABLE (503) saying why when
  // it may not open.
  absl::Status MayOpen(const std::string& peer, std::optional<std::string>* victim) const;
  void Opened(const std::string& peer);
  void Closed(const std::string& peer);
  int open() const { return total_; }
  int open(const std::string& peer) const;

 private:
  const AdmissionLimits limits_;
  std::map<std::string, int> per_peer_;
  int total_ = 0;
};

// Bytes of answers parked with the event thread, across connections: an answer is parked whole
// (its whole unsent rest taken at once) or not at all, and one address may hold at most a quarter of
// the budget, so a few slow readers cannot fragment it for everyone.
inline PerPeerBudget MakeParkedBudget(size_t cap) { return PerPeerBudget(cap, cap / 4); }

// Requests waiting for a worker or in service, per address; `Item` is the listener's connection.
template <typename Item>
class FairQueue {
 public:
  explicit FairQueue(const AdmissionLimits& limits) : limits_(limits) {}

  // OK when a request of `peer` may wait for a worker; UNAVAILABLE (503) saying which bound refused.
  absl::Status MayAdmit(const std::string& peer) const {
    const int mine = in_flight(peer);
    if (mine == 0) return absl::OkStatus();
    if (mine >= limits_.in_flight_per_client) {
      return absl::UnavailableError("this address has its share of requests in flight");
    }
    if (total_ >= limits_.max_in_flight) return absl::UnavailableError("the server has its requests in flight");
    return absl::OkStatus();
  }
  void Push(const std::string& peer, Item item) {
    PerPeer& p = peers_[peer];
    p.ready.push_back(std::move(item));
    ++total_;
    if (p.ready.size() == 1 && p.serving < limits_.served_per_client) turn_.push_back(peer);
  }
  // The next request to serve, addresses in turn; nullopt when none may be served now.
  std::optional<std::pair<std::string, Item>> Next() {
    if (turn_.empty()) return std::nullopt;
    std::string peer = std::move(turn_.front());
    turn_.pop_front();
    PerPeer& p = peers_[peer];
    Item item = std::move(p.ready.front());
    p.ready.pop_front();
    ++p.serving;
    if (!p.ready.empty() && p.serving < limits_.served_per_client) turn_.push_back(peer);
    return std::make_pair(std::move(peer), std::move(item));
  }
  bool HasNext() const { return !turn_.empty(); }
  // A request Next gave is served.
  void Done(const std::string& peer) {
    auto it = peers_.find(peer);
    if (it == peers_.end()) return;
    PerPeer& p = it->second;
    --total_;
    if (--p.serving == limits_.served_per_client - 1 && !p.ready.empty()) turn_.push_back(peer);
    if (p.serving == 0 && p.ready.empty()) peers_.erase(it);
  }
  int in_flight() const { return total_; }
  int in_flight(const std::string& peer) const {
    const auto it = peers_.find(peer);
    return it == peers_.end() ? 0 : static_cast<int>(it->second.ready.size()) + it->second.serving;
  }
  // Every request still waiting, for the listener to close at stop.
  std::deque<Item> TakeWaiting() {
    std::deque<Item> all;
    for (auto& [peer, p] : peers_) {
      total_ -= static_cast<int>(p.ready.size());
      for (Item& item : p.ready) all.push_back(std::move(item));
      p.ready.clear();
    }
    turn_.clear();
    return all;
  }

 private:
  struct PerPeer {
    std::deque<Item> ready;
    int serving = 0;
  };
  const AdmissionLimits limits_;
  std::map<std::string, PerPeer> peers_;
  std::deque<std::string> turn_;  // exactly the addresses with a ready request and a free service slot
  int total_ = 0;
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_HTTP_ADMISSION_H_
