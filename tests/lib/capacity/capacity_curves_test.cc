// Capacity curves (docs/cost-model.md §14): the reuse stack's depths against a brute-force LRU list,
// and the curves' sums at every capacity against Plan at that capacity, which simulates each cache
// on its own (TieredBlockCache), on hand-made and generated traces.
#include <algorithm>
#include <list>
#include <random>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/capacity/capacity_curves.h"
#include "lib/accounting/ledger.h"
#include "lib/accounting/live_rates.h"
#include "lib/capacity/reuse_stack.h"
#include "lib/capacity/sampled_stack.h"
#include "lib/accounting/validation.h"
#include "lib/planning/plan.h"
#include "lib/profiles/profile_catalog.h"
#include "tests/lib/capacity/session_trace.h"

namespace kvledger {
namespace {

using ::testing::HasSubstr;

// Depth by walking an LRU list: 1 + the blocks in front of it.
class BruteLru {
 public:
  uint64_t Depth(uint64_t id) const {
    uint64_t depth = 1;
    for (uint64_t b : list_) {
      if (b == id) return depth;
      ++depth;
    }
    return ReuseStack::kAbsent;
  }
  void Touch(uint64_t id) {
    list_.remove(id);
    list_.push_front(id);
  }
  void Forget(uint64_t id) { list_.remove(id); }
  uint64_t size() const { return list_.size(); }

