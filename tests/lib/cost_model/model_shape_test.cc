#include "lib/cost_model/model_shape.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace kvledger {
namespace {

LayerGroupShape Group(const char* name, MixerKind kind, uint32_t layers, uint64_t window,
                      uint64_t alignment) {
  LayerGroupShape g;
  g.name = name;
  g.kind = kind;
  g.num_layers = layers;
  g.window_tokens = window;
  g.alignment_tokens = alignment;
  g.pair_flops = 7;
  g.recurrent_flops_per_token = 11;
  g.token_flops = 13;
  g.kv_bytes_per_token = 5;
  g.state_bytes_per_sequence = 1000;
  return g;
}

// A hybrid: 3 recurrent layers, 2 local (W=8) and 1 global attention layer.
ModelShape Hybrid() {
  return ModelShape{{Group("recurrent", MixerKind::kLinear, 3, 0, 32),
                     Group("local", MixerKind::kSlidingWindow, 2, 8, 4),
                     Group("global", MixerKind::kFullCausal, 1, 0, 4)}};
}

// Mixing + token-wise FLOPs of the first `tokens` queries, counted query by query, layer by layer.
Uint128 BruteForcePrefillFlops(const ModelShape& shape, uint64_t tokens) {
  Uint128 flops = 0;
  for (const auto& g : shape.groups) {
    for (uint32_t layer = 0; layer < g.num_layers; ++layer) {
      for (uint64_t t = 1; t <= tokens; ++t) {
        flops += g.token_flops;
        if (g.kind == MixerKind::kLinear) {
          flops += g.recurrent_flops_per_token;
          continue;
        }
        for (uint64_t k = 1; k <= t; ++k) {
          if (g.kind == MixerKind::kFullCausal || t - k < g.window_tokens) flops += g.pair_flops;
        }
      }
    }
  }
  return flops;
}

// Closed-form prefill FLOPs of a hybrid equal layer-by-layer, pair-by-pair counting.
TEST(ModelShapeTest, HybridPrefillFlopsMatchBruteForce) {
  const ModelShape shape = Hybrid();
  for (uint64_t n = 0; n <= 80; ++n) {
    EXPECT_EQ(PrefillFlops(shape, n), BruteForcePrefillFlops(shape, n)) << "N=" << n;
  }
}

// Avoided work is 0 at P = 0, grows with P and never exceeds the baseline.
TEST(ModelShapeTest, AvoidedWorkIsMonotoneAndBounded) {
  const ModelShape shape = Hybrid();
  const uint64_t n = 100;
  Uint128 previous = 0;
  EXPECT_EQ(MixingFlops(shape, 0), 0u);
  EXPECT_EQ(PrefillFlops(shape, 0), 0u);
  for (uint64_t p = 1; p <= n; ++p) {
    const Uint128 avoided = PrefillFlops(shape, p);
    EXPECT_GT(avoided, previous);
    EXPECT_LE(avoided, PrefillFlops(shape, n));
    previous = avoided;
  }
}

// Each group aligns the match down to its own page or checkpoint; the model resumes at the minimum.
TEST(ModelShapeTest, RecoverableBoundaryIsTheMinimumOverGroups) {
  const ModelShape shape = Hybrid();
  EXPECT_EQ(GroupBoundary(shape.groups[0], 70, 1000), 64u);  // checkpoint 32
  EXPECT_EQ(GroupBoundary(shape.groups[1], 70, 1000), 68u);  // page 4
  EXPECT_EQ(ModelledRecoverableTokens(shape, 70, 1000), 64u);
  EXPECT_EQ(ModelledRecoverableTokens(shape, 31, 1000), 0u);  // under one checkpoint: nothing
  // Full match of a 100-token prompt: the last token is always computed, so 99, aligned to 96.
  EXPECT_EQ(ModelledRecoverableTokens(shape, 100, 100), 96u);
  EXPECT_EQ(ModelledRecoverableTokens(ModelShape{{Group("g", MixerKind::kFullCausal, 1, 0, 1)}}, 100, 100), 99u);
}

// Cache bytes: full attention grows with tokens, a window stops at W, recurrent state is constant.
TEST(ModelShapeTest, CacheBytesPerKind) {
  const ModelShape shape = Hybrid();
  EXPECT_EQ(GroupCacheBytes(shape.groups[2], 100), 1u * 5 * 100);
  EXPECT_EQ(GroupCacheBytes(shape.groups[1], 100), 2u * 5 * 8);
  EXPECT_EQ(GroupCacheBytes(shape.groups[1], 3), 2u * 5 * 3);
  EXPECT_EQ(GroupCacheBytes(shape.groups[0], 100), 3u * 1000);
  EXPECT_EQ(GroupCacheBytes(shape.groups[0], 0), 0u);
  EXPECT_EQ(CacheBytes(shape, 100), Uint128{500 + 80 + 3000});
  EXPECT_EQ(BytesPerCachedToken(shape), 2u * 5 + 1u * 5);
  EXPECT_EQ(StateBytesPerSequence(shape), 3000u);
}

// 128-bit sums stay exact at N = 2^31 with a large model's constants.
TEST(ModelShapeTest, LargePromptIsExact) {
  LayerGroupShape g = Group("g", MixerKind::kFullCausal, 128, 0, 16);
  g.pair_flops = 2 * 128 * (192 + 128);
  const uint64_t n = uint64_t{1} << 31;
  const Uint128 pairs = static_cast<Uint128>(n) * (n + 1) / 2;
  EXPECT_EQ(MixingFlops(ModelShape{{g}}, n), pairs * 128 * g.pair_flops);
}

}  // namespace
}  // namespace kvledger
