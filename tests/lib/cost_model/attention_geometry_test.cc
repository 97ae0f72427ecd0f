#include "lib/cost_model/attention_geometry.h"

#include <algorithm>
#include <cmath>

#include "gtest/gtest.h"

namespace kvledger {
namespace {

// Counts query-key pairs one by one: query t (1-based) reads min(t, window) keys.
uint64_t BruteForcePairs(uint64_t tokens, uint64_t window) {
  uint64_t pairs = 0;
  for (uint64_t t = 1; t <= tokens; ++t) {
    for (uint64_t k = 1; k <= t; ++k) {
      if (window == 0 || t - k < window) ++pairs;
    }
  }
  return pairs;
}

// The closed form for full causal attention equals pair-by-pair counting for every N <= 300.
TEST(AttentionGeometryTest, FullCausalMatchesBruteForce) {
  for (uint64_t n = 0; n <= 300; ++n) {
    EXPECT_EQ(FullCausalPairs(n), static_cast<Uint128>(BruteForcePairs(n, 0))) << "N=" << n;
  }
}

// The sliding-window closed form equals counting for windows 1..64 and N <= 200, both sides of W.
TEST(AttentionGeometryTest, SlidingWindowMatchesBruteForce) {
  for (uint64_t w : {1, 2, 3, 7, 16, 64}) {
    for (uint64_t n = 0; n <= 200; ++n) {
      EXPECT_EQ(SlidingWindowPairs(n, w), static_cast<Uint128>(BruteForcePairs(n, w)))
          << "N=" << n << " W=" << w;
    }
  }
}

// A window of 0 means no window; a window at least N behaves as full attention.
TEST(AttentionGeometryTest, WindowEdgesReduceToFull) {
  EXPECT_EQ(SlidingWindowPairs(1000, 0), FullCausalPairs(1000));
  EXPECT_EQ(SlidingWindowPairs(1000, 1000), FullCausalPairs(1000));
  EXPECT_EQ(SlidingWindowPairs(1000, 5000), FullCausalPairs(1000));
}

// Exact at sizes where N^2 does not fit 64 bits.
TEST(AttentionGeometryTest, OverflowEdgesAreExact) {
  EXPECT_EQ(Uint128ToString(FullCausalPairs(uint64_t{1} << 31)), "2305843010287435776");
  EXPECT_EQ(Uint128ToString(FullCausalPairs(uint64_t{1} << 32)), "9223372039002259456");
  // (2^64 - 1) * 2^63: the largest input, odd, still exact in 128 bits.
  EXPECT_EQ(Uint128ToString(FullCausalPairs(~uint64_t{0})), "170141183460469231722463931679029329920");
  // Window W = 2^20 over N = 2^40: W(W+1)/2 + (N - W) W.
  const uint64_t w = uint64_t{1} << 20, n = uint64_t{1} << 40;
  EXPECT_EQ(SlidingWindowPairs(n, w),
            static_cast<Uint128>(w) * (w + 1) / 2 + static_cast<Uint128>(n - w) * w);
}

TEST(AttentionGeometryTest, AlignDown) {
  EXPECT_EQ(AlignDown(500, 16), 496u);
  EXPECT_EQ(AlignDown(496, 16), 496u);
  EXPECT_EQ(AlignDown(15, 16), 0u);
  EXPECT_EQ(AlignDown(527, 528), 0u);  // prompts under one block never hit
  EXPECT_EQ(AlignDown(777, 1), 777u);
  EXPECT_EQ(AlignDown(777, 0), 777u);
}

// The discrete reuse fraction A(P)/A(N) tends to alpha^2 (not alpha) as N grows.
TEST(AttentionGeometryTest, DiscreteFractionTendsToAlphaSquared) {
  const uint64_t n = 1'000'000;
  for (double alpha : {0.1, 0.25, 0.5, 0.9}) {
    const auto p = static_cast<uint64_t>(alpha * n);
    const double avoided = Uint128ToDouble(FullCausalPairs(p)) / Uint128ToDouble(FullCausalPairs(n));
    EXPECT_NEAR(avoided, alpha * alpha, 1e-5) << alpha;
    EXPECT_NEAR(ContinuousFullWork(alpha) / ContinuousFullWork(1), alpha * alpha, 1e-15);
  }
}

// The continuous window form is the limit of the discrete one with W = wN.
TEST(AttentionGeometryTest, ContinuousWindowIsTheLimit) {
  const uint64_t n = 2'000'000;
  for (double w : {0.1, 0.25, 0.5}) {
    for (double x : {0.05, 0.3, 0.75, 1.0}) {
      const double discrete = Uint128ToDouble(SlidingWindowPairs(static_cast<uint64_t>(x * n),
                                                                 static_cast<uint64_t>(w * n))) /
                              (static_cast<double>(n) * n);
      EXPECT_NEAR(discrete, ContinuousWindowWork(x, w), 1e-6) << "w=" << w << " x=" << x;
    }
  }
}

}  // namespace
}  // namespace kvledger