 private:
  std::list<uint64_t> list_;
};

std::vector<uint64_t> Depths(const std::vector<SampledStack::Sampled>& sampled) {
  std::vector<uint64_t> out;
  for (const auto& s : sampled) out.push_back(s.depth);
  return out;
}

// Blocks are looked up in prompt order, then used tail first (the head ends the most recent).
TEST(SampledStackTest, DepthIsOnePlusTheDistinctBlocksUsedSince) {
  SampledStack stack(100);
  std::vector<SampledStack::Sampled> sampled;
  constexpr uint64_t kAbsent = SampledStack::kAbsent;
  EXPECT_EQ(stack.Reference(std::vector<uint64_t>{1, 2, 3}, sampled), 1.0);  // then 1, 2, 3 from the top
  EXPECT_THAT(Depths(sampled), ::testing::ElementsAre(kAbsent, kAbsent, kAbsent));
  stack.Reference(std::vector<uint64_t>{2, 2}, sampled);  // 2 sits under 1: depth 2, twice (looked up before use)
  EXPECT_THAT(Depths(sampled), ::testing::ElementsAre(2, 2));
  // Now 2, 1, 3: 1 is depth 2, 3 depth 3, 9 absent, and the prefix through 2 includes the absent 9.
  stack.Reference(std::vector<uint64_t>{1, 3, 9, 2}, sampled);
  EXPECT_THAT(Depths(sampled), ::testing::ElementsAre(2, 3, kAbsent, kAbsent));
  EXPECT_EQ(stack.tracked(), 4u);
}

// Ids below the dense bound find their slot by index, the rest by hash: none, half and all of them.
TEST(ReuseStackTest, MatchesABruteForceLruThroughRenumberingAndForgetting) {
  for (uint64_t universe : {5u, 64u, 3000u}) {
    for (uint64_t dense : {uint64_t{0}, universe / 2, universe}) {
      std::mt19937_64 rng(universe + dense);
      ReuseStack stack(dense);
      BruteLru brute;
      for (int step = 0; step < 20000; ++step) {
        const uint64_t id = rng() % universe;
        ASSERT_EQ(stack.DepthOf(id), brute.Depth(id)) << "universe " << universe << " dense " << dense << " step " << step;
        ASSERT_EQ(stack.tracked(), brute.size());
        if (rng() % 4 == 0) {  // forget it, held or not
          stack.Forget(id);
          brute.Forget(id);
        } else {
          stack.Touch(id);
          brute.Touch(id);
        }
      }
    }
  }
}

// Within its bound the sample is every block: the depths are the exact prefix depths.
TEST(SampledStackTest, ExactWithinItsBound) {
  std::mt19937_64 rng(3);
  SampledStack stack(1000);
  BruteLru brute;
  std::vector<SampledStack::Sampled> sampled;
  for (int request = 0; request < 3000; ++request) {
    std::vector<uint64_t> ids(1 + rng() % 6);
    for (uint64_t& id : ids) id = rng() % 500;
    ASSERT_EQ(stack.Reference(ids, sampled), 1.0);
    ASSERT_EQ(sampled.size(), ids.size());
    uint64_t deepest = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      const uint64_t d = brute.Depth(ids[i]);
      deepest = std::max(deepest, d);
      ASSERT_EQ(sampled[i].depth, deepest) << "request " << request << " block " << i;
    }
    for (auto it = ids.rbegin(); it != ids.rend(); ++it) brute.Touch(*it);
  }
}

// Past its bound the rate falls so that the stack never holds more than the bound, and its memory
// stays within what the bound is said to cost; the depths of a cyclic scan stay near the truth.
TEST(SampledStackTest, MemoryStaysWithinItsBoundWhateverTheBlocks) {
  constexpr uint64_t kSamples = 4096;
  SampledStack stack(kSamples);
  std::vector<SampledStack::Sampled> sampled;
  std::vector<uint64_t> ids(64);
  constexpr uint64_t kCycle = 200000;  // distinct blocks, each depth kCycle when seen again
  double total = 0, count = 0;
  for (uint64_t b = 0; b < 3 * kCycle; b += ids.size()) {
    for (uint64_t i = 0; i < ids.size(); ++i) ids[i] = (b + i) % kCycle;
    const double rate = stack.Reference(ids, sampled);
    ASSERT_LE(stack.tracked(), kSamples);
    ASSERT_LE(stack.MemoryBytes(), SampledStack::kFixedBytes + kSamples * SampledStack::kBytesPerSample);
    if (b >= kCycle && rate < 1) {
      for (const auto& s : sampled) {
        if (s.depth != SampledStack::kAbsent) total += static_cast<double>(s.depth), ++count;
      }
    }
  }
  EXPECT_NEAR(stack.rate(), static_cast<double>(kSamples) / kCycle, 0.3 * kSamples / kCycle);
  EXPECT_GT(stack.forgotten(), kSamples);  // dropped as the rate fell, about kSamples * ln(kCycle / kSamples)
  ASSERT_GT(count, 100);
  // Every block of a request is used after its head; the prefix depth is the cycle's, within 5 %.
  EXPECT_NEAR(total / count, static_cast<double>(kCycle), 0.05 * kCycle);
}

// The id whose SampledStack::Hash is `h` (splitmix64's finalizer inverted): how a client could pick
// ids that hash low.
uint64_t Unhash(uint64_t h) {
  h ^= (h >> 31) ^ (h >> 62);
  h *= 0x319642b2d24d8ec3ULL;
  h ^= (h >> 27) ^ (h >> 54);
  h *= 0x96de1b173f119089ULL;
  return h ^ (h >> 30) ^ (h >> 60);
}

// Ids chosen to hash as low as can be drive the rate down to 64 / 2^64; the depths stay finite and
// below kAbsent, and the stack within its bound.
TEST(SampledStackTest, IdsThatHashLowCannotOverflowADepth) {
  SampledStack stack(64);
  std::vector<uint64_t> ids;
  for (uint64_t h = 0; h < 1000; ++h) {
    ids.push_back(Unhash(h));
    ASSERT_EQ(SampledStack::Hash(ids.back()), h);
  }
  std::vector<SampledStack::Sampled> sampled;
  stack.Reference(ids, sampled);
  EXPECT_LE(stack.tracked(), 64u);
  EXPECT_LT(stack.rate(), 1e-16);
  stack.Reference(ids, sampled);
  ASSERT_FALSE(sampled.empty());
  for (const auto& s : sampled) EXPECT_LT(s.depth, SampledStack::kAbsent);
}

// PlanAll's one pass over one stack equals Plan (TieredBlockCache, block by block) at each config,
// field for field, in either use order, with a context that leaves requests out; with host and disk
// tiers below the device (tail-first: one pass; prompt order: each config simulated), reload seconds
// included; with ids that number the blocks and with ids that are hashes.
TEST(PlanAllTest, OnePassEqualsOnePlanPerCapacity) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const Profile& profile = *catalog.Find("llama-3.1-8b");
  for (const bool hashed : {false, true}) {
    std::vector<TraceRequest> trace = SessionTrace(11, 2000, 64);
    if (hashed) {  // ids too large for the stack's table indexed by id: its hash map
      for (TraceRequest& request : trace) {
        for (int64_t& id : request.hash_ids) id = static_cast<int64_t>((uint64_t(id) * 0x9E3779B97F4A7C15ull) >> 1);
      }
    }
    for (UseOrder order : {UseOrder::kTailFirst, UseOrder::kPrompt}) {
      for (int lower : {0, 1, 2}) {  // tiers below the device
        std::vector<PlanConfig> configs;
        for (uint64_t capacity : {64u, 1000u, 4096u, 20000u}) {
          PlanConfig config;
          config.block_tokens = 64;
          config.use_order = order;
          config.context_tokens = 700;
          config.capacity_tokens[0] = capacity;
          if (lower >= 1) config.capacity_tokens[1] = capacity == 1000u ? kUnlimited : 8192 + capacity;
          if (lower >= 2 && capacity != 1000u) config.capacity_tokens[2] = 3 * capacity;
          config.bandwidth[1] = 2e10 + static_cast<double>(capacity);
          config.bandwidth[2] = 3e9;
          configs.push_back(config);
        }
        configs.back().capacity_tokens[0] = kUnlimited;
        auto all = PlanAll(trace, profile, configs);
        ASSERT_TRUE(all.ok()) << all.status();
        ASSERT_EQ(all->size(), configs.size());
        for (size_t i = 0; i < configs.size(); ++i) {
          auto one = Plan(trace, profile, configs[i]);
          ASSERT_TRUE(one.ok());
          SCOPED_TRACE(::testing::Message() << "hashed " << hashed << " " << UseOrderName(order) << " lower tiers " << lower << " config " << i);
          const PlanResult& a = (*all)[i];
          EXPECT_GT(a.beyond_context.requests, 0u);
          EXPECT_EQ(a.beyond_context.requests, one->beyond_context.requests);
          EXPECT_EQ(a.matched_tokens_from, one->matched_tokens_from);
          for (size_t t = 0; t < a.by_tier.size(); ++t) {
            EXPECT_EQ(a.by_tier[t].requests, one->by_tier[t].requests) << t;
            EXPECT_EQ(a.by_tier[t].logical_match_tokens, one->by_tier[t].logical_match_tokens) << t;
            EXPECT_EQ(a.by_tier[t].attention_avoided_flops, one->by_tier[t].attention_avoided_flops) << t;
            EXPECT_EQ(a.by_tier[t].prefill_avoided_flops, one->by_tier[t].prefill_avoided_flops) << t;
            EXPECT_EQ(a.by_tier[t].reused_bytes, one->by_tier[t].reused_bytes) << t;
            EXPECT_EQ(a.by_tier[t].compared, one->by_tier[t].compared) << t;
            EXPECT_EQ(a.by_tier[t].reload_seconds, one->by_tier[t].reload_seconds) << t;
          }
          EXPECT_EQ(a.capacity_bytes, one->capacity_bytes);
        }
      }
    }
  }
}

