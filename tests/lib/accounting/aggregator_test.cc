#include "lib/accounting/aggregator.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>

#include "gtest/gtest.h"
#include "lib/accounting/figure_schema.h"
#include "lib/accounting/ledger.h"
#include "lib/profiles/profile_catalog.h"

namespace kvledger {
namespace {

// ToNanoUnits rounds as std::llround does: checked against it on halves, near-halves, and random
// values of every magnitude below its 9e18 cut-over, then above it.
TEST(ToNanoUnitsTest, RoundsAsLlroundDoes) {
  std::mt19937_64 rng(7);
  std::vector<double> values = {0, 0.5e-9, 1.5e-9, 2.5e-9, 0.49999999999e-9, 1e-9, 0.25, 4503599627370495.5e-9,
                                9007199254740993e-9, 8.99e9};
  for (int i = 0; i < 200000; ++i) {
    const double mantissa = std::uniform_real_distribution<double>(0, 1)(rng);
    values.push_back(mantissa * std::pow(10.0, static_cast<int>(rng() % 20) - 10));
    values.push_back((static_cast<double>(rng() % (uint64_t{1} << 52)) + 0.5) / 1e9);  // an exact half, scaled
  }
  for (double v : values) {
    const double scaled = v * kNanoUnitsPerUnit;
    if (scaled >= 9.0e18) continue;
    ASSERT_EQ(ToNanoUnits(v), static_cast<Uint128>(std::llround(scaled))) << v;
  }
  EXPECT_EQ(ToNanoUnits(2e10), static_cast<Uint128>(2e19));
}

struct Input {
  std::string model;
  int tier;
  int64_t n, match, recompute;
  double reload, suffix, ttft;
};

std::vector<Input> RandomInputs(int count, uint32_t seed) {
  const std::vector<std::string> models = {"llama-3.1-8b", "deepseek-v3", "gemma-2-9b", "kimi-linear-48b-a3b"};
  std::mt19937_64 rng(seed);
  std::vector<Input> inputs;
  for (int i = 0; i < count; ++i) {
    Input in;
    in.model = models[rng() % models.size()];
    in.n = 1 + static_cast<int64_t>(rng() % 200000);
    in.match = static_cast<int64_t>(rng() % (in.n + 1));
    in.tier = in.match == 0 ? 0 : 1 + static_cast<int>(rng() % 4);
    in.recompute = in.match == 0 ? 0 : static_cast<int64_t>(rng() % (in.match + 1));
    in.reload = static_cast<double>(rng() % 100000) / 1e5;
    in.suffix = static_cast<double>(rng() % 100000) / 1e4;
    in.ttft = in.suffix + in.reload;
    inputs.push_back(in);
  }
  return inputs;
}

RecordFacts ToFacts(const Input& in) {
  RecordFacts f;
  f.model = in.model;
  f.tier_value = in.tier;
  f.prompt_tokens = in.n;
  f.logical_match_tokens = in.match;
  f.recompute_tokens = in.recompute;
  f.reload_seconds = in.reload;
  f.suffix_prefill_seconds = in.suffix;
  f.ttft_seconds = in.ttft;
  return f;
}

Totals Sum(const AggregateSnapshot& s) {
  Totals all;
  for (const auto& cell : s.cells) all.Merge(cell.totals);
  return all;
}

class AggregatorTest : public ::testing::Test {
 protected:
  const ProfileCatalog catalog_ = ProfileCatalog::Builtin();
};

// Token totals equal the sums of the inputs, counted directly; every record counts exactly once.
TEST_F(AggregatorTest, TotalsEqualDirectSums) {
  ModelRegistry registry(catalog_, 16, UnknownModelPolicy::kReject);
  Aggregator aggregator(registry.slots().slot_count());
  Ledger ledger(registry, aggregator);
  const auto inputs = RandomInputs(2000, 7);
  Uint128 prompt = 0, match = 0;
  for (const auto& in : inputs) {
    ASSERT_TRUE(ledger.Record(ToFacts(in)).ok());
    prompt += in.n;
    match += in.match;
  }
  const Totals all = Sum(aggregator.Snapshot());
  EXPECT_EQ(all.counter(Counter::kRequests), inputs.size());
  EXPECT_EQ(all.counter(Counter::kPromptTokens), prompt);
  EXPECT_EQ(all.counter(Counter::kLogicalMatchTokens), match);
  EXPECT_EQ(all.counter(Counter::kRecomputeTokens, Cause::kAlignment) + all.counter(Counter::kRecomputeTokens, Cause::kRestore) + all.counter(Counter::kReusedTokens), match);
  EXPECT_EQ(all.latency(Latency::kReload).count, inputs.size());
}

// The snapshot is a pure function of the set of records: shuffled order on 4 threads gives
// bit-identical totals, FLOPs and histogram sums included.
TEST_F(AggregatorTest, OrderAndThreadsDoNotChangeTotals) {
  const auto inputs = RandomInputs(4000, 11);
  ModelRegistry registry_a(catalog_, 16, UnknownModelPolicy::kReject);
  Aggregator serial(17);
  Ledger ledger_a(registry_a, serial);
  for (const auto& in : inputs) ASSERT_TRUE(ledger_a.Record(ToFacts(in)).ok());

  auto shuffled = inputs;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(3));
  ModelRegistry registry_b(catalog_, 16, UnknownModelPolicy::kReject);
  Aggregator parallel(17);
  Ledger ledger_b(registry_b, parallel);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < shuffled.size(); i += 4) (void)ledger_b.Record(ToFacts(shuffled[i]));
    });
  }
  for (auto& th : threads) th.join();

  const Totals a = Sum(serial.Snapshot());
  const Totals b = Sum(parallel.Snapshot());
  EXPECT_EQ(a.counter(Counter::kRequests), b.counter(Counter::kRequests));
  EXPECT_EQ(a.counter(Counter::kAttentionBaselineFlops), b.counter(Counter::kAttentionBaselineFlops));
  EXPECT_EQ(a.counters, b.counters);  // every counter, every boundary and cause
  EXPECT_EQ(a.counter(Counter::kReusedBytes), b.counter(Counter::kReusedBytes));
  EXPECT_EQ(a.counter(Counter::kEstimatedRecomputeSeconds), b.counter(Counter::kEstimatedRecomputeSeconds));
  EXPECT_EQ(a.counter(Counter::kReloadSlowerThanRecompute), b.counter(Counter::kReloadSlowerThanRecompute));
  EXPECT_EQ(a.latency(Latency::kTtft).counts, b.latency(Latency::kTtft).counts);
  EXPECT_EQ(a.latency(Latency::kTtft).sum_nanounits, b.latency(Latency::kTtft).sum_nanounits);
  EXPECT_EQ(a.ratio(Ratio::kReusedHit).counts, b.ratio(Ratio::kReusedHit).counts);
}

