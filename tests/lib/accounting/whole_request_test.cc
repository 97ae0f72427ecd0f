// The whole request (docs/cost-model.md §12), against hand-worked numbers.
#include "gtest/gtest.h"
#include "lib/accounting/aggregator.h"
#include "lib/accounting/derived_figures.h"
#include "lib/accounting/figure_schema.h"
#include "lib/profiles/profile_catalog.h"

namespace kvledger {
namespace {

// Half a nanounit: the figures derived from an estimate are made in whole nanoseconds, as counted.
constexpr double kNs = 0.5e-9;

class WholeRequestTest : public ::testing::Test {
 protected:
  const ProfileCatalog catalog_ = ProfileCatalog::Builtin();
  // As offline explain derives it: the record alone (its suffix carries more FLOPs than the prefix).
  RecordFigures Run(const RecordFacts& f) {
    return Derive(f, *catalog_.Find("llama-3.1-8b"), EstimateSource{std::nullopt, /*record_alone=*/true});
  }
};

// docs/cost-model.md §12 worked example: llama-3.1-8b, N = 8192, a 4096-token host hit, queue 0.1 s,
// reload 0.02 s, suffix prefill 0.3 s, TTFT 0.5 s, 201 output tokens in 4 s of decode.
RecordFacts Example() {
  RecordFacts f;
  f.model = "llama-3.1-8b";
  f.tier_value = 2;
  f.prompt_tokens = 8192;
  f.logical_match_tokens = 4096;
  f.queue_seconds = 0.1;
  f.reload_seconds = 0.02;
  f.suffix_prefill_seconds = 0.3;
  f.ttft_seconds = 0.5;
  f.output_tokens = 201;
  f.decode_seconds = 4.0;
  return f;
}

// Prefill FLOPs by hand (§5): 32 layers x 16384 FLOPs per attention pair, 13,958,643,712 token-wise
// FLOPs per token. N = 8192: 524288 x 8192*8193/2 + 13958643712 x 8192; the first 4096 queries:
// 524288 x 4096*4097/2 + 13958643712 x 4096.
constexpr double kBaselineFlops = 17594333528064.0 + 114349209288704.0;  // 131,943,542,816,768
constexpr double kAvoidedFlops = 4399120252928.0 + 57174604644352.0;     //  61,573,724,897,280
constexpr double kSecondsPerFlop = 0.3 / (kBaselineFlops - kAvoidedFlops);

TEST_F(WholeRequestTest, WorkedExample) {
  const RecordFigures d = Run(Example());
  const WholeRequest& w = d.whole;
  const double recompute = kSecondsPerFlop * kAvoidedFlops;  // 0.26250...
  const double full = kSecondsPerFlop * kBaselineFlops;      // 0.56250...
  EXPECT_NEAR(*d.estimated_recompute_seconds, recompute, 1e-15);
  EXPECT_NEAR(recompute, 0.2625, 1e-4);
  EXPECT_NEAR(*w.estimated_full_prefill_seconds, full, 1e-15);
  // 0.5 = 0.1 queue + 0.02 reload + 0.3 suffix prefill + 0.08 rest, in exact nanoseconds.
  ASSERT_TRUE(w.ttft_parts.has_value());
  EXPECT_EQ(w.ttft_parts->queue, Uint128{100'000'000});
  EXPECT_EQ(w.ttft_parts->reload, Uint128{20'000'000});
  EXPECT_EQ(w.ttft_parts->suffix_prefill, Uint128{300'000'000});
  EXPECT_EQ(w.ttft_parts->rest, Uint128{80'000'000});
  EXPECT_EQ(*w.ttft_overlap_nanounits, Uint128{0});
  // h = 0.02 / full; with the wait (0.02 + 0.1) / full.
  EXPECT_NEAR(*d.overhead_fraction, 0.02 / full, 1e-15);
  EXPECT_NEAR(*w.overhead_with_wait, 0.12 / full, 1e-15);
  // TTFT without reuse = 0.5 - 0.02 + recompute: as counted, in whole nanoseconds (kNs).
  EXPECT_NEAR(*w.ttft_without_reuse_seconds, 0.48 + recompute, kNs);
  EXPECT_DOUBLE_EQ(*w.time_per_output_token_seconds, 4.0 / 200);
  EXPECT_DOUBLE_EQ(*w.e2e_seconds, 4.5);
  // The prefill as served, (0.02 + 0.3) / 4.5 = 7.1 %; without reuse (0.3 + 0.2625) / (4.5 - 0.02 +
  // 0.2625) = 11.9 %: both shares of one stated request, both in [0, 1].
  EXPECT_NEAR(*w.e2e_prefill_seconds, 0.32, 1e-15);
  EXPECT_NEAR(*w.e2e_without_reuse_seconds, 4.48 + recompute, kNs);
  EXPECT_NEAR(*w.e2e_without_reuse_prefill_seconds, 0.3 + recompute, kNs);
  // Explain's seconds are the counters' nanounits: one formula each.
  Totals counted;
  counted.Add(d);
  EXPECT_EQ(counted.counter(Counter::kTtftWithoutReuseSeconds), *w.ttft_without_reuse_nanounits);
  EXPECT_EQ(counted.counter(Counter::kE2eWithoutReuseSeconds), *w.e2e_without_reuse_nanounits);
  EXPECT_EQ(counted.counter(Counter::kE2eWithoutReusePrefillSeconds), *w.e2e_without_reuse_prefill_nanounits);
  EXPECT_DOUBLE_EQ(*w.e2e_without_reuse_seconds, Uint128ToDouble(*w.e2e_without_reuse_nanounits) / 1e9);
  // Little's law (§12): 131072 bytes per token (2 x 32 layers x 8 KV heads x 128 x 2 bytes).
  // Reused 4096 tokens over the 0.5 s TTFT + 8192 prompt tokens over 4 s of decode + 200 output tokens
  // growing linearly over 4 s (average 100).
  const double expected = 4096.0 * 131072 * 0.5 + 8192.0 * 131072 * 4 + 200.0 * 131072 * 4 / 2;
  EXPECT_DOUBLE_EQ(*w.kv_byte_seconds, expected);
  EXPECT_DOUBLE_EQ(expected, 4615831552.0);
}

// Parts that exceed the TTFT (an asynchronous reload overlapped the wait): the TTFT holds the suffix
// prefill first, then the wait, then the reload, so queue 0.3, reload 0.15, suffix 0.3 in a 0.5 s TTFT
// are charged 0.2 s of wait and no reload, and no figure counts more (h with the wait is 0.2 / full).
TEST_F(WholeRequestTest, OverlapHasOneRule) {
  RecordFacts f = Example();
  f.queue_seconds = 0.3;
  f.reload_seconds = 0.15;
  const RecordFigures d = Run(f);
  ASSERT_TRUE(d.whole.ttft_parts.has_value());
  EXPECT_EQ(d.whole.ttft_parts->suffix_prefill, Uint128{300'000'000});
  EXPECT_EQ(d.whole.ttft_parts->queue, Uint128{200'000'000});
  EXPECT_EQ(d.whole.ttft_parts->reload, Uint128{0});
  EXPECT_EQ(d.whole.ttft_parts->rest, Uint128{0});
  EXPECT_EQ(*d.whole.ttft_overlap_nanounits, Uint128{250'000'000});
  EXPECT_NEAR(*d.whole.overhead_with_wait, 0.2 / *d.whole.estimated_full_prefill_seconds, 1e-15);
  EXPECT_NEAR(*d.whole.ttft_without_reuse_seconds, 0.5 + *d.estimated_recompute_seconds, kNs);
  EXPECT_NEAR(*d.whole.e2e_prefill_seconds, 0.3, 1e-15);  // no reload charged twice
  Totals t;
  t.Add(d);
  EXPECT_EQ(t.counter(Counter::kTtftDecomposedRequests), Uint128{1});
  EXPECT_EQ(t.counter(Counter::kTtftOverlapRequests), Uint128{1});
  EXPECT_EQ(t.counter(Counter::kTtftOverlapSeconds), Uint128{250'000'000});
  EXPECT_EQ(t.counter(Counter::kOverheadQueueSeconds) + t.counter(Counter::kOverheadReloadSeconds),
            Uint128{200'000'000});
  // A reload longer than the whole TTFT is charged what is left of it.
  f = Example();
  f.reload_seconds = 0.6;
  const RecordFigures long_reload = Run(f);
  EXPECT_EQ(long_reload.whole.ttft_parts->reload, Uint128{100'000'000});
  EXPECT_NEAR(*long_reload.whole.ttft_without_reuse_seconds, 0.4 + *long_reload.estimated_recompute_seconds, kNs);
}

// The two shares stay in [0, 1] on every shape, the reproductions among them (once 119 %
// and 145 %).
TEST_F(WholeRequestTest, SharesAreShares) {
  RecordFacts f = Example();
  f.queue_seconds = 0.1;
  f.reload_seconds = 0.2;
  f.ttft_seconds = 0.6;
  f.output_tokens = 3;
  f.decode_seconds = 0.04;
  for (double queue : {0.0, 0.1, 0.3, 0.6}) {
    for (double reload : {0.0, 0.2, 0.5, 2.0}) {
      f.queue_seconds = queue;
      f.reload_seconds = reload;
      const WholeRequest w = Run(f).whole;
      ASSERT_TRUE(w.e2e_without_reuse_seconds.has_value());
      EXPECT_LE(*w.e2e_prefill_seconds, *w.e2e_seconds);
      EXPECT_LE(*w.e2e_without_reuse_prefill_seconds, *w.e2e_without_reuse_seconds);
    }
  }
}

// Parts that sum to the TTFT exactly fit: rest 0, not an overlap.
TEST_F(WholeRequestTest, PartsEqualToTtftFit) {
  RecordFacts f = Example();
  f.queue_seconds = 0.18;
  const RecordFigures d = Run(f);
  ASSERT_TRUE(d.whole.ttft_parts.has_value());
  EXPECT_EQ(d.whole.ttft_parts->rest, Uint128{0});
}

// Every figure needs all of its inputs: with one missing, it is absent, never computed from a 0.
TEST_F(WholeRequestTest, MissingInputsGiveNoFigure) {
  RecordFacts f = Example();
  f.queue_seconds.reset();
  f.decode_seconds.reset();
  const RecordFigures d = Run(f);
  EXPECT_FALSE(d.whole.ttft_parts.has_value());
  EXPECT_FALSE(d.whole.ttft_overlap_nanounits.has_value());
  EXPECT_FALSE(d.whole.overhead_with_wait.has_value());
  EXPECT_TRUE(d.whole.ttft_without_reuse_seconds.has_value());  // needs no queue
  EXPECT_FALSE(d.whole.time_per_output_token_seconds.has_value());
  EXPECT_FALSE(d.whole.e2e_seconds.has_value());
  EXPECT_FALSE(d.whole.kv_byte_seconds.has_value());

  RecordFacts hit_without_reload = Example();
  hit_without_reload.reload_seconds.reset();  // a hit whose reload was not measured
  const RecordFigures h = Run(hit_without_reload);
  EXPECT_FALSE(h.whole.ttft_parts.has_value());
  EXPECT_FALSE(h.whole.ttft_without_reuse_seconds.has_value());
  EXPECT_FALSE(h.whole.e2e_prefill_seconds.has_value());
  EXPECT_TRUE(h.whole.kv_byte_seconds.has_value());  // needs no reload
}

// A miss reloads nothing: its reload part is 0 without a reload_seconds, and reuse bought it nothing.
TEST_F(WholeRequestTest, MissPaysNoReload) {
  RecordFacts f = Example();
  f.tier_value = 0;
  f.logical_match_tokens = 0;
  f.reload_seconds.reset();
  const RecordFigures d = Run(f);
  ASSERT_TRUE(d.whole.ttft_parts.has_value());
  EXPECT_EQ(d.whole.ttft_parts->reload, Uint128{0});
  EXPECT_EQ(d.whole.ttft_parts->rest, Uint128{100'000'000});
  EXPECT_DOUBLE_EQ(*d.whole.ttft_without_reuse_seconds, 0.5);
  EXPECT_DOUBLE_EQ(*d.whole.kv_byte_seconds, 8192.0 * 131072 * 4 + 200.0 * 131072 * 2);
}

// A match that restored nothing and reported no reload time (a remote restore that failed) is not a
// free reload: the reload is unknown, and so is everything built on it.
TEST_F(WholeRequestTest, FailedRestoreIsUnknownNotZero) {
  RecordFacts f = Example();
  f.logical_match_tokens = 4096;
  f.recompute_tokens = 4096;
  f.reload_seconds.reset();
  const RecordFigures d = Run(f);
  EXPECT_EQ(d.reused_tokens, 0u);
  EXPECT_FALSE(d.whole.reload_paid_seconds.has_value());
  EXPECT_FALSE(d.whole.ttft_parts.has_value());
  EXPECT_FALSE(d.whole.ttft_without_reuse_seconds.has_value());
}

// One output token: no decode steps, so no time per token; the request still held its KV.
TEST_F(WholeRequestTest, OneOutputTokenHasNoTimePerToken) {
  RecordFacts f = Example();
  f.output_tokens = 1;
  f.decode_seconds = 0.0;
  const RecordFigures d = Run(f);
  EXPECT_FALSE(d.whole.time_per_output_token_seconds.has_value());
  EXPECT_DOUBLE_EQ(*d.whole.e2e_seconds, 0.5);
  EXPECT_DOUBLE_EQ(*d.whole.kv_byte_seconds, 4096.0 * 131072 * 0.5);
}

// The counters sum exact nanounits: the four parts of each decomposed record add up to its TTFT, so
// over many records Σ parts = Σ TTFT exactly.
TEST_F(WholeRequestTest, CountersSumExactly) {
  Totals t;
  Uint128 ttft_sum = 0;
  for (int i = 1; i <= 1000; ++i) {
    RecordFacts f = Example();
    f.queue_seconds = 0.000123456789 * i;
    f.ttft_seconds = 0.5 + 0.000987654321 * i;
    ttft_sum += ToNanoUnits(*f.ttft_seconds);
    t.Add(Run(f));
  }
  Uint128 parts = 0;
  for (int i = 0; i < 4; ++i) parts += t.counter(Counter::kTtftPartSeconds, i);
  EXPECT_EQ(parts, ttft_sum);
  EXPECT_EQ(t.counter(Counter::kTtftDecomposedRequests), Uint128{1000});
  EXPECT_EQ(t.counter(Counter::kDecodeTokens), Uint128{200'000});
  EXPECT_EQ(t.counter(Counter::kDecodeSeconds), Uint128{4'000'000'000'000});
  EXPECT_EQ(t.latency(Latency::kTimePerOutputToken).count, 1000u);
  // 20 ms per token falls in the (15 ms, 20 ms] bucket of the token-latency bounds.
  EXPECT_EQ(t.latency(Latency::kTimePerOutputToken).counts[6], 1000u);
}

}  // namespace
}  // namespace kvledger