TEST(CapacityCurvesTest, EveryCapacityEqualsPlanAtThatCapacity) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  for (const char* model : {"llama-3.1-8b", "gemma-3-12b", "qwen3-next-80b-a3b", "deepseek-v3"}) {
    const Profile* profile = catalog.Find(model);
    ASSERT_NE(profile, nullptr) << model;
    const uint64_t block = 64;
    const std::vector<TraceRequest> trace = SessionTrace(7, 1500, block);
    const std::vector<uint64_t> ladder = {0 + 64, 1000, 4096, 20000, 60000};
    auto curves = CapacityCurves::Create(ladder, 1);
    ASSERT_TRUE(curves.ok()) << curves.status();
    for (const TraceRequest& request : trace) {
      std::vector<uint64_t> ids(request.hash_ids.begin(), request.hash_ids.end());
      RecordFacts facts = FactsAtMatch(profile->name(), request.input_length, std::nullopt, 0);
      if (request.output_length > 0) facts.output_tokens = request.output_length;
      facts.prefix_block_ids = ids;
      facts.block_tokens = static_cast<int64_t>(block);
      ASSERT_TRUE(ValidateFields(facts).ok());
      (*curves)->Observe(0, facts, *profile, EstimateSource{});
    }
    const auto snapshot = (*curves)->Snapshot();
    ASSERT_EQ(snapshot.size(), 1u);
    const CapacityCurves::ModelCurve& curve = snapshot[0];
    EXPECT_EQ(curve.requests, trace.size());
    for (size_t i = 0; i < (*curves)->capacities().size(); ++i) {
      PlanConfig config;
      config.block_tokens = block;
      config.capacity_tokens[0] = (*curves)->capacities()[i];
      auto plan = Plan(trace, *profile, config);
      ASSERT_TRUE(plan.ok()) << plan.status();
      SCOPED_TRACE(::testing::Message() << model << " at " << CapacityLabel(config.capacity_tokens[0]));
      EXPECT_EQ(curve.prompt_tokens, plan->total.prompt_tokens);
      EXPECT_EQ(curve.attention_baseline_flops, plan->total.attention_baseline_flops);
      EXPECT_EQ(curve.prefill_baseline_flops, plan->total.prefill_baseline_flops);
      EXPECT_EQ(curve.rungs[i].match_tokens, plan->total.logical_match_tokens);
      EXPECT_EQ(curve.rungs[i].attention_avoided_flops, plan->total.attention_avoided_flops);
      EXPECT_EQ(curve.rungs[i].prefill_avoided_flops, plan->total.prefill_avoided_flops);
    }
    // The curve rises with capacity, from nothing at one block to the unlimited cache's match.
    for (size_t i = 1; i < curve.rungs.size(); ++i) EXPECT_GE(curve.rungs[i].match_tokens, curve.rungs[i - 1].match_tokens);
    EXPECT_GT(curve.rungs.back().match_tokens, curve.rungs[1].match_tokens);
  }
}

