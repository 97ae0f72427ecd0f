#include "lib/accounting/derived_figures.h"

#include "tests/testing/records.h"

#include "gtest/gtest.h"
#include "lib/profiles/profile_catalog.h"

namespace kvledger {
namespace {

class DeriveTest : public ::testing::Test {
 protected:
  const ProfileCatalog catalog_ = ProfileCatalog::Builtin();
  const Profile& P(const char* name) { return *catalog_.Find(name); }
};

// Offline explain's source: the record alone above its floor (docs/cost-model.md §8).
const EstimateSource kRecordAlone{std::nullopt, /*record_alone=*/true};

RecordFacts Facts(const char* model, int64_t n, int64_t match) {
  return testing::HitFacts(model, n, match);
}

// docs/cost-model.md example 2: llama-3.1-8b, N = 4096, a 2048-token hit, worked by hand.
TEST_F(DeriveTest, Llama8bHalfHitWorkedExample) {
  const RecordFigures d = Derive(Facts("llama-3.1-8b", 4096, 2048), P("llama-3.1-8b"), kRecordAlone);
  EXPECT_EQ(d.recoverable_tokens, 2048u);  // 2048 is a whole number of 16-token pages
  EXPECT_EQ(d.reused_tokens, 2048u);
  EXPECT_EQ(d.recoverable_source, BoundarySourceKind::kModel);
  // 32 layers x 16384 FLOPs/pair x 4096*4097/2 pairs.
  EXPECT_EQ(Uint128ToString(d.attention_baseline_flops), "4399120252928");
  EXPECT_EQ(Uint128ToString(d.attention_avoided_flops[2]), "1100048498688");  // x 2048*2049/2
  EXPECT_EQ(Uint128ToString(d.prefill_baseline_flops), "61573724897280");
  EXPECT_EQ(Uint128ToString(d.prefill_avoided_flops[2]), "29687350820864");
  EXPECT_DOUBLE_EQ(1 - d.AttentionRemaining(), 2049.0 / 8194.0);  // ~25 %, not 50 %
  EXPECT_EQ(d.reused_bytes, Uint128{2048} * 65536 * 2);            // 256 MiB
  // The record alone (its suffix carries more FLOPs than the prefix): 0.2 s for the remaining FLOPs
  // -> what the avoided FLOPs would have cost.
  EXPECT_NEAR(*d.estimated_recompute_seconds, 0.2 * 29687350820864.0 / 31886374076416.0, 1e-15);
  EXPECT_EQ(d.estimate_basis, Basis::kRecord);
  EXPECT_NEAR(*d.whole.estimated_full_prefill_seconds, 0.2 + *d.estimated_recompute_seconds, 1e-15);
  EXPECT_FALSE(d.reload_slower_than_recompute);  // 0.01 s reload vs ~0.186 s recompute
}

// A record is never estimated from itself: with no live model and no profile throughput its
// estimate is unknown, and so is every figure built on it.
TEST_F(DeriveTest, RecordsAloneAreNotEstimated) {
  const RecordFigures d = Derive(Facts("llama-3.1-8b", 4096, 2048), P("llama-3.1-8b"));
  EXPECT_FALSE(d.estimated_recompute_seconds.has_value());
  EXPECT_EQ(d.estimate_basis, Basis::kNone);
  EXPECT_FALSE(d.reload_compared);
  EXPECT_FALSE(d.whole.estimated_full_prefill_seconds.has_value());
  // A miss recomputes nothing, whatever the model: 0 s, and its reload is compared with that.
  const RecordFigures miss = Derive(Facts("llama-3.1-8b", 4096, 0), P("llama-3.1-8b"));
  EXPECT_EQ(*miss.estimated_recompute_seconds, 0);
  EXPECT_EQ(miss.estimate_basis, Basis::kRecord);
  EXPECT_DOUBLE_EQ(*miss.whole.estimated_full_prefill_seconds, 0.2);  // the measured pass is the full one
  EXPECT_TRUE(miss.reload_slower_than_recompute);
}

// vLLM's full-prefix hit leaves a 16-token suffix: 4096 prompt tokens, 4080 reused, 20 ms of
// suffix that is almost all fixed cost. Scaled by FLOPs it would claim 4.76 s; the record alone is
// below its floor (the suffix carries 0.4 % of the FLOPs), so offline there is no estimate, and
// with a live model of 12 ms + F / 3e14 FLOP/s the estimate is the prefix's FLOPs at that rate.
TEST_F(DeriveTest, ShortSuffixUsesTheModelNeverItself) {
  RecordFacts f = Facts("llama-3.1-8b", 4096, 4096);
  f.suffix_prefill_seconds = 0.02;
  const RecordFigures alone = Derive(f, P("llama-3.1-8b"), kRecordAlone);
  EXPECT_EQ(alone.reused_tokens, 4080u);  // the last page is recomputed (§4.3)
  EXPECT_FALSE(alone.estimated_recompute_seconds.has_value());
  EXPECT_EQ(alone.estimate_basis, Basis::kNone);
  const EstimateSource live{ComputeTime{Basis::kLive, 0.012, 1 / 3e14, 100, 100}, true};
  const RecordFigures d = Derive(f, P("llama-3.1-8b"), live);
  EXPECT_EQ(d.estimate_basis, Basis::kLive);
  EXPECT_DOUBLE_EQ(*d.estimated_recompute_seconds, Uint128ToDouble(d.ReusedPrefillFlops()) / 3e14);
  EXPECT_NEAR(*d.estimated_recompute_seconds, 0.2044, 1e-4);  // not 4.76 s
  EXPECT_TRUE(d.reload_compared);
  EXPECT_FALSE(d.reload_slower_than_recompute);  // a 0.01 s device reload
}

// A slow remote reload costs more than recomputing the prefix: the verdict flips.
TEST_F(DeriveTest, SlowReloadIsSlowerThanRecompute) {
  RecordFacts f = Facts("llama-3.1-8b", 4096, 2048);
  f.reload_seconds = 0.5;
  const RecordFigures d = Derive(f, P("llama-3.1-8b"), kRecordAlone);
  EXPECT_TRUE(d.reload_slower_than_recompute);
  ASSERT_TRUE(d.e2e_speedup.has_value());
  EXPECT_LT(*d.e2e_speedup, 1.0);
}

// The record of the first edge-case report: no suffix prefill time means no rate, so no estimate,
// no verdict and no e2e speedup (it used to print an estimate of 0 s and "slower: YES").
TEST_F(DeriveTest, UnmeasuredSuffixGivesNoEstimate) {
  RecordFacts f = Facts("llama-3.1-8b", 4096, 2048);
  f.suffix_prefill_seconds.reset();
  f.ttft_seconds.reset();
  RecordFigures d = Derive(f, P("llama-3.1-8b"), kRecordAlone);
  EXPECT_FALSE(d.estimated_recompute_seconds.has_value());
  EXPECT_FALSE(d.reload_compared);
  EXPECT_FALSE(d.reload_slower_than_recompute);
  EXPECT_FALSE(d.overhead_fraction.has_value());
  EXPECT_FALSE(d.e2e_speedup.has_value());
  // A suffix time of 0 s for 61 TFLOPs of remaining work is not a rate either.
  f.suffix_prefill_seconds = 0;
  d = Derive(f, P("llama-3.1-8b"), kRecordAlone);
  EXPECT_FALSE(d.estimated_recompute_seconds.has_value());
  EXPECT_FALSE(d.reload_slower_than_recompute);
}

// Without a reload time there is an estimate but nothing to compare it with.
TEST_F(DeriveTest, UnmeasuredReloadIsNotCompared) {
  RecordFacts f = Facts("llama-3.1-8b", 4096, 2048);
  f.reload_seconds.reset();
  const RecordFigures d = Derive(f, P("llama-3.1-8b"), kRecordAlone);
  EXPECT_NEAR(*d.estimated_recompute_seconds, 0.2 * 29687350820864.0 / 31886374076416.0, 1e-15);
  EXPECT_FALSE(d.reload_compared);
  EXPECT_FALSE(d.reload_slower_than_recompute);
  EXPECT_FALSE(d.e2e_speedup.has_value());
}

// A profile throughput answers without a suffix time: 4e14 FLOP/s, worked by hand from example 2.
TEST_F(DeriveTest, ProfileThroughputGivesTheRate) {
  v1::ProfileCatalog overrides;
  auto* p = overrides.add_profiles();
  p->set_name("llama-3.1-8b");
  p->mutable_serving()->set_prefill_flops_per_second(4e14);
  auto catalog = ProfileCatalog::Make(overrides);
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  RecordFacts f = Facts("llama-3.1-8b", 4096, 2048);
  f.suffix_prefill_seconds.reset();
  f.reload_seconds = 0.1;
  const RecordFigures d = Derive(f, *catalog->Find("llama-3.1-8b"));
  EXPECT_DOUBLE_EQ(*d.estimated_recompute_seconds, 29687350820864.0 / 4e14);  // 0.0742 s
  EXPECT_DOUBLE_EQ(d.suffix_prefill_seconds_used, 31886374076416.0 / 4e14);   // 0.0797 s
  EXPECT_TRUE(d.reload_compared);
  EXPECT_TRUE(d.reload_slower_than_recompute);  // 0.1 s > 0.0742 s
  EXPECT_DOUBLE_EQ(*d.overhead_fraction, 0.1 / (61573724897280.0 / 4e14));
}

// A hybrid: the recurrent groups align the match down to their 256-token checkpoint, the MLA
// group to its 16-token page; the request resumes at the minimum, 768, and 232 tokens are lost
// to alignment.
TEST_F(DeriveTest, HybridAlignmentLoss) {
  RecordFacts f = Facts("kimi-linear-48b-a3b", 2000, 1000);
  f.recompute_tokens = 300;
  const RecordFigures d = Derive(f, P("kimi-linear-48b-a3b"));
  ASSERT_EQ(d.groups.size(), 3u);
  EXPECT_EQ(d.groups[0].modelled_boundary_tokens, 768u);
  EXPECT_EQ(d.groups[1].modelled_boundary_tokens, 768u);
  EXPECT_EQ(d.groups[2].modelled_boundary_tokens, 992u);
  EXPECT_EQ(d.recoverable_tokens, 768u);
  EXPECT_EQ(d.recompute_alignment_tokens, 232u);
  EXPECT_EQ(d.reused_tokens, 700u);
  EXPECT_EQ(d.recompute_restore_tokens, 68u);
  // Reused bytes: MLA latents for 700 tokens plus the constant recurrent state.
  EXPECT_EQ(d.reused_bytes, Uint128{7} * 576 * 2 * 700 + Uint128{20} * (524288 + 36864) * 2);
}

// An engine-reported boundary is used as is and a disagreement with the model is flagged.
TEST_F(DeriveTest, EngineBoundaryWinsAndDisagreementIsFlagged) {
  RecordFacts f = Facts("kimi-linear-48b-a3b", 2000, 1000);
  f.recoverable_tokens = 992;
  RecordFigures d = Derive(f, P("kimi-linear-48b-a3b"));
  EXPECT_EQ(d.recoverable_source, BoundarySourceKind::kEngine);
  EXPECT_EQ(d.recoverable_tokens, 992u);
  EXPECT_EQ(d.modelled_recoverable_tokens, 768u);
  EXPECT_TRUE(d.model_disagrees);
  f.recoverable_tokens = 768;
  EXPECT_FALSE(Derive(f, P("kimi-linear-48b-a3b")).model_disagrees);
}

// Per-group state boundaries set the recoverable boundary to their minimum.
TEST_F(DeriveTest, StateBoundariesGiveTheMinimum) {
  RecordFacts f = Facts("kimi-linear-48b-a3b", 2000, 1000);
  f.state_boundaries = {{"kda", 512}, {"mla", 992}};
  const RecordFigures d = Derive(f, P("kimi-linear-48b-a3b"));
  EXPECT_EQ(d.recoverable_source, BoundarySourceKind::kStateBoundaries);
  EXPECT_EQ(d.recoverable_tokens, 512u);
  EXPECT_EQ(*d.groups[1].reported_boundary_tokens, 512);
  EXPECT_FALSE(d.groups[0].reported_boundary_tokens.has_value());
}

// The engine restored more than the page model allows: trust the engine, flag the profile.
TEST_F(DeriveTest, ReusedBeyondModelRaisesRecoverable) {
  RecordFacts f = Facts("llama-3.1-8b", 1000, 500);
  f.recompute_tokens = 0;  // engine says all 500 were reused; the 16-token page model says 496
  const RecordFigures d = Derive(f, P("llama-3.1-8b"));
  EXPECT_EQ(d.recoverable_tokens, 500u);
  EXPECT_EQ(d.reused_tokens, 500u);
  EXPECT_TRUE(d.model_disagrees);
}

// A miss avoids nothing and its reload, if any, is slower than the zero it saved.
TEST_F(DeriveTest, MissAvoidsNothing) {
  RecordFacts f = Facts("gemma-3-12b", 3000, 0);
  f.tier_value = 0;
  const RecordFigures d = Derive(f, P("gemma-3-12b"));
  EXPECT_EQ(d.attention_avoided_flops[0], 0u);
  EXPECT_EQ(d.prefill_avoided_flops[2], 0u);
  EXPECT_EQ(d.reused_bytes, 0u);
  EXPECT_DOUBLE_EQ(*d.estimated_recompute_seconds, 0);
  EXPECT_TRUE(d.reload_slower_than_recompute);  // 0.01 s spent for nothing
}

// Avoided work at the three boundaries is ordered reused <= recoverable <= logical <= baseline.
TEST_F(DeriveTest, BoundariesAreOrdered) {
  for (const auto& name : catalog_.Names()) {
    RecordFacts f = Facts("m", 5000, 3333);
    f.recompute_tokens = 1000;
    const RecordFigures d = Derive(f, P(name.c_str()));
    EXPECT_LE(d.attention_avoided_flops[2], d.attention_avoided_flops[1]) << name;
    EXPECT_LE(d.attention_avoided_flops[1], d.attention_avoided_flops[0]) << name;
    EXPECT_LE(d.attention_avoided_flops[0], d.attention_baseline_flops) << name;
    EXPECT_LE(d.prefill_avoided_flops[0], d.prefill_baseline_flops) << name;
    EXPECT_GT(d.AttentionShare(), 0) << name;
    EXPECT_LT(d.AttentionShare(), 1) << name;
  }
}

// With a profile throughput the estimate is avoided FLOPs / throughput.
TEST_F(DeriveTest, ProfileThroughputEstimate) {
  v1::ProfileCatalog overrides;
  auto* p = overrides.add_profiles();
  p->set_name("llama-3.1-8b");
  p->mutable_serving()->set_prefill_flops_per_second(1e14);
  auto catalog = ProfileCatalog::Make(overrides);
  ASSERT_TRUE(catalog.ok());
  const RecordFigures d = Derive(Facts("llama-3.1-8b", 4096, 2048), *catalog->Find("llama-3.1-8b"));
  EXPECT_DOUBLE_EQ(*d.estimated_recompute_seconds, 29687350820864.0 / 1e14);
}

}  // namespace
}  // namespace kvledger
