// The bulk lane (docs/operations.md, "Capacity curves"): Record and RecordBatch calls and stream
// batches of at least --bulk_call_bytes — in practice records carrying prefix block ids, whose
// capacity-curve replay costs server CPU per id — are applied by one thread of their own at the
// lowest CPU priority, taking the calls of each client address in turn, and answered when applied. Smaller calls never wait
// behind them: they are applied where they arrive, and the kernel runs their threads first. The
// calls waiting hold at most `max_bytes` (a quarter of it per client address: the one per-address
// budget, lib/base/per_peer_budget.h); a call past that is refused before anything of it is applied,
// to be retried. Clients take turns as the HTTP port's workers do (server/http/admission.h). Thread-safe.
#ifndef KVLEDGER_SERVER_BULK_LANE_H_
#define KVLEDGER_SERVER_BULK_LANE_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <string>
#include <mutex>
#include <thread>

#include "absl/functional/any_invocable.h"
#include "lib/base/per_peer_budget.h"
#include "server/http/admission.h"

namespace kvledger {

class BulkLane {
 public:
  // The lane's thread runs at this nice value: while other threads want the CPU the kernel gives it
  // about 1/70 of what a nice-0 thread gets, and all of it while nothing else does.
  static constexpr int kNice = 19;

  explicit BulkLane(size_t max_bytes);
  // Runs every call still waiting, then ends the thread.
  ~BulkLane();
  BulkLane(const BulkLane&) = delete;
  BulkLane& operator=(const BulkLane&) = delete;

  // Queues `apply` (which must answer its call) for `peer`'s turn; false when its `bytes` do not fit
  // the lane or the peer's quarter: nothing queued. A call of more than a quarter never fits.
  bool Submit(const std::string& peer, size_t bytes, absl::AnyInvocable<void()> apply);

  struct Stats {
    uint64_t queued = 0;   // calls taken into the lane, ever
    uint64_t refused = 0;  // calls that did not fit, ever
    size_t waiting_bytes = 0;
  };
  Stats stats() const;
  // The most bytes one call may carry into the lane (a quarter of it).
  size_t max_call_bytes() const { return bytes_.peer_cap(); }

 private:
  struct Call {
    size_t bytes;
    absl::AnyInvocable<void()> apply;
  };
  void Run();

  PerPeerBudget bytes_;
  std::mutex mu_;  // with work_ready_ (the project's Mutex has no condition variable)
  std::condition_variable work_ready_;
  FairQueue<Call> calls_;  // guarded by mu_
  bool stopping_ = false;  // guarded by mu_
  std::atomic<uint64_t> queued_{0}, refused_{0};
  std::thread thread_;
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_BULK_LANE_H_