// Two caches of one model are replayed apart: the same ids in another cache are a miss there.
TEST(CapacityCurvesTest, CachesAreReplayedApartAndBounded) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const Profile& profile = *catalog.Find("llama-3.1-8b");
  auto curves = CapacityCurves::Create({1024}, 2, CurveLimits{/*max_caches=*/2, /*max_samples_per_cache=*/16});
  ASSERT_TRUE(curves.ok());
  const std::vector<uint64_t> ids = {5, 6};
  auto record = [&](absl::string_view cache) {
    RecordFacts facts = FactsAtMatch("llama-3.1-8b", 512, std::nullopt, 0);
    facts.prefix_block_ids = ids;
    facts.block_tokens = 256;
    facts.cache_id = cache;
    (*curves)->Observe(0, facts, profile, EstimateSource{});
  };
  record("a");
  record("b");  // a miss: b has not seen them
  record("a");  // a hit of both blocks
  record("c");  // a third cache, past max_caches: untracked
  const auto curve = (*curves)->Snapshot().at(0);
  EXPECT_EQ(curve.requests, 3u);
  EXPECT_EQ(curve.untracked, 1u);
  EXPECT_EQ(curve.rungs[0].match_tokens, 512);  // 1024 tokens = 4 blocks hold both
  EXPECT_EQ(curve.rungs[1].match_tokens, 512);
}