// Bucket edges are inclusive ("le"): alpha = 0.1 exactly is in the first bucket, 0.11 in the
// second; latencies likewise, and values past the last bound go to +Inf.
TEST_F(AggregatorTest, BucketEdgesAreExact) {
  const Profile& p = *catalog_.Find("llama-3.1-8b");
  Totals t;
  auto add = [&](int64_t n, int64_t match, double reload) {
    RecordFacts f;
    f.model = "llama-3.1-8b";
    f.tier_value = 1;
    f.prompt_tokens = n;
    f.logical_match_tokens = match;
    f.reload_seconds = reload;
    t.Add(Derive(f, p));
  };
  add(100, 10, 0.001);
  add(100, 11, 0.0011);
  add(100, 0, 0);
  add(100, 100, 5000);
  add(3, 1, 1);  // 1/3: 10/3 = 3.33 -> bucket 4 (le 0.4)
  EXPECT_EQ(t.ratio(Ratio::kLogicalHit).counts[0], 2u);  // 0.1 and 0
  EXPECT_EQ(t.ratio(Ratio::kLogicalHit).counts[1], 1u);  // 0.11
  EXPECT_EQ(t.ratio(Ratio::kLogicalHit).counts[3], 1u);  // 1/3
  EXPECT_EQ(t.ratio(Ratio::kLogicalHit).counts[9], 1u);  // 1.0
  EXPECT_EQ(t.latency(Latency::kReload).counts[0], 2u);   // 0.001 (le 0.001 exactly) and 0
  EXPECT_EQ(t.latency(Latency::kReload).counts[1], 1u);   // 0.0011 (le 0.0025)
  EXPECT_EQ(t.latency(Latency::kReload).counts[9], 1u);   // 1 s (le 1)
  EXPECT_EQ(t.latency(Latency::kReload).counts[kLatencyBucketsNanos.size()], 1u);  // 5000 s -> +Inf
  EXPECT_EQ(t.latency(Latency::kReload).sum_nanounits, Uint128{5001002100000});
}

