#include "server/bulk_lane.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <optional>
#include <string>
#include <utility>

namespace kvledger {
namespace {

// Calls are bounded by their bytes (the budget); the queue's counts only order them: one call in
// service at a time, every address in turn.
AdmissionLimits LaneOrder() {
  AdmissionLimits limits;
  limits.max_in_flight = INT_MAX;
  limits.in_flight_per_client = INT_MAX;
  limits.served_per_client = 1;
  return limits;
}

}  // namespace

BulkLane::BulkLane(size_t max_bytes)
    : bytes_(max_bytes, max_bytes / 4), calls_(LaneOrder()), thread_([this] { Run(); }) {}

BulkLane::~BulkLane() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  thread_.join();
}

bool BulkLane::Submit(const std::string& peer, size_t bytes, absl::AnyInvocable<void()> apply) {
  if (!bytes_.TryTake(peer, bytes)) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.Push(peer, Call{bytes, std::move(apply)});
  }
  queued_.fetch_add(1, std::memory_order_relaxed);
  work_ready_.notify_one();
  return true;
}

BulkLane::Stats BulkLane::stats() const {
  return Stats{queued_.load(std::memory_order_relaxed), refused_.load(std::memory_order_relaxed), bytes_.used()};
}

void BulkLane::Run() {
  // Linux gives each thread its own nice value; lowering one's own priority needs no privilege.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kNice);
  for (;;) {
    std::optional<std::pair<std::string, Call>> next;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_ready_.wait(lock, [this] { return stopping_ || calls_.HasNext(); });
      next = calls_.Next();
      if (!next) return;  // stopping, and every call waiting has been applied
    }
    next->second.apply();
    bytes_.Give(next->first, next->second.bytes);
    std::lock_guard<std::mutex> lock(mu_);
    calls_.Done(next->first);
  }
}

}  // namespace kvledger