// Slots follow the fleet: four engines whose cache id is their pod name, replaced four times by a
// rolling update (one pod every 90 s; the new pod starts as the old one stops), eight places and an
// idle time of 60 s on a moved clock. Every live engine is replayed throughout: a gone pod's place
// (and its stack) goes to a new one once it has been idle 60 s, counted as released. A new cache
// while every place is held by an active one is untracked and counted so, never given another's place.
TEST(CapacityCurvesTest, SlotsFollowARollingUpdate) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const Profile& profile = *catalog.Find("llama-3.1-8b");
  double now = 1000;
  auto curves = CapacityCurves::Create({1024}, 1, CurveLimits{8, 16, /*cache_idle_seconds=*/60}, [&] { return now; });
  ASSERT_TRUE(curves.ok());
  const std::vector<uint64_t> ids = {5, 6};  // the facts view them: they outlive every record
  auto record = [&](const std::string& cache) {
    RecordFacts facts = FactsAtMatch("llama-3.1-8b", 512, std::nullopt, 0);
    facts.prefix_block_ids = ids;
    facts.block_tokens = 256;
    facts.cache_id = cache;
    (*curves)->Observe(0, facts, profile, EstimateSource{});
  };
  std::vector<std::string> pods = {"engine-a-0", "engine-b-0", "engine-c-0", "engine-d-0"};
  uint64_t sent = 0;
  auto ninety_seconds = [&] {  // every live pod sends every 10 s
    for (int second = 0; second < 90; second += 10) {
      now += 10;
      for (const std::string& pod : pods) {
        record(pod);
        ++sent;
      }
    }
  };
  ninety_seconds();
  for (int update = 1; update <= 4; ++update) {
    for (size_t replaced = 0; replaced < pods.size(); ++replaced) {
      pods[replaced] = absl::StrCat("engine-", std::string(1, static_cast<char>('a' + replaced)), "-", update);
      ninety_seconds();
    }
  }
  auto curve = (*curves)->Snapshot().at(0);
  EXPECT_EQ(curve.untracked, 0u);  // every live engine was replayed throughout
  EXPECT_EQ(curve.requests, sent);
  EXPECT_EQ(curve.caches, 8u);            // the four live pods and the last four gone, not yet needed
  EXPECT_EQ(curve.released_caches, 12u);  // 20 pods in all
  // Four newcomers take the four idle places; a fifth finds every place active: untracked.
  for (const char* newcomer : {"x1", "x2", "x3", "x4", "x5"}) record(newcomer);
  curve = (*curves)->Snapshot().at(0);
  EXPECT_EQ(curve.released_caches, 16u);
  EXPECT_EQ(curve.untracked, 1u);
  EXPECT_EQ(curve.caches, 8u);
}

// Seconds come from the live compute model only: its marginal seconds of each capacity's avoided
// prefill FLOPs; without one, none and the record is not counted known. llama-3.1-8b, 1,000 tokens
// matched, resumed at 992 (its 16-token pages): 524,288 x 992 x 993 / 2 attention FLOPs plus
// 13,958,643,712 x 992 for the rest, at 1e-15 s per FLOP.
TEST(CapacityCurvesTest, SecondsFromTheLiveComputeModel) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const Profile& profile = *catalog.Find("llama-3.1-8b");
  auto curves = CapacityCurves::Create({256}, 1);
  ASSERT_TRUE(curves.ok());
  const std::vector<uint64_t> ids = {7, 8};
  RecordFacts facts = FactsAtMatch("llama-3.1-8b", 1000, std::nullopt, 0);
  facts.prefix_block_ids = ids;
  facts.block_tokens = 512;
  const EstimateSource live{ComputeTime{Basis::kLive, 0.02, 1e-15}, false};
  (*curves)->Observe(0, facts, profile, EstimateSource{});  // no live model: seconds unknown
  (*curves)->Observe(0, facts, profile, live);
  const auto curve = (*curves)->Snapshot().at(0);
  EXPECT_EQ(curve.seconds_known, 1u);
  EXPECT_EQ(curve.rungs[0].recompute_avoided_nanos, 0);  // 256 tokens hold no 512-token block
  const double flops = 524288.0 * 992 * 993 / 2 + 13958643712.0 * 992;
  EXPECT_EQ(curve.rungs[1].match_tokens, 1000);  // the first record's blocks, at the unlimited capacity
  EXPECT_NEAR(static_cast<double>(curve.rungs[1].recompute_avoided_nanos), flops * 1e-15 * 1e9, 1);
}

