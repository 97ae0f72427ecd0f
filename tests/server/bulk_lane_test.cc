#include "server/bulk_lane.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "lib/base/mutex.h"

namespace kvledger {
namespace {

// Records the order calls were applied in.
class Applied {
 public:
  absl::AnyInvocable<void()> Call(std::string name) {
    return [this, name] {
      MutexLock lock(&mu_);
      names_.push_back(name);
    };
  }
  std::vector<std::string> names() {
    MutexLock lock(&mu_);
    return names_;
  }

 private:
  Mutex mu_;
  std::vector<std::string> names_ ABSL_GUARDED_BY(mu_);
};

// While the lane is busy, one address queues three calls and another one: the other's call is
// applied second, not fourth; the lane's destructor applies every call still waiting.
TEST(BulkLaneTest, AddressesTakeTurnsAndNothingQueuedIsLeft) {
  Applied applied;
  absl::Notification release, started;
  {
    BulkLane lane(4000);
    ASSERT_TRUE(lane.Submit("ipv4:10.0.0.9", 100, [&] {
      started.Notify();
      release.WaitForNotification();
    }));
    started.WaitForNotification();
    for (const char* name : {"a1", "a2", "a3"}) ASSERT_TRUE(lane.Submit("ipv4:10.0.0.1", 100, applied.Call(name)));
    ASSERT_TRUE(lane.Submit("ipv4:10.0.0.2", 100, applied.Call("b1")));
    EXPECT_EQ(lane.stats().waiting_bytes, 500u);
    release.Notify();
  }  // the destructor applies what waits
  EXPECT_EQ(applied.names(), (std::vector<std::string>{"a1", "b1", "a2", "a3"}));
}

// The bytes waiting are bounded: an address holds at most a quarter of the lane (a call larger than
// a quarter never fits), the lane at most its whole; a refused call is not queued, and the bytes
// come back once a call is applied.
TEST(BulkLaneTest, BytesWaitingAreBoundedPerAddressAndInAll) {
  Applied applied;
  absl::Notification release, started;
  BulkLane lane(4000);  // a quarter: 1000
  EXPECT_EQ(lane.max_call_bytes(), 1000u);
  ASSERT_TRUE(lane.Submit("ipv4:10.0.0.9", 1000, [&] {
    started.Notify();
    release.WaitForNotification();
  }));
  started.WaitForNotification();
  EXPECT_FALSE(lane.Submit("ipv4:10.0.0.1", 1001, applied.Call("too large")));
  EXPECT_TRUE(lane.Submit("ipv4:10.0.0.1", 600, applied.Call("a1")));
  EXPECT_FALSE(lane.Submit("ipv4:10.0.0.1", 401, applied.Call("past its quarter")));
  EXPECT_TRUE(lane.Submit("ipv4:10.0.0.1", 400, applied.Call("a2")));
  EXPECT_TRUE(lane.Submit("ipv4:10.0.0.2", 1000, applied.Call("b1")));
  EXPECT_TRUE(lane.Submit("ipv4:10.0.0.3", 1000, applied.Call("c1")));  // 4000 held
  EXPECT_FALSE(lane.Submit("ipv4:10.0.0.4", 1, applied.Call("past the lane")));
  EXPECT_TRUE(lane.Submit("ipv4:[::1]", 0, applied.Call("empty")));
  const BulkLane::Stats held = lane.stats();
  EXPECT_EQ(held.waiting_bytes, 4000u);
  EXPECT_EQ(held.queued, 6u);
  EXPECT_EQ(held.refused, 3u);
  release.Notify();
  // Every call's bytes come back once it has been applied (polled: the lane's thread gives them).
  for (int i = 0; i < 10000000 && lane.stats().waiting_bytes != 0; ++i) std::this_thread::yield();
  EXPECT_EQ(lane.stats().waiting_bytes, 0u);
  EXPECT_EQ(applied.names(), (std::vector<std::string>{"a1", "b1", "c1", "empty", "a2"}));
  EXPECT_TRUE(lane.Submit("ipv4:10.0.0.4", 1000, applied.Call("room again")));
}

}  // namespace
}  // namespace kvledger
