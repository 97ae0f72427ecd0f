// The compute-time model: the decayed least-squares fit worked by hand, when it is ready, and the
// record-alone floor (docs/cost-model.md §8).
#include "lib/accounting/compute_time.h"

#include "gtest/gtest.h"

namespace kvledger {
namespace {

constexpr double kT = 1e12;  // a TFLOP

// 8 passes of 1 TFLOP at 0.02 s one half-life ago (weight 4 now), then 8 of 1 TFLOP at 0.03 s and
// 8 of 3 TFLOP at 0.05 s: at 1 TFLOP the weighted mean time is (4 x 0.02 + 8 x 0.03) / 12 = 0.02667,
// at 3 TFLOP 0.05, so the line is 0.011667 s per TFLOP with a fixed cost of 0.015 s.
TEST(DecayedAffineFitTest, HandWorkedDecayedFit) {
  DecayedAffineFit fit;
  for (int i = 0; i < 8; ++i) fit.Observe(1 * kT, 0.02, 0, 300);
  for (int i = 0; i < 8; ++i) fit.Observe(1 * kT, 0.03, 300, 300);
  for (int i = 0; i < 8; ++i) fit.Observe(3 * kT, 0.05, 300, 300);
  const auto model = fit.Fit();
  ASSERT_TRUE(model.has_value());
  EXPECT_EQ(model->basis, Basis::kLive);
  EXPECT_NEAR(model->seconds_per_flop * kT, (0.05 - 0.32 / 12) / 2, 1e-12);
  EXPECT_NEAR(model->fixed_seconds, 0.015, 1e-12);
  EXPECT_DOUBLE_EQ(model->weight, 20);
  EXPECT_EQ(model->samples, 24u);
  // A pass over 2 TFLOP, and what 2 TFLOP add to a pass that happens anyway.
  EXPECT_NEAR(model->PassSeconds(static_cast<Uint128>(2 * kT)), 0.015 + 2 * 0.0116666666667, 1e-9);
  EXPECT_NEAR(model->MarginalSeconds(static_cast<Uint128>(2 * kT)), 2 * 0.0116666666667, 1e-9);
}

// An engine whose pass takes exactly 12 ms + F / 3e14 FLOP/s is recovered from misses and short
// suffixes alike, whatever the order the samples arrive in.
TEST(DecayedAffineFitTest, RecoversAnAffineEngine) {
  DecayedAffineFit in_order, reversed;
  const double flops[] = {2.6e11, 4.1e12, 1.6e13, 3.3e13, 6.6e13, 1.3e14, 2.6e11, 2.6e11, 2.6e11, 5e12};
  for (int i = 0; i < 10; ++i) in_order.Observe(flops[i], 0.012 + flops[i] / 3e14, i, 300);
  for (int i = 9; i >= 0; --i) reversed.Observe(flops[i], 0.012 + flops[i] / 3e14, i, 300);
  for (const auto* fit : {&in_order, &reversed}) {
    const auto model = fit->Fit();
    ASSERT_TRUE(model.has_value());
    EXPECT_NEAR(model->FlopsPerSecond(), 3e14, 3e14 * 1e-9);
    EXPECT_NEAR(model->fixed_seconds, 0.012, 1e-11);
  }
}

// Ready only with 8 samples' weight and different suffix sizes: short suffixes alone cannot tell
// the fixed cost from the rate.
TEST(DecayedAffineFitTest, ReadyOnlyWithWeightAndSpread) {
  DecayedAffineFit fit;
  for (int i = 0; i < 7; ++i) fit.Observe((1 + i) * kT, 0.01 + 0.01 * (1 + i), 0, 300);
  EXPECT_FALSE(fit.Fit().has_value());  // weight 7
  fit.Observe(8 * kT, 0.09, 0, 300);
  EXPECT_TRUE(fit.Fit().has_value());
  DecayedAffineFit aged;
  fit.AddDecayedTo(aged, 300, 300);  // one half-life later: weight 4
  EXPECT_FALSE(aged.Fit().has_value());

  DecayedAffineFit same_size;  // 100 suffixes of 16 tokens: coefficient of variation ~0.01
  for (int i = 0; i < 100; ++i) same_size.Observe(2.6e11 * (1 + 0.01 * (i % 3)), 0.013, 0, 300);
  EXPECT_FALSE(same_size.Fit().has_value());
}

// A negative intercept means "no fixed cost": the line through the origin; a slope that is not
// positive is no model at all.
TEST(DecayedAffineFitTest, InterceptAndSlopeRules) {
  DecayedAffineFit through_origin;
  for (int i = 0; i < 4; ++i) through_origin.Observe(1 * kT, 0.001, 0, 300);
  for (int i = 0; i < 4; ++i) through_origin.Observe(3 * kT, 0.03, 0, 300);
  const auto model = through_origin.Fit();
  ASSERT_TRUE(model.has_value());
  EXPECT_EQ(model->fixed_seconds, 0);
  // sum(x y) / sum(x^2) = (4 x 0.001 + 4 x 3 x 0.03) / (4 + 36) = 0.364 / 40 s per TFLOP
  EXPECT_NEAR(model->seconds_per_flop * kT, 0.364 / 40, 1e-15);

  DecayedAffineFit falling;
  for (int i = 0; i < 4; ++i) falling.Observe(1 * kT, 0.03, 0, 300);
  for (int i = 0; i < 4; ++i) falling.Observe(3 * kT, 0.01, 0, 300);
  EXPECT_FALSE(falling.Fit().has_value());
}

// The record alone: its own rate, only when its suffix carries at least the reused prefix's FLOPs.
TEST(RecordAloneTest, Floor) {
  const auto at_floor = RecordAloneComputeTime(100, 100, 0.5);
  ASSERT_TRUE(at_floor.has_value());
  EXPECT_EQ(at_floor->basis, Basis::kRecord);
  EXPECT_DOUBLE_EQ(at_floor->MarginalSeconds(100), 0.5);
  EXPECT_FALSE(RecordAloneComputeTime(99, 100, 0.5).has_value());  // below the floor
  EXPECT_FALSE(RecordAloneComputeTime(100, 0, 0.5).has_value());   // nothing reused: no rate needed
  EXPECT_FALSE(RecordAloneComputeTime(100, 50, std::nullopt).has_value());
  EXPECT_FALSE(RecordAloneComputeTime(100, 50, 0.0).has_value());
}

TEST(ModelComputeTimeTest, LiveThenProfile) {
  const ComputeTime live{Basis::kLive, 0.01, 1e-14, 9, 9};
  EXPECT_EQ(ModelComputeTime(live, 4e14)->basis, Basis::kLive);
  EXPECT_EQ(ModelComputeTime(std::nullopt, 4e14)->basis, Basis::kProfile);
  EXPECT_DOUBLE_EQ(ModelComputeTime(std::nullopt, 4e14)->FlopsPerSecond(), 4e14);
  EXPECT_FALSE(ModelComputeTime(std::nullopt, 0).has_value());
}

}  // namespace
}  // namespace kvledger