// A cache of C blocks seen only through its evictions: each block's depth beyond the cache is its
// place in the list of evicted blocks (most recent first), a hit is 0. Records of those distances give,
// at every capacity from C up, what Plan gives there; below C a hit counts as a miss.
TEST(CapacityCurvesTest, ReuseDistancesFromEvictionsEqualPlanFromTheEnginesCapacityUp) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const Profile& profile = *catalog.Find("llama-3.1-8b");
  const uint64_t block = 64, cache_blocks = 40;
  const std::vector<TraceRequest> trace = SessionTrace(5, 1500, block);
  const std::vector<uint64_t> ladder = {block * cache_blocks / 2, block * cache_blocks, block * cache_blocks * 3 / 2,
                                        block * cache_blocks * 2, block * cache_blocks * 4};
  auto curves = CapacityCurves::Create(ladder, 1);
  ASSERT_TRUE(curves.ok());
  std::list<int64_t> cache, evicted;  // most recent first
  for (const TraceRequest& request : trace) {
    std::vector<uint64_t> distances;
    for (int64_t id : request.hash_ids) {
      const bool cached = std::find(cache.begin(), cache.end(), id) != cache.end();
      const auto ghost = std::find(evicted.begin(), evicted.end(), id);
      distances.push_back(cached ? 0 : ghost != evicted.end() ? static_cast<uint64_t>(std::distance(evicted.begin(), ghost)) + 1
                                                              : kNeverSeenDistance);
    }
    // Then used tail first, as the engine releases a finished request's blocks.
    for (auto it = request.hash_ids.rbegin(); it != request.hash_ids.rend(); ++it) {
      const int64_t id = *it;
      cache.remove(id);
      evicted.remove(id);
      cache.push_front(id);
      if (cache.size() > cache_blocks) {
        evicted.push_front(cache.back());
        cache.pop_back();
      }
    }
    RecordFacts facts = FactsAtMatch(profile.name(), request.input_length, std::nullopt, 0);
    if (request.output_length > 0) facts.output_tokens = request.output_length;
    facts.prefix_block_reuse_distances = distances;
    facts.block_tokens = static_cast<int64_t>(block);
    facts.cache_capacity_blocks = static_cast<int64_t>(cache_blocks);
    ASSERT_TRUE(ValidateFields(facts).ok()) << ValidateFields(facts).rejection().message;
    (*curves)->Observe(0, facts, profile, EstimateSource{});
  }
  const auto curve = (*curves)->Snapshot().at(0);
  for (size_t i = 0; i < (*curves)->capacities().size(); ++i) {
    PlanConfig config;
    config.block_tokens = block;
    config.capacity_tokens[0] = (*curves)->capacities()[i];
    auto plan = Plan(trace, profile, config);
    ASSERT_TRUE(plan.ok());
    SCOPED_TRACE(CapacityLabel(config.capacity_tokens[0]));
    if (i == 0) {  // below the engine's cache: a lower bound
      EXPECT_LT(curve.rungs[i].match_tokens, plan->total.logical_match_tokens);
      continue;
    }
    EXPECT_EQ(curve.rungs[i].match_tokens, plan->total.logical_match_tokens);
    EXPECT_EQ(curve.rungs[i].attention_avoided_flops, plan->total.attention_avoided_flops);
  }
}

TEST(CapacityCurvesTest, ReuseDistancesAreValidated) {
  const std::vector<uint64_t> two = {0, 3}, ids = {1, 2};
  RecordFacts facts = FactsAtMatch("llama-3.1-8b", 1000, std::nullopt, 0);
  facts.prefix_block_reuse_distances = two;
  facts.block_tokens = 512;
  EXPECT_EQ(ValidateFields(facts).rejection().message,
            "prefix_block_reuse_distances: 2 distances: need block_tokens and cache_capacity_blocks");
  facts.cache_capacity_blocks = 0;
  EXPECT_EQ(ValidateFields(facts).rejection().reason, RejectReason::kInvalidCacheCapacityBlocks);
  EXPECT_EQ(ValidateFields(facts).rejection().message, "cache_capacity_blocks = 0: must be in [1, 2^40]");
  facts.cache_capacity_blocks = (int64_t{1} << 40) + 1;
  EXPECT_EQ(ValidateFields(facts).rejection().reason, RejectReason::kInvalidCacheCapacityBlocks);
  facts.cache_capacity_blocks = 100;
  EXPECT_TRUE(ValidateFields(facts).ok());
  facts.prefix_block_ids = ids;
  EXPECT_EQ(ValidateFields(facts).rejection().reason, RejectReason::kInvalidPrefixBlockReuseDistances);
  facts.prefix_block_ids = {};
  facts.prefix_block_reuse_distances = {};
  EXPECT_EQ(ValidateFields(facts).rejection().message,
            "cache_capacity_blocks = 100: needs prefix_block_ids or prefix_block_reuse_distances (the cache they "
            "were looked up or measured in)");
  facts.prefix_block_ids = ids;  // the device a second tier stands below (docs/cost-model.md §15)
  EXPECT_TRUE(ValidateFields(facts).ok());
}

