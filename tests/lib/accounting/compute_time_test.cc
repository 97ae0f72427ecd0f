// The compute-time model: the decayed least-squares fit worked by hand, when it is ready, and the
// record-alone floor (docs/cost-model.md §8).
#include "lib/accounting/compute_time.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace kvledger {
namespace {

constexpr double kT = 1e12;  // a TFLOP

// A pass of `flops` with no attention, of about one token per 1e10 FLOPs: what the affine summary
// sees (the curve's own tests are below).
PassFlops Flops(double flops) { return {static_cast<uint64_t>(flops / 1e10) + 1, flops, 0}; }

// 8 passes of 1 TFLOP at 0.02 s one half-life ago (weight 4 now), then 8 of 1 TFLOP at 0.03 s and
// 8 of 3 TFLOP at 0.05 s: at 1 TFLOP the weighted mean time is (4 x 0.02 + 8 x 0.03) / 12 = 0.02667,
// at 3 TFLOP 0.05, so the line is 0.011667 s per TFLOP with a fixed cost of 0.015 s.
TEST(DecayedComputeFitTest, HandWorkedDecayedFit) {
  DecayedComputeFit fit;
  for (int i = 0; i < 8; ++i) fit.Observe(Flops(1 * kT), 0.02, 0, 300);
  for (int i = 0; i < 8; ++i) fit.Observe(Flops(1 * kT), 0.03, 300, 300);
  for (int i = 0; i < 8; ++i) fit.Observe(Flops(3 * kT), 0.05, 300, 300);
  const auto model = fit.Fit();
  ASSERT_TRUE(model.has_value());
  EXPECT_EQ(model->basis, Basis::kLive);
  EXPECT_NEAR(model->seconds_per_flop * kT, (0.05 - 0.32 / 12) / 2, 1e-12);
  EXPECT_NEAR(model->fixed_seconds, 0.015, 1e-12);
  EXPECT_DOUBLE_EQ(model->weight, 20);
  EXPECT_EQ(model->samples, 24u);
  // The affine summary: a pass over 2 TFLOP, and what 2 TFLOP add to a pass that happens anyway.
  ComputeTime affine = *model;
  affine.curve.reset();
  EXPECT_NEAR(affine.PassSeconds(Flops(2 * kT)), 0.015 + 2 * 0.0116666666667, 1e-9);
  EXPECT_NEAR(affine.RecomputeSeconds(Flops(3 * kT), Flops(1 * kT)), 2 * 0.0116666666667, 1e-9);
}

// An engine whose pass takes exactly 12 ms + F / 3e14 FLOP/s is recovered from misses and short
// suffixes alike, whatever the order the samples arrive in.
TEST(DecayedComputeFitTest, RecoversAnAffineEngine) {
  DecayedComputeFit in_order, reversed;
  const double flops[] = {2.6e11, 4.1e12, 1.6e13, 3.3e13, 6.6e13, 1.3e14, 2.6e11, 2.6e11, 2.6e11, 5e12};
  for (int i = 0; i < 10; ++i) in_order.Observe(Flops(flops[i]), 0.012 + flops[i] / 3e14, i, 300);
  for (int i = 9; i >= 0; --i) reversed.Observe(Flops(flops[i]), 0.012 + flops[i] / 3e14, i, 300);
  for (const auto* fit : {&in_order, &reversed}) {
    const auto model = fit->Fit();
    ASSERT_TRUE(model.has_value());
    EXPECT_NEAR(model->FlopsPerSecond(), 3e14, 3e14 * 1e-9);
    EXPECT_NEAR(model->fixed_seconds, 0.012, 1e-11);
  }
}

// Ready only with 8 samples' weight and different suffix sizes: short suffixes alone cannot tell
// the fixed cost from the rate.
TEST(DecayedComputeFitTest, ReadyOnlyWithWeightAndSpread) {
  DecayedComputeFit fit;
  for (int i = 0; i < 7; ++i) fit.Observe(Flops((1 + i) * kT), 0.01 + 0.01 * (1 + i), 0, 300);
  EXPECT_FALSE(fit.Fit().has_value());  // weight 7
  fit.Observe(Flops(8 * kT), 0.09, 0, 300);
  EXPECT_TRUE(fit.Fit().has_value());
  DecayedComputeFit aged;
  fit.AddDecayedTo(aged, 300, 300);  // one half-life later: weight 4
  EXPECT_FALSE(aged.Fit().has_value());

  DecayedComputeFit same_size;  // 100 suffixes of 16 tokens: coefficient of variation ~0.01
  for (int i = 0; i < 100; ++i) same_size.Observe(Flops(2.6e11 * (1 + 0.01 * (i % 3))), 0.013, 0, 300);
  EXPECT_FALSE(same_size.Fit().has_value());
}

// A negative intercept means "no fixed cost": the line through the origin; a slope that is not
// positive is no model at all.
TEST(DecayedComputeFitTest, InterceptAndSlopeRules) {
  DecayedComputeFit through_origin;
  for (int i = 0; i < 4; ++i) through_origin.Observe(Flops(1 * kT), 0.001, 0, 300);
  for (int i = 0; i < 4; ++i) through_origin.Observe(Flops(3 * kT), 0.03, 0, 300);
  const auto model = through_origin.Fit();
  ASSERT_TRUE(model.has_value());
  EXPECT_EQ(model->fixed_seconds, 0);
  // sum(x y) / sum(x^2) = (4 x 0.001 + 4 x 3 x 0.03) / (4 + 36) = 0.364 / 40 s per TFLOP
  EXPECT_NEAR(model->seconds_per_flop * kT, 0.364 / 40, 1e-15);

  DecayedComputeFit falling;
  for (int i = 0; i < 4; ++i) falling.Observe(Flops(1 * kT), 0.03, 0, 300);
  for (int i = 0; i < 4; ++i) falling.Observe(Flops(3 * kT), 0.01, 0, 300);
  EXPECT_FALSE(falling.Fit().has_value());
}

// The curve by hand: h = 10 ms at 0 and 16 tokens, 12 ms at 32, then +4 ms per doubling; attention
// at 1 s per 1e15 FLOPs up to 128 tokens, then 0.8 at 256; segment [256, 512] keeps a quarter of its
// slope inside a tile (c = -3/4 of 4 ms / 256 tokens). A 24-token pass is halfway between 10 and 12 ms
// (no padding below the tile); 48 tokens halfway between 12 and 16 ms. 300 tokens are padded to
// 384: h(384) = 26 ms, less 84 tokens of padding at 11.71875 us, and attention at 0.8.
TEST(PassCurveTest, HandWorked) {
  ComputeTime model{Basis::kLive, 0, 1e-15, 8, 8};
  PassCurve& curve = model.curve.emplace();
  curve.knot_seconds = {0.010, 0.010, 0.012, 0.016, 0.020, 0.024, 0.028};
  for (size_t j = 7; j < kPassKnots; ++j) curve.knot_seconds[j] = 0.028 + 0.004 * static_cast<double>(j - 6);
  curve.attention_seconds_per_flop.fill(0.8e-15);
  for (size_t j = 0; j <= 4; ++j) curve.attention_seconds_per_flop[j] = 1e-15;
  curve.tile_seconds_per_token[5] = -0.75 * 0.004 / 256;
  EXPECT_NEAR(model.PassSeconds({24, 1e13, 0}), 0.011, 1e-15);
  EXPECT_NEAR(model.PassSeconds({48, 2e13, 2e12}), 0.014 + 0.002, 1e-15);
  EXPECT_NEAR(model.RecomputeSeconds({48, 2e13, 2e12}, {24, 1e13, 1.5e12}), (0.014 + 0.002) - (0.011 + 0.0015),
              1e-15);
  EXPECT_EQ(model.RecomputeSeconds({48, 2e13, 2e12}, {48, 2e13, 2e12}), 0);  // nothing reused
  EXPECT_NEAR(model.PassSeconds({300, 0, 1e12}), 0.026 - 84 * 0.75 * 0.004 / 256 + 0.8e-3, 1e-15);
  // 200 tokens, padded to 256 (h = 24 ms, its segment's c = 0): attention at 1 - 0.2 x 72/128.
  EXPECT_NEAR(model.PassSeconds({200, 0, 1e12}), 0.024 + (1 - 0.2 * 72 / 128.0) * 1e-3, 1e-15);
  EXPECT_NEAR(model.PassSeconds({384, 0, 0}), 0.026, 1e-15);  // a whole number of tiles: no padding
  EXPECT_NEAR(model.PassSeconds({257, 0, 0}), model.PassSeconds({383, 0, 0}) - 126 * 0.75 * 0.004 / 256, 1e-15);
  EXPECT_NEAR(model.PassSeconds({kMaxTokens, 0, 0}), curve.knot_seconds.back(), 1e-12);
}

// An engine of the affine model's own form (12 ms + all FLOPs / 3e14, attention at the same rate) is
// also exactly what the curve learns: a straight h (every tile term at h's slope) costs no smoothing.
TEST(PassCurveTest, AffineEngineStaysExact) {
  DecayedComputeFit fit;
  const double a = 1.4e10, c = 5.2e5;  // FLOPs per token, per causal pair
  auto pass = [&](uint64_t cached, uint64_t fresh) {
    const double pairs = static_cast<double>(fresh) * (static_cast<double>(cached) + (fresh + 1) / 2.0);
    return PassFlops{fresh, a * static_cast<double>(fresh) + c * pairs, c * pairs};
  };
  for (uint64_t n : {64, 512, 700, 2048, 5000, 8192}) fit.Observe(pass(0, n), 0.012 + pass(0, n).flops / 3e14, 0, 300);
  for (uint64_t p : {1024, 4096, 16384}) {
    for (uint64_t s : {16, 48, 300}) fit.Observe(pass(p, s), 0.012 + pass(p, s).flops / 3e14, 0, 300);
  }
  const auto model = fit.Fit();
  ASSERT_TRUE(model && model->curve);
  for (uint64_t p : {16, 512, 3000, 20000}) {
    const double want = (pass(0, p + 32).flops - pass(p, 32).flops) / 3e14;
    EXPECT_NEAR(model->RecomputeSeconds(pass(0, p + 32), pass(p, 32)), want, want * 1e-6) << p;
  }
}

// FLOPs of a pass in the roofline and tile engines below.
PassFlops Pass(uint64_t cached, uint64_t fresh) {
  constexpr double kA = 1.4e10, kC = 5.2e5;  // FLOPs per token, per causal pair
  const double pairs = static_cast<double>(fresh) * (static_cast<double>(cached) + (fresh + 1) / 2.0);
  return {fresh, kA * static_cast<double>(fresh) + kC * pairs, kC * pairs};
}

// A roofline engine: 10 ms until 256 tokens (the weights are read whatever the count), then 40 us a
// token; attention 1.5 times slower per FLOP than the multiplies. The affine summary overstates
// recomputing a short prefix several times over; the curve learns both effects.
TEST(PassCurveTest, LearnsShortPassesAndAttentionAtItsOwnRate) {
  auto truth = [&](uint64_t cached, uint64_t fresh) {
    return std::max(0.010, 4e-5 * static_cast<double>(fresh)) + Pass(cached, fresh).attention_flops * 1.5 * 4e-5 / 1.4e10;
  };
  DecayedComputeFit fit;
  for (uint64_t n : {32, 128, 256, 1024, 4096, 16384}) fit.Observe(Pass(0, n), truth(0, n), 0, 300);
  for (uint64_t p : {128, 2048, 8192, 32768}) {
    for (uint64_t s : {16, 32, 64, 512}) fit.Observe(Pass(p, s), truth(p, s), 0, 300);
  }
  const auto model = fit.Fit();
  ASSERT_TRUE(model && model->curve);
  for (const auto& [p, s] : {std::pair<uint64_t, uint64_t>{64, 32}, {192, 64}, {2048, 16}, {8192, 512}}) {
    const double want = truth(0, p + s) - truth(p, s);
    EXPECT_NEAR(model->RecomputeSeconds(Pass(0, p + s), Pass(p, s)), want, want * 0.01) << p << "+" << s;
    ComputeTime affine = *model;
    affine.curve.reset();
    if (p < 256) {
      EXPECT_GT(affine.RecomputeSeconds(Pass(0, p + s), Pass(p, s)), 2 * want) << p << "+" << s;
    }
  }
}

// A tile engine, as the A100 timings of docs/cost-model.md §8 measure one: the multiplies take 8 ms
// plus 30 us per token of the pass padded to 128 (a staircase), and attention runs twice as slow per
// FLOP on a 64-token pass as on one of 8,192 (linear in log2 of the size between). Passes of every
// size are observed. Recomputing a short prefix is off by 30 % or more when the staircase is
// smoothed out; the curve is within 3 % at sizes between the tiles (b is linear in the
// tokens between knots, the engine's rate in their log), and learns the attention rate at each size.
TEST(PassCurveTest, LearnsTheTileStaircaseAndAttentionBySize) {
  auto rate = [](uint64_t fresh) {  // attention seconds per FLOP
    const double l = std::clamp(std::log2(static_cast<double>(fresh)), 6.0, 13.0);
    return 1e-14 * (2 - (l - 6) / 7);
  };
  auto truth = [&](uint64_t cached, uint64_t fresh) {
    return 0.008 + 3e-5 * static_cast<double>(TilePadded(fresh)) + Pass(cached, fresh).attention_flops * rate(fresh);
  };
  DecayedComputeFit fit;
  uint64_t state = 11;
  auto next = [&](uint64_t below) {
    state = state * 6364136223846793005u + 1442695040888963407u;
    return (state >> 33) % below;
  };
  for (int i = 0; i < 600; ++i) {
    const uint64_t fresh = 16 + next(i % 2 == 0 ? 1024 : 16384), cached = i % 3 == 0 ? 0 : 16 * next(1024);
    fit.Observe(Pass(cached, fresh), truth(cached, fresh), 0, 300);
  }
  const auto model = fit.Fit();
  ASSERT_TRUE(model && model->curve);
  for (const auto& [p, s] : {std::pair<uint64_t, uint64_t>{100, 40}, {200, 100}, {300, 250}, {1000, 1100},
                             {4000, 3000}, {160, 9000}}) {
    const double want = truth(0, p + s) - truth(p, s);
    EXPECT_NEAR(model->RecomputeSeconds(Pass(0, p + s), Pass(p, s)), want, want * 0.03) << p << "+" << s;
  }
  // The same knots with the staircase smoothed out (every c at h's slope) miss a short prefix by far.
  ComputeTime smooth = *model;
  for (size_t i = 0; i < kPassSegments; ++i) {
    smooth.curve->tile_seconds_per_token[i] = -(smooth.curve->knot_seconds[i + 1] - smooth.curve->knot_seconds[i]) /
                                              static_cast<double>(kPassKnotTokens[i + 1] - kPassKnotTokens[i]);
  }
  const double want = truth(0, 140) - truth(100, 40);
  EXPECT_GT(std::fabs(smooth.RecomputeSeconds(Pass(0, 140), Pass(100, 40)) - want), 0.3 * want);
  // The staircase itself: one token past a tile costs a whole tile more, one token short of it nothing.
  EXPECT_NEAR(model->PassSeconds(Pass(0, 1025)) - model->PassSeconds(Pass(0, 1024)), 128 * 3e-5, 128 * 3e-5 * 0.05);
  EXPECT_NEAR(model->PassSeconds(Pass(0, 1151)), model->PassSeconds(Pass(0, 1152)), 128 * 3e-5 * 0.05);
}

// The solve against its objective computed from the samples themselves (not the sums): at the
// fitted unknowns, moving any one of them by 0.1 % either way makes the weighted squared residuals
// plus the smoothing penalties no smaller. The engine keeps half of each tile's step; pass sizes are
// spread evenly in log2 from 1 to 20,000 tokens, so that no constraint of the fit is active.
TEST(PassCurveTest, SolutionMinimizesTheObjective) {
  struct Sample {
    PassFlops pass;
    double seconds, weight;
  };
  std::vector<Sample> samples;
  DecayedComputeFit fit;
  uint64_t state = 7;
  for (int i = 0; i < 400; ++i) {
    state = state * 6364136223846793005u + 1442695040888963407u;
    const auto tokens = static_cast<uint64_t>(std::exp2(14.3 * static_cast<double>(state >> 40) / 0x1p24)) + 1;
    const double attention = static_cast<double>((state >> 13) % 1000) * 1e12;
    const double seconds = 0.01 + 1.5e-5 * static_cast<double>(tokens + TilePadded(tokens)) + attention * 1e-15 +
                           0.0002 * static_cast<double>((state >> 7) % 100) / 100;
    const double now = i;  // decayed: older samples weigh less
    fit.Observe({tokens, 1.4e10 * static_cast<double>(tokens) + attention, attention}, seconds, now, 100);
    samples.push_back({{tokens, 0, attention}, seconds, std::exp2(-(399 - now) / 100)});
  }
  const auto model = fit.Fit();
  ASSERT_TRUE(model && model->curve);
  double total_weight = 0, attention_squared = 0;
  for (const Sample& x : samples) {
    total_weight += x.weight;
    attention_squared += x.weight * std::pow(x.pass.attention_flops / 1e12, 2);
  }
  auto slope = [](const auto& v, size_t j) { return (v[j + 1] - v[j]) / (kPassKnotTokens[j + 1] - kPassKnotTokens[j]); };
  auto objective = [&](const PassCurve& curve) {
    double sum = 0;
    for (const Sample& x : samples) sum += x.weight * std::pow(x.seconds - curve.Seconds(x.pass), 2);
    const double penalty = 1e-6 * total_weight;
    for (size_t j = 1; j + 1 < kPassKnots; ++j) {
      const double k = static_cast<double>(kPassKnotTokens[j]);
      sum += penalty * std::pow(k * (slope(curve.knot_seconds, j) - slope(curve.knot_seconds, j - 1)), 2);
    }
    for (size_t j = 1; j < kPassKnots; ++j) {  // b in seconds per TFLOP, weighed by the mean square attention TFLOPs
      const auto& b = curve.attention_seconds_per_flop;
      sum += penalty * attention_squared / total_weight * 1e24 * std::pow(b[j] - b[j - 1], 2);
    }
    for (size_t i = 0; i + 1 < kPassKnots; ++i) {
      sum += penalty * std::pow(128 * (curve.tile_seconds_per_token[i] + slope(curve.knot_seconds, i)), 2);
    }
    return sum;
  };
  const PassCurve best = *model->curve;
  const double at_best = objective(best);
  for (size_t j = 0; j < 2 * kPassKnots + kPassSegments; ++j) {
    for (double factor : {0.999, 1.001}) {
      PassCurve moved = best;
      double& v = j < kPassKnots       ? moved.knot_seconds[j]
                  : j < 2 * kPassKnots ? moved.attention_seconds_per_flop[j - kPassKnots]
                                       : moved.tile_seconds_per_token[j - 2 * kPassKnots];
      v *= factor;
      EXPECT_GE(objective(moved), at_best * (1 - 1e-12)) << "unknown " << j << " x " << factor;
    }
  }
}

// The record alone: its own rate, only when its suffix carries at least the reused prefix's FLOPs.
TEST(RecordAloneTest, Floor) {
  const auto at_floor = RecordAloneComputeTime(100, 100, 0.5);
  ASSERT_TRUE(at_floor.has_value());
  EXPECT_EQ(at_floor->basis, Basis::kRecord);
  EXPECT_DOUBLE_EQ(at_floor->RecomputeSeconds({2, 200, 0}, {1, 100, 0}), 0.5);
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