// Proves: an unmeasured latency is not observed as 0 s (it would drag every quantile down), and
// only records with a measured reload and a rate enter the compared sums, which then share one
// denominator. Values worked by hand from docs/cost-model.md example 2.
TEST_F(AggregatorTest, UnmeasuredSecondsAreNotCounted) {
  const Profile& p = *catalog_.Find("llama-3.1-8b");
  Totals t;
  RecordFacts f;
  f.model = "llama-3.1-8b";
  f.tier_value = 3;
  f.prompt_tokens = 4096;
  f.logical_match_tokens = 2048;
  f.reload_seconds = 0.01;  // no suffix time: no rate
  t.Add(Derive(f, p));
  EXPECT_EQ(t.counter(Counter::kReloadComparedRequests), 0u);
  EXPECT_EQ(t.counter(Counter::kReloadSlowerThanRecompute), 0u);
  EXPECT_EQ(t.counter(Counter::kEstimatedRecomputeSeconds), 0u);
  EXPECT_EQ(t.latency(Latency::kReload).count, 1u);
  EXPECT_EQ(t.latency(Latency::kSuffixPrefill).count, 0u);
  EXPECT_EQ(t.latency(Latency::kTtft).count, 0u);
  f.suffix_prefill_seconds = 0.2;  // now compared: estimate 0.2 x 29687350820864 / 31886374076416
  f.reload_seconds = 0.5;
  t.Add(Derive(f, p, EstimateSource{std::nullopt, /*record_alone=*/true}));
  EXPECT_EQ(t.counter(Counter::kRequests), 2u);
  EXPECT_EQ(t.counter(Counter::kReloadComparedRequests), 1u);
  EXPECT_EQ(t.counter(Counter::kReloadSlowerThanRecompute), 1u);
  EXPECT_EQ(t.counter(Counter::kEstimatedRecomputeSeconds), Uint128{186207129});  // 0.186207128786 s, rounded once
  EXPECT_EQ(t.counter(Counter::kComparedReloadSeconds), Uint128{500000000});
  EXPECT_EQ(t.counter(Counter::kComparedSuffixPrefillSeconds), Uint128{200000000});
  EXPECT_EQ(t.counter(Counter::kComparedReusedBytes), Uint128{2048} * 131072);
  EXPECT_EQ(t.latency(Latency::kReload).count, 2u);
  EXPECT_EQ(t.latency(Latency::kSuffixPrefill).count, 1u);
}

// A record at the edge of every range: the recompute estimate passes 2^64 nanoseconds and is
// still summed exactly (no overflow in the fixed-point conversion).
TEST_F(AggregatorTest, ExtremeRecordSumsWithoutOverflow) {
  RecordFacts f;
  f.model = "llama-3.1-70b";
  f.tier_value = 4;
  f.prompt_tokens = int64_t{1} << 31;
  f.logical_match_tokens = f.prompt_tokens;
  f.recompute_tokens = 1;  // reused N - 1: the remaining work is one query
  f.suffix_prefill_seconds = 86400;
  f.reload_seconds = 86400;
  f.ttft_seconds = 86400;
  const EstimateSource slow{ComputeTime{Basis::kLive, 0.01, 1e-5, 8, 8}, false};  // 100 kFLOP/s
  const RecordFigures d = Derive(f, *catalog_.Find("llama-3.1-70b"), slow);
  ASSERT_TRUE(d.estimated_recompute_seconds.has_value());
  EXPECT_GT(*d.estimated_recompute_seconds * 1e9, 1.9e19);  // past 2^64 ns
  Totals t;
  t.Add(d);
  t.Add(d);
  EXPECT_NEAR(Uint128ToDouble(t.counter(Counter::kEstimatedRecomputeSeconds)) / 1e9, 2 * *d.estimated_recompute_seconds,
              1e-9 * *d.estimated_recompute_seconds);
  EXPECT_EQ(t.latency(Latency::kTtft).sum_nanounits, Uint128{2} * 86400 * 1000000000);
}

}  // namespace
}  // namespace kvledger