// A record rebuilt from a cache's events (reuse distances) is not a served request: through the
// Ledger it reaches the capacity curves and nothing else (no request or token counted, no live rate
// moved: LiveRates does not take rebuilt records); a record with block ids counts in both.
TEST(CapacityCurvesTest, RebuiltRecordsFeedTheCurvesOnly) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  ModelRegistry registry(catalog, 4, UnknownModelPolicy::kReject);
  Aggregator aggregator(registry.slots().slot_count());
  LiveRates rates(registry.slots().slot_count(), 300);
  auto curves = CapacityCurves::Create({1024}, registry.slots().slot_count());
  ASSERT_TRUE(curves.ok());
  Ledger ledger(registry, aggregator, &rates, LabelClaims::kClaim, {curves->get()});
  const std::vector<uint64_t> distances = {0, 3}, ids = {1, 2};
  RecordFacts rebuilt = FactsAtMatch("llama-3.1-8b", 1024, std::nullopt, 512);
  rebuilt.prefix_block_reuse_distances = distances;
  rebuilt.block_tokens = 512;
  rebuilt.cache_capacity_blocks = 1;
  ASSERT_TRUE(ledger.Record(rebuilt).ok());
  EXPECT_TRUE(aggregator.Snapshot().cells.empty());
  ASSERT_EQ((*curves)->Snapshot().size(), 1u);
  EXPECT_EQ((*curves)->Snapshot()[0].requests, 1u);
  RecordFacts served = FactsAtMatch("llama-3.1-8b", 1024, std::nullopt, 512);
  served.prefix_block_ids = ids;
  served.block_tokens = 512;
  ASSERT_TRUE(ledger.Record(served).ok());
  ASSERT_EQ(aggregator.Snapshot().cells.size(), 1u);
  EXPECT_EQ(aggregator.Snapshot().cells[0].totals.requests(), 1u);
  EXPECT_EQ((*curves)->Snapshot()[0].requests, 2u);
}

// A record marked curves_only (a request another integration reports) reaches the curves only, as a
// rebuilt one does; without prefix_block_ids the mark is refused, naming the field.
TEST(CapacityCurvesTest, CurvesOnlyRecordsFeedTheCurvesOnly) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  ModelRegistry registry(catalog, 4, UnknownModelPolicy::kReject);
  Aggregator aggregator(registry.slots().slot_count());
  auto curves = CapacityCurves::Create({1024}, registry.slots().slot_count());
  ASSERT_TRUE(curves.ok());
  Ledger ledger(registry, aggregator, nullptr, LabelClaims::kClaim, {curves->get()});
  const std::vector<uint64_t> ids = {1, 2};
  RecordFacts facts = FactsAtMatch("llama-3.1-8b", 1024, std::nullopt, 512);
  facts.curves_only = true;
  EXPECT_EQ(ValidateFields(facts).rejection().message,
            "curves_only = true: needs prefix_block_ids (a record for the capacity curves only carries its blocks)");
  EXPECT_EQ(ValidateFields(facts).rejection().reason, RejectReason::kInvalidCurvesOnly);
  facts.prefix_block_ids = ids;
  facts.block_tokens = 512;
  ASSERT_TRUE(ledger.Record(facts).ok());
  EXPECT_TRUE(aggregator.Snapshot().cells.empty());
  ASSERT_EQ((*curves)->Snapshot().size(), 1u);
  EXPECT_EQ((*curves)->Snapshot()[0].requests, 1u);
}

