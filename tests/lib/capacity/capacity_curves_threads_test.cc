// CapacityCurves under concurrent records (run under ThreadSanitizer by scripts/test.sh): threads
// that each own a cache, and threads that share one, with snapshots taken meanwhile. A cache's own
// thread replays it in order, so its figures equal one thread replaying the same records; shared
// caches must count every record once.
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lib/capacity/capacity_curves.h"
#include "lib/profiles/profile_catalog.h"

namespace kvledger {
namespace {

struct Request {
  std::vector<uint64_t> ids;
  int64_t prompt = 0;
};

std::vector<Request> Requests(uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  std::vector<Request> out;
  for (int i = 0; i < count; ++i) {
    Request r;
    const uint64_t session = rng() % 20;
    for (uint64_t b = 0, n = 1 + rng() % 12; b < n; ++b) r.ids.push_back(session * 1000 + b + (b > 6 ? rng() % 3 : 0));
    r.prompt = static_cast<int64_t>(r.ids.size() * 64);
    out.push_back(r);
  }
  return out;
}

void Replay(CapacityCurves& curves, const Profile& profile, const std::vector<Request>& requests, const char* cache) {
  for (const Request& r : requests) {
    RecordFacts facts = FactsAtMatch(profile.name(), r.prompt, std::nullopt, 0);
    facts.prefix_block_ids = r.ids;
    facts.block_tokens = 64;
    facts.cache_id = cache;
    curves.Observe(0, facts, profile, EstimateSource{});
  }
}

TEST(CapacityCurvesThreadsTest, ConcurrentCachesEqualTheirSerialReplays) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const Profile& profile = *catalog.Find("llama-3.1-8b");
  const std::vector<uint64_t> ladder = {256, 1024, 4096};
  const char* caches[] = {"a", "b", "c", "d"};
  std::vector<std::vector<Request>> work;
  for (uint64_t t = 0; t < 4; ++t) work.push_back(Requests(t + 1, 400));
  auto serial = CapacityCurves::Create(ladder, 1);
  for (int t = 0; t < 4; ++t) Replay(**serial, profile, work[static_cast<size_t>(t)], caches[t]);
  auto parallel = CapacityCurves::Create(ladder, 1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] { Replay(**parallel, profile, work[static_cast<size_t>(t)], caches[t]); });
  }
  threads.emplace_back([&] {
    for (int i = 0; i < 50; ++i) (void)(*parallel)->Snapshot();
  });
  for (auto& t : threads) t.join();
  const auto want = (*serial)->Snapshot().at(0), got = (*parallel)->Snapshot().at(0);
  EXPECT_EQ(got.requests, 1600u);
  EXPECT_EQ(got.prompt_tokens, want.prompt_tokens);
  for (size_t i = 0; i < want.rungs.size(); ++i) {
    EXPECT_EQ(got.rungs[i].match_tokens, want.rungs[i].match_tokens) << i;
    EXPECT_EQ(got.rungs[i].attention_avoided_flops, want.rungs[i].attention_avoided_flops) << i;
  }
}

TEST(CapacityCurvesThreadsTest, ASharedCacheCountsEveryRecordOnce) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const Profile& profile = *catalog.Find("llama-3.1-8b");
  auto curves = CapacityCurves::Create({512}, 1, CurveLimits{2, 32});
  std::vector<std::thread> threads;
  for (uint64_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] { Replay(**curves, profile, Requests(t + 10, 300), "shared"); });
  }
  for (auto& t : threads) t.join();
  const auto curve = (*curves)->Snapshot().at(0);
  EXPECT_EQ(curve.requests, 1200u);
  EXPECT_LE(curve.rungs[0].match_tokens, curve.rungs[1].match_tokens);
  EXPECT_LE(curve.rungs[1].match_tokens, curve.prompt_tokens);
}

// Caches giving their places back while other threads replay into them (an idle time of 0: every
// new cache takes the least recent one's place): every record is counted once, replayed or
// untracked, and the table never holds more than its places.
TEST(CapacityCurvesThreadsTest, PlacesGivenBackUnderConcurrentReplays) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const Profile& profile = *catalog.Find("llama-3.1-8b");
  auto curves = CapacityCurves::Create({512}, 1, CurveLimits{2, 32, /*cache_idle_seconds=*/0});
  std::vector<std::thread> threads;
  for (uint64_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        const std::string cache = absl::StrCat("engine-", t, "-", round % 3);
        Replay(**curves, profile, Requests(t + 20, 15), cache.c_str());
      }
    });
  }
  for (auto& t : threads) t.join();
  const auto curve = (*curves)->Snapshot().at(0);
  EXPECT_EQ(curve.requests + curve.untracked, 1200u);
  EXPECT_LE(curve.caches, 2u);
  EXPECT_GT(curve.released_caches, 0u);
}

}  // namespace
}  // namespace kvledger
