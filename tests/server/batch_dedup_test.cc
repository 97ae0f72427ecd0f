#include "server/batch_dedup.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <malloc.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "gtest/gtest.h"

namespace kvledger {
namespace {

v1::RecordBatchResponse Outcome(uint64_t accepted, int rejections) {
  v1::RecordBatchResponse r;
  r.set_accepted(accepted);
  r.set_rejected(static_cast<uint64_t>(rejections));
  for (int i = 0; i < rejections; ++i) r.add_rejections()->set_index(static_cast<uint64_t>(i));
  return r;
}

// Proves: a repeat of an applied batch gets the original counts (rejection details capped), and
// a repeat while the first is still being applied is told to retry.
TEST(BatchDeduplicatorTest, RepeatGetsTheOriginalOutcome) {
  BatchDeduplicator dedup(10, 1 << 20, absl::Minutes(10));
  v1::RecordBatchResponse out;
  EXPECT_EQ(dedup.Begin("a", &out), BatchDeduplicator::Claim::kNew);
  EXPECT_EQ(dedup.Begin("a", &out), BatchDeduplicator::Claim::kInProgress);
  dedup.Finish("a", Outcome(7, 150));
  ASSERT_EQ(dedup.Begin("a", &out), BatchDeduplicator::Claim::kApplied);
  EXPECT_EQ(out.accepted(), 7u);
  EXPECT_EQ(out.rejected(), 150u);
  EXPECT_EQ(out.rejections_size(), kMaxRememberedRejections);
  EXPECT_EQ(dedup.Begin("", &out), BatchDeduplicator::Claim::kNew);  // no id: never remembered
  EXPECT_EQ(dedup.Begin("", &out), BatchDeduplicator::Claim::kNew);
}

// Proves: at most max_batches ids are remembered (oldest forgotten first), none older than max_age,
// and 0 turns it off.
TEST(BatchDeduplicatorTest, BoundedByCountAndAge) {
  absl::Time now = absl::UnixEpoch();
  BatchDeduplicator dedup(3, 1 << 20, absl::Seconds(60), [&] { return now; });
  v1::RecordBatchResponse out;
  for (const char* id : {"a", "b", "c", "d"}) {
    ASSERT_EQ(dedup.Begin(id, &out), BatchDeduplicator::Claim::kNew);
    dedup.Finish(id, Outcome(1, 0));
  }
  EXPECT_EQ(dedup.size(), 3u);
  EXPECT_EQ(dedup.Begin("b", &out), BatchDeduplicator::Claim::kApplied);  // a looked-up id stays
  EXPECT_EQ(dedup.Begin("a", &out), BatchDeduplicator::Claim::kNew);      // forgotten: the oldest
  dedup.Finish("a", Outcome(1, 0));
  now += absl::Seconds(61);
  EXPECT_EQ(dedup.Begin("d", &out), BatchDeduplicator::Claim::kNew);      // too old
  EXPECT_EQ(dedup.size(), 1u);
  const auto stats = dedup.stats();
  EXPECT_EQ(stats.evictions[static_cast<size_t>(DedupEviction::kEntries)], 2u);  // "a", then "b" to make room for "a" again
  EXPECT_EQ(stats.evictions[static_cast<size_t>(DedupEviction::kAge)], 3u);
  BatchDeduplicator off(0, 1 << 20, absl::Seconds(60));
  EXPECT_EQ(off.Begin("x", &out), BatchDeduplicator::Claim::kNew);
  off.Finish("x", Outcome(1, 0));
  EXPECT_EQ(off.Begin("x", &out), BatchDeduplicator::Claim::kNew);
}

// Proves: when many threads present the same ids at once, each id is claimed kNew exactly once;
// everyone else sees it in progress or applied. Run under ThreadSanitizer by scripts/test.sh.
TEST(BatchDeduplicatorTest, ConcurrentClaimsApplyEachIdOnce) {
  BatchDeduplicator dedup(1024, 64 << 20, absl::Seconds(60));
  constexpr int kThreads = 4, kIds = 200;
  std::atomic<int> applied{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIds; ++i) {
        const std::string id = absl::StrCat("id-", i);
        v1::RecordBatchResponse out;
        if (dedup.Begin(id, &out) == BatchDeduplicator::Claim::kNew) {
          applied.fetch_add(1);
          dedup.Finish(id, Outcome(1, 0));
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(applied.load(), kIds);
  EXPECT_EQ(dedup.size(), static_cast<size_t>(kIds));
}

// Proves: the window is bounded in bytes too, an entry with rejections costing its serialized outcome
// besides the compact entry; the bytes come back when entries go, and evictions say why.
TEST(BatchDeduplicatorTest, BoundedByBytes) {
  const v1::RecordBatchResponse big = Outcome(1, 100);
  v1::RecordBatchResponse kept = big;
  const size_t per_entry = kDedupEntryBytes + kept.ByteSizeLong() + kDedupOutcomeOverheadBytes;
  BatchDeduplicator dedup(1000, 10 * per_entry, absl::Minutes(10));
  v1::RecordBatchResponse out;
  for (int i = 0; i < 30; ++i) {
    const std::string id = absl::StrCat(i / 10, i % 10);
    ASSERT_EQ(dedup.Begin(id, &out), BatchDeduplicator::Claim::kNew);
    dedup.Finish(id, big);
    EXPECT_LE(dedup.stats().bytes, 10 * per_entry);
  }
  const auto stats = dedup.stats();
  EXPECT_EQ(stats.entries, 10u);
  EXPECT_EQ(stats.bytes, 10 * per_entry);
  EXPECT_EQ(stats.evictions[static_cast<size_t>(DedupEviction::kBytes)], 20u);
  EXPECT_EQ(dedup.Begin("29", &out), BatchDeduplicator::Claim::kApplied);
  EXPECT_EQ(out.rejections_size(), 100);
  EXPECT_EQ(dedup.Begin("00", &out), BatchDeduplicator::Claim::kNew);  // forgotten for room, before its age
}

// Proves: a batch whose every record was rejected is not remembered and evicts nothing (a retry is
// rejected again the same way), so batches of rejected records cannot flush the window: 1,500 of
// them leave a remembered batch's retry deduplicated.
TEST(BatchDeduplicatorTest, RejectedBatchesEvictNothing) {
  BatchDeduplicator dedup(10, 1 << 20, absl::Minutes(10));
  v1::RecordBatchResponse out;
  ASSERT_EQ(dedup.Begin("good", &out), BatchDeduplicator::Claim::kNew);
  dedup.Finish("good", Outcome(5, 0));
  for (int i = 0; i < 1500; ++i) {
    const std::string id = absl::StrCat("rejected-", i);
    ASSERT_EQ(dedup.Begin(id, &out), BatchDeduplicator::Claim::kNew);
    dedup.Finish(id, Outcome(0, 3));
  }
  EXPECT_EQ(dedup.size(), 1u);
  EXPECT_EQ(dedup.Begin("good", &out), BatchDeduplicator::Claim::kApplied);
  EXPECT_EQ(out.accepted(), 5u);
  EXPECT_EQ(dedup.Begin("rejected-7", &out), BatchDeduplicator::Claim::kNew);  // applied again: rejected again
  const auto stats = dedup.stats();
  for (uint64_t n : stats.evictions) EXPECT_EQ(n, 0u);
}

}  // namespace
}  // namespace kvledger

namespace kvledger {
namespace {

// Proves: the bytes the window counts are at least the heap it really holds (measured with
// mallinfo2 over remembered all-accepted batches with 32-character ids, as reporters send, at the
// table's lowest load: one entry past a resize), so --batch_dedup_bytes bounds the memory; and says
// what one entry costs.
TEST(BatchDeduplicatorTest, CountedBytesCoverTheHeap) {
  constexpr int kBatches = 229377;  // a table of 262,143 slots holds 7/8 of them: this one doubles it
  // Heap in use: small blocks and mmapped ones (a large table is mmapped).
  const auto in_use = [] { return mallinfo2().uordblks + mallinfo2().hblkhd; };
  const size_t before = in_use();
  {
    BatchDeduplicator dedup(kBatches, size_t{1} << 30, absl::Minutes(10));
    v1::RecordBatchResponse out;
    for (int i = 0; i < kBatches; ++i) {
      const std::string id = absl::StrFormat("%016x-%015d", 0x5eed5eed5eedULL, i);
      ASSERT_EQ(dedup.Begin(id, &out), BatchDeduplicator::Claim::kNew);
      dedup.Finish(id, Outcome(512, 0));
    }
    const size_t held = in_use() - before;
    const auto stats = dedup.stats();
    ASSERT_EQ(stats.entries, static_cast<size_t>(kBatches));
    std::printf("heap per remembered batch: %.1f bytes; counted: %.1f bytes\n",
                static_cast<double>(held) / kBatches, static_cast<double>(stats.bytes) / kBatches);
    EXPECT_GE(stats.bytes, held);
  }
}

}  // namespace
}  // namespace kvledger