// The blocks a request's output filled take their place in the stack after the prompt's, tail first
// (the last output block deepest), and are never looked up: against a brute-force LRU list.
TEST(SampledStackTest, OutputBlocksTakeTheirPlaceAndAreNeverLookedUp) {
  std::mt19937_64 rng(7);
  SampledStack stack(100000);
  BruteLru brute;
  std::vector<SampledStack::Sampled> sampled;
  for (int request = 0; request < 2000; ++request) {
    std::vector<uint64_t> ids(1 + rng() % 5), outputs(rng() % 4);
    for (uint64_t& id : ids) id = rng() % 300;
    for (uint64_t& id : outputs) id = 1000 + rng() % 300;
    stack.Reference(ids, sampled, outputs);
    ASSERT_EQ(sampled.size(), ids.size());  // the outputs are not looked up
    uint64_t deepest = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      deepest = std::max(deepest, brute.Depth(ids[i]));
      ASSERT_EQ(sampled[i].depth, deepest) << "request " << request << " block " << i;
    }
    for (auto it = outputs.rbegin(); it != outputs.rend(); ++it) brute.Touch(*it);
    for (auto it = ids.rbegin(); it != ids.rend(); ++it) brute.Touch(*it);
  }
  // By hand: 1; then 7 with outputs 8, 9 (used 9, 8, 7); then 1 again sits under 7, 8, 9: depth 4.
  SampledStack small(100);
  small.Reference(std::vector<uint64_t>{1}, sampled);
  small.Reference(std::vector<uint64_t>{7}, sampled, std::vector<uint64_t>{8, 9});
  small.Reference(std::vector<uint64_t>{1}, sampled);
  EXPECT_THAT(Depths(sampled), ::testing::ElementsAre(4));
  const std::vector<uint64_t> three = {1, 2, 3};
  RecordFacts facts = FactsAtMatch("llama-3.1-8b", 1000, std::nullopt, 0);
  facts.output_block_ids = three;
  EXPECT_EQ(ValidateFields(facts).rejection().message,
            "output_block_ids: 3 ids: need prefix_block_ids (the prompt they follow)");
}

TEST(CapacityCurvesTest, RefusesALadderPastItsLimit) {
  std::vector<uint64_t> ladder;
  for (uint64_t c = 1; c <= kMaxLadderCapacities + 1; ++c) ladder.push_back(c * 1000);
  EXPECT_THAT(std::string(CapacityCurves::Create(ladder, 1).status().message()),
              HasSubstr("17 finite capacities: must be at most 16"));
  EXPECT_FALSE(CapacityCurves::Create({2000, 1000}, 1).ok());
  EXPECT_EQ(CapacityLabel(kUnlimited), "+Inf");
  EXPECT_EQ(CapacityLabel(65536), "65536");
}

TEST(CapacityCurvesTest, BlockIdsAreValidatedWithTheFieldTheValueAndTheRule) {
  const std::vector<uint64_t> three = {1, 2, 3};
  RecordFacts facts = FactsAtMatch("llama-3.1-8b", 1000, std::nullopt, 0);
  facts.prefix_block_ids = three;
  EXPECT_EQ(ValidateFields(facts).rejection().message,
            "prefix_block_ids: 3 ids: need block_tokens (the tokens each id covers)");
  facts.block_tokens = 512;
  EXPECT_EQ(ValidateFields(facts).rejection().message,
            "prefix_block_ids: 3 ids: must be at most 65536 and at most the prompt's blocks, ceil(prompt_tokens = "
            "1000 / block_tokens = 512) = 2");
  EXPECT_EQ(ValidateFields(facts).rejection().reason, RejectReason::kInvalidPrefixBlockIds);
  facts.block_tokens = 400;  // ceil(1000 / 400) = 3: fits
  EXPECT_TRUE(ValidateFields(facts).ok());
  facts.block_tokens = 0;
  EXPECT_EQ(ValidateFields(facts).rejection().message, "block_tokens = 0: must be in [1, 1048576]");
  facts.block_tokens = 400;
  facts.cache_id = "engine 0";
  EXPECT_EQ(ValidateFields(facts).rejection().message,
            "cache_id = \"engine 0\": must be at most 128 printable ASCII characters without spaces");
  EXPECT_EQ(ValidateFields(facts).rejection().field, "cache_id");
}

}  // namespace
}  // namespace kvledger
