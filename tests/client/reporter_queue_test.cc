// kvledger::Reporter's queue, sender thread and accounting against fake transports (no network):
// drops, retries and exactly-once delivery from many producer threads. Also built under
// ThreadSanitizer by scripts/test.sh.
#include <atomic>
#include <map>
#include <string>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "client/reporter.h"
#include "gtest/gtest.h"

namespace kvledger {
namespace {

v1::Record Valid(int64_t i) {
  v1::Record r;
  r.set_model("llama-3.1-8b");
  r.set_prompt_tokens(1000 + i);
  r.set_request_id("r" + std::to_string(i));
  return r;
}

// Accepts every record, remembers each request id and batch id; can be held (stalled) and can fail
// the first `failures` attempts of every batch with `failure`, after "applying" it or not.
class FakeTransport final : public BatchTransport {
 public:
  grpc::Status Send(const v1::RecordBatchRequest& batch, absl::Time deadline,
                    v1::RecordBatchResponse* response) override {
    std::unique_lock<std::mutex> lock(mu);
    ++attempts;
    if (!released.wait_until(lock, absl::ToChronoTime(deadline), [&] { return !held || cancelled; })) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "held");
    }
    if (cancelled) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    int& failed = failures_seen[batch.batch_id()];
    const bool fail = failed < failures;
    if (fail) ++failed;
    if (!fail || apply_before_failing) {
      if (applied_batches.insert(batch.batch_id()).second) {  // the server's dedup by batch id
        for (const auto& r : batch.records()) ids.push_back(r.request_id());
      }
    }
    if (fail) return grpc::Status(failure, "injected");
    response->set_accepted(static_cast<uint64_t>(batch.records_size()));
    return grpc::Status::OK;
  }
  void Cancel() override {
    {
      std::lock_guard<std::mutex> lock(mu);
      cancelled = true;
    }
    released.notify_all();
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu);
      held = false;
    }
    released.notify_all();
  }

  std::mutex mu;
  std::condition_variable released;
  bool held = false;
  bool cancelled = false;
  int failures = 0;
  bool apply_before_failing = false;
  grpc::StatusCode failure = grpc::StatusCode::UNAVAILABLE;
  int attempts = 0;
  std::map<std::string, int> failures_seen;
  std::set<std::string> applied_batches;
  std::vector<std::string> ids;
};

ReporterOptions Fast(size_t queue, size_t batch) {
  ReporterOptions o;
  o.max_queue_size = queue;
  o.max_batch_size = batch;
  o.flush_interval = absl::Milliseconds(10);
  o.initial_backoff = absl::Milliseconds(1);
  o.max_backoff = absl::Milliseconds(5);
  o.rpc_timeout = absl::Seconds(5);
  return o;
}

// Proves: records from many producer threads arrive exactly once, in batches no larger than the
// batch size, and every one is accounted as sent.
TEST(ReporterQueueTest, ManyProducersExactlyOnce) {
  auto transport = std::make_unique<FakeTransport>();
  FakeTransport* fake = transport.get();
  Reporter reporter(Fast(1 << 16, 100), std::move(transport));
  constexpr int kThreads = 4, kPerThread = 5000;
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) ASSERT_TRUE(reporter.Report(Valid(t * kPerThread + i)));
    });
  }
  for (auto& p : producers) p.join();
  ASSERT_TRUE(reporter.Flush(absl::Seconds(30)));
  const ReporterStats s = reporter.stats();
  EXPECT_EQ(s.reported, 20000u);
  EXPECT_EQ(s.sent, 20000u);
  EXPECT_EQ(s.dropped + s.rejected + s.queued, 0u);
  std::lock_guard<std::mutex> lock(fake->mu);
  std::set<std::string> unique(fake->ids.begin(), fake->ids.end());
  EXPECT_EQ(fake->ids.size(), 20000u);
  EXPECT_EQ(unique.size(), 20000u);
}

// Proves: with the sender stuck, a full queue drops the new records, and every drop is counted:
// the false returns equal Stats::dropped, and sent + dropped = reported once released.
TEST(ReporterQueueTest, FullQueueDropsAreCountedExactly) {
  auto transport = std::make_unique<FakeTransport>();
  FakeTransport* fake = transport.get();
  fake->held = true;
  Reporter reporter(Fast(64, 16), std::move(transport));
  uint64_t refused = 0;
  for (int i = 0; i < 1000; ++i) refused += reporter.Report(Valid(i)) ? 0 : 1;
  EXPECT_GE(refused, 1000u - 64 - 16);  // at most the queue plus one batch in flight were taken
  EXPECT_EQ(reporter.stats().dropped, refused);
  fake->Release();
  ASSERT_TRUE(reporter.Flush(absl::Seconds(30)));
  const ReporterStats s = reporter.stats();
  EXPECT_EQ(s.sent, 1000u - refused);
  EXPECT_EQ(s.sent + s.dropped, 1000u);
  std::lock_guard<std::mutex> lock(fake->mu);
  EXPECT_EQ(fake->ids.size(), s.sent);
}

// Proves: a transient failure after the batch was applied (a lost reply) is retried with the same
// batch id, so it is applied once; retries are counted.
TEST(ReporterQueueTest, RetryAfterLostReplyIsAppliedOnce) {
  auto transport = std::make_unique<FakeTransport>();
  FakeTransport* fake = transport.get();
  fake->failures = 3;
  fake->apply_before_failing = true;
  Reporter reporter(Fast(1024, 50), std::move(transport));
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(reporter.Report(Valid(i)));
  ASSERT_TRUE(reporter.Flush(absl::Seconds(30)));
  const ReporterStats s = reporter.stats();
  EXPECT_EQ(s.sent, 200u);
  EXPECT_EQ(s.retried, 3u * fake->applied_batches.size());
  EXPECT_EQ(fake->ids.size(), 200u);
}

// Proves: a non-retryable failure drops the batch (counted), and shutdown with the sender stuck
// returns by its deadline with everything left counted as dropped.
TEST(ReporterQueueTest, PermanentFailureAndShutdownDrop) {
  auto transport = std::make_unique<FakeTransport>();
  FakeTransport* fake = transport.get();
  fake->failures = 1 << 30;
  fake->failure = grpc::StatusCode::UNIMPLEMENTED;
  {
    Reporter reporter(Fast(1024, 10), std::move(transport));
    for (int i = 0; i < 30; ++i) ASSERT_TRUE(reporter.Report(Valid(i)));
    ASSERT_TRUE(reporter.Flush(absl::Seconds(30)));
    EXPECT_EQ(reporter.stats().dropped, 30u);
    EXPECT_EQ(reporter.stats().retried, 0u);
  }
  auto stuck = std::make_unique<FakeTransport>();
  stuck->held = true;
  Reporter reporter(Fast(1024, 10), std::move(stuck));
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(reporter.Report(Valid(i)));
  const absl::Time start = absl::Now();
  const ReporterStats s = reporter.Shutdown(absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(s.dropped, 100u);
  EXPECT_EQ(s.queued, 0u);
  EXPECT_FALSE(reporter.Report(Valid(0)));  // after shutdown: dropped, counted
  EXPECT_EQ(reporter.stats().dropped, 101u);
}

}  // namespace
}  // namespace kvledger
