// The second-tier what-if (docs/cost-model.md §15): the tier sizes as written, the reload-or-recompute
// rule by hand, and the live curves' tier figures against an independent two-level simulation
// (a device LRU evicting into a tier LRU, block by block).
#include "lib/capacity/second_tier.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/accounting/validation.h"
#include "lib/capacity/capacity_curves.h"
#include "lib/planning/tier_plan.h"
#include "lib/profiles/profile_catalog.h"
#include "tests/lib/capacity/session_trace.h"
#include "tests/testing/two_level_sim.h"

namespace kvledger {
namespace {

TEST(TierLadderTest, ReadsKindsSizesBandwidthsAndWaits) {
  auto ladder = ParseTierLadder("host:64GiB, disk:4TB:2e9:0.004,remote:1e12:12.5e9", "--capacity_tiers");
  ASSERT_TRUE(ladder.ok()) << ladder.status();
  ASSERT_EQ(ladder->size(), 3u);
  EXPECT_EQ((*ladder)[0].kind, Tier::kHost);
  EXPECT_EQ((*ladder)[0].bytes, uint64_t{64} << 30);
  EXPECT_EQ((*ladder)[0].StatedBandwidth(), 25e9);  // the kind's stated figure
  EXPECT_EQ((*ladder)[1].kind, Tier::kDisk);
  EXPECT_EQ((*ladder)[1].bytes, 4000000000000u);
  EXPECT_EQ((*ladder)[1].StatedBandwidth(), 2e9);
  EXPECT_EQ((*ladder)[1].wait_seconds, 0.004);
  EXPECT_EQ((*ladder)[2].bytes, 1000000000000u);
  EXPECT_TRUE(ParseTierLadder("", "--capacity_tiers")->empty());
  EXPECT_TRUE(ParseTierLadder(kDefaultTierLadder, "--capacity_tiers").ok());
}

TEST(TierLadderTest, RefusalsNameTheFlagTheValueAndTheRule) {
  const auto message = [](absl::string_view text) {
    return std::string(ParseTierLadder(text, "--capacity_tiers").status().message());
  };
  EXPECT_EQ(message("device:1TiB"),
            "--capacity_tiers = \"device:1TiB\": a tier is KIND:SIZE[:BYTES_PER_SECOND[:WAIT_SECONDS]] with KIND "
            "host, disk or remote");
  EXPECT_EQ(message("host:1.5"), "--capacity_tiers = \"1.5\": must be a whole number of bytes");
  EXPECT_EQ(message("host:lots"),
            "--capacity_tiers = \"lots\": must be a size in bytes up to 2^60, e.g. 1099511627776, 1TiB, 512GB or 2.5e11");
  EXPECT_EQ(message("host:0"), "--capacity_tiers = \"host:0\": a tier of 0 bytes holds nothing");
  EXPECT_EQ(message("host:1TiB:0"), "--capacity_tiers = \"host:1TiB:0\": BYTES_PER_SECOND must be a positive number");
  EXPECT_EQ(message("host:1TiB:1e9:-1"), "--capacity_tiers = \"host:1TiB:1e9:-1\": WAIT_SECONDS must be a non-negative number");
  EXPECT_EQ(message("host:1TiB,host:1099511627776"),
            "--capacity_tiers = \"host:1TiB,host:1099511627776\": the host tier of 1099511627776 bytes is listed twice");
  EXPECT_THAT(message("host:1,host:2,host:3,host:4,host:5,host:6,host:7,host:8,host:9"),
              ::testing::HasSubstr("9 tier sizes: must be at most 8"));
}

TEST(TierReloadTest, ReloadsWhereFasterAndSaysWhatReloadingRegardlessCosts) {
  // 134,217,728 bytes at 25 GB/s after 1 ms: 6.36870912 ms, against 10 ms of recompute.
  const TierReload fast = ChooseTierReload(134217728, 0.010, 25e9, 0.001);
  EXPECT_FALSE(fast.slower);
  EXPECT_DOUBLE_EQ(fast.reload_seconds, 0.00636870912);
  EXPECT_DOUBLE_EQ(fast.SavedSeconds(), 0.010 - 0.00636870912);
  EXPECT_EQ(fast.ExcessSeconds(), 0);
  const TierReload slow = ChooseTierReload(134217728, 0.010, 1e9, 0);  // 134 ms
  EXPECT_TRUE(slow.slower);
  EXPECT_EQ(slow.SavedSeconds(), 0);
  EXPECT_DOUBLE_EQ(slow.ExcessSeconds(), 0.134217728 - 0.010);
  EXPECT_TRUE(ChooseTierReload(1e9, 0.04, 25e9, 0).slower);  // a tie recomputes
}

// `ids` must outlive the facts (they view it).
RecordFacts Facts(int64_t prompt, const std::vector<uint64_t>& ids) {
  RecordFacts facts = FactsAtMatch("llama-3.1-8b", prompt, std::nullopt, 0);
  facts.prefix_block_ids = ids;
  facts.block_tokens = 512;
  facts.cache_capacity_blocks = 1;  // the device: one block
  return facts;
}

// By hand, llama-3.1-8b (131,072 KV bytes a token; prefill F(p) = a·p + c·p(p+1)/2 with
// a = 13,958,643,712 and c = 524,288), 512-token blocks, a device of one block and a host tier of two
// (128 MiB). A = [1, 2] and B = [3] miss; C = [1, 2] + 476 tokens finds 1 at depth 2 and 2 at depth 3:
// the device holds neither, the tier both: 1,024 tokens.
TEST(SecondTierTest, AHandWorkedRequest) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const Profile& profile = *catalog.Find("llama-3.1-8b");
  for (double bandwidth : {25e9, 1e9}) {
    CurveLimits limits;
    limits.tiers.sizes = {TierSize{Tier::kHost, 134217728, bandwidth, 0}};
    auto curves = CapacityCurves::Create({512}, 1, limits);
    ASSERT_TRUE(curves.ok());
    const EstimateSource live{ComputeTime{Basis::kLive, 0.02, 1e-15}, false};
    const std::vector<uint64_t> a = {1, 2}, b = {3}, c = {1, 2, 4};
    (*curves)->Observe(0, Facts(1024, a), profile, live);
    (*curves)->Observe(0, Facts(512, b), profile, live);
    (*curves)->Observe(0, Facts(1500, c), profile, live);
    const TierRung r = (*curves)->Snapshot().at(0).tier_rungs.at(0);
    EXPECT_EQ(r[kTierMatchTokens], 1024);
    EXPECT_EQ(r[kTierAttentionFlops], Uint128{524288} * 1024 * 1025 / 2);
    EXPECT_EQ(r[kTierPrefillFlops], Uint128{13958643712} * 1024 + Uint128{524288} * 1024 * 1025 / 2);
    EXPECT_EQ(r[kTierHitRequests], 1);
    EXPECT_EQ(r[kTierSecondsKnown], 1);
    // Recompute: 14,568,797,503,488 FLOPs at 1e-15 s a FLOP = 14.568797503 ms; reload: 134,217,728 bytes.
    if (bandwidth == 25e9) {  // 5.36870912 ms: reloaded
      EXPECT_EQ(r[kTierRecomputeNanos], 14568798);
      EXPECT_EQ(r[kTierReloadNanos], 5368709);
      EXPECT_EQ(r[kTierSlowerRequests], 0);
    } else {  // 134.217728 ms: recomputed, and reloading regardless would cost 119.648930 ms more
      EXPECT_EQ(r[kTierRecomputeNanos], 0);
      EXPECT_EQ(r[kTierReloadNanos], 0);
      EXPECT_EQ(r[kTierSlowerRequests], 1);
      EXPECT_EQ(r[kTierSlowerTokens], 1024);
      EXPECT_EQ(r[kTierSlowerExcessNanos], 119648930);
    }
  }
}

// A bandwidth measured for (model, tier kind) replaces the size's stated one: at 1 GB/s measured the
// hand-worked request's reload is slower than recomputing, though the size states 25 GB/s.
TEST(SecondTierTest, AMeasuredBandwidthReplacesTheStatedOne) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const Profile& profile = *catalog.Find("llama-3.1-8b");
  CurveLimits limits;
  limits.tiers.sizes = {TierSize{Tier::kHost, 134217728, 25e9, 0}, TierSize{Tier::kDisk, 134217728, 25e9, 0}};
  limits.tiers.measured_bandwidth = [](absl::string_view model, Tier kind) -> std::optional<double> {
    if (model == "llama-3.1-8b" && kind == Tier::kHost) return 1e9;
    return std::nullopt;
  };
  auto curves = CapacityCurves::Create({512}, 1, limits);
  const EstimateSource live{ComputeTime{Basis::kLive, 0.02, 1e-15}, false};
  for (const auto& [prompt, ids] : {std::pair{1024, std::vector<uint64_t>{1, 2}}, std::pair{512, std::vector<uint64_t>{3}},
                                   std::pair{1500, std::vector<uint64_t>{1, 2, 4}}}) {
    (*curves)->Observe(0, Facts(prompt, ids), profile, live);
  }
  const auto curve = (*curves)->Snapshot().at(0);
  EXPECT_EQ(curve.tier_rungs[0][kTierSlowerRequests], 1);  // host: measured 1 GB/s
  EXPECT_EQ(curve.tier_rungs[1][kTierSlowerRequests], 0);  // disk: nothing measured, the stated 25 GB/s
  EXPECT_EQ(curve.tier_rungs[1][kTierReloadNanos], 5368709);
}

TEST(SecondTierTest, NoDeviceCapacityIsCountedApart) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  CurveLimits limits;
  limits.tiers.sizes = {TierSize{Tier::kHost, uint64_t{1} << 30, 0, 0}};
  auto curves = CapacityCurves::Create({512}, 1, limits);
  const std::vector<uint64_t> ids = {1, 2};
  RecordFacts facts = Facts(1024, ids);
  facts.cache_capacity_blocks.reset();
  (*curves)->Observe(0, facts, *catalog.Find("llama-3.1-8b"), EstimateSource{});
  EXPECT_EQ((*curves)->Snapshot().at(0).tier_no_device, 1u);
  EXPECT_EQ((*curves)->Snapshot().at(0).tier_rungs.at(0)[kTierHitRequests], 0);
}

// A generated trace at 64-token blocks of llama-3.1-8b (131,072 KV bytes a token), with its ids.
constexpr uint64_t kBlock = 64, kBlockBytes = kBlock * 131072;
const ComputeTime kCompute{Basis::kLive, 0.02, 1.0 / 4e14};
struct Generated {
  std::vector<TraceRequest> requests;
  std::vector<std::vector<uint64_t>> ids;
};
Generated Generate(uint64_t seed, int requests) {
  Generated g{SessionTrace(seed, requests, kBlock), {}};
  for (const TraceRequest& r : g.requests) g.ids.emplace_back(r.hash_ids.begin(), r.hash_ids.end());
  return g;
}
// The live curves' tiers of the trace below a device of `device` blocks (PlanTiers: CapacityCurves,
// exact); Simulated: the two-level simulation of one tier below the same device.
CapacityCurves::ModelCurve Live(const Generated& g, const Profile& profile, uint64_t device,
                                const std::vector<TierSize>& tiers, bool inclusive = false) {
  return PlanTiers(g.requests, profile,
                   {kBlock, device * kBlock, tiers, inclusive, kCompute, std::nullopt, SampledStack::kUnlimitedSamples, &g.ids});
}
testing::TwoLevelTruth Simulated(const Generated& g, const Profile& profile, uint64_t device, const TierSize& tier,
                                 bool inclusive = false) {
  return testing::SimulateTwoLevel(
      g.requests, g.ids, profile, kBlock,
      {device, tier.bytes / kBlockBytes, tier.stated_bytes_per_second, tier.wait_seconds, inclusive}, kCompute);
}
double Seconds(Uint128 nanos) { return Uint128ToDouble(nanos) / 1e9; }

// A write-through tier (vLLM's OffloadingConnector) holds copies of the device's blocks: the live
// figures with `inclusive` equal a device LRU beside a tier LRU fed every block, block by block, where
// a tier no larger than the device serves nothing.
TEST(SecondTierTest, AnInclusiveTierEqualsAnLruOfCopiesBesideTheDevice) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const Profile& profile = *catalog.Find("llama-3.1-8b");
  const Generated g = Generate(13, 2000);
  std::vector<TierSize> tiers;
  for (uint64_t blocks : {50u, 100u, 300u, 1000u}) tiers.push_back(TierSize{Tier::kHost, blocks * kBlockBytes, 3e9, 1e-4});
  const auto curve = Live(g, profile, 100, tiers, /*inclusive=*/true);
  for (size_t t = 0; t < tiers.size(); ++t) {
    SCOPED_TRACE(::testing::Message() << "tier of " << tiers[t].bytes / kBlockBytes << " blocks");
    const testing::TwoLevelTruth truth = Simulated(g, profile, 100, tiers[t], /*inclusive=*/true);
    const TierRung& r = curve.tier_rungs[t];
    EXPECT_EQ(r[kTierMatchTokens], truth.tier_tokens);
    EXPECT_EQ(r[kTierPrefillFlops], truth.prefill_flops);
    EXPECT_EQ(r[kTierHitRequests], truth.hit_requests);
    EXPECT_EQ(r[kTierSlowerRequests], truth.slower_requests);
    EXPECT_NEAR(Seconds(r[kTierRecomputeNanos]), truth.recompute_seconds, 1e-9 * static_cast<double>(truth.hit_requests));
    EXPECT_EQ(truth.hit_requests > 0, tiers[t].bytes / kBlockBytes > 100);  // no larger than the device: nothing
  }
}

// A tier too slow for any reload to pay: nothing saved with the threshold on, and with it off the
// whole cost, reload less recompute, of every part it holds.
TEST(SecondTierTest, ATierSlowerThanRecomputingSavesNothingAndSaysWhatItWouldCost) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const Profile& profile = *catalog.Find("llama-3.1-8b");
  const Generated g = Generate(9, 1000);
  const TierSize slow{Tier::kRemote, 400 * kBlockBytes, 1e6, 0.5};  // 1 MB/s after 0.5 s
  const TierRung r = Live(g, profile, 50, {slow}).tier_rungs.at(0);
  const testing::TwoLevelTruth truth = Simulated(g, profile, 50, slow);
  EXPECT_GT(r[kTierHitRequests], 100);
  EXPECT_EQ(r[kTierSlowerRequests], r[kTierHitRequests]);
  EXPECT_EQ(r[kTierSlowerTokens], r[kTierMatchTokens]);
  EXPECT_EQ(r[kTierRecomputeNanos], 0);
  EXPECT_EQ(r[kTierReloadNanos], 0);
  EXPECT_EQ(truth.NetSeconds(), 0);
  EXPECT_GT(truth.excess_seconds, 0.5 * static_cast<double>(truth.hit_requests));  // the wait alone
  EXPECT_NEAR(Seconds(r[kTierSlowerExcessNanos]), truth.excess_seconds, 1e-9 * static_cast<double>(truth.hit_requests));
}

// The live tiers from stack depths equal the two-level simulation block by block, at several device
// and tier sizes, with a tier fast enough to reload and one too slow for some requests.
TEST(SecondTierTest, EqualsATwoLevelSimulation) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const Profile& profile = *catalog.Find("llama-3.1-8b");
  const Generated g = Generate(5, 3000);
  uint64_t slower = 0, reloaded = 0;  // both choices are made somewhere
  for (uint64_t device : {16u, 100u, 400u}) {
    std::vector<TierSize> tiers;
    for (uint64_t blocks : {8u, 64u, 300u}) {
      tiers.push_back(TierSize{Tier::kHost, blocks * kBlockBytes, 25e9, 0});
      tiers.push_back(TierSize{Tier::kDisk, blocks * kBlockBytes, 1.5e9, 0.0002});
    }
    const auto curve = Live(g, profile, device, tiers);
    for (size_t t = 0; t < tiers.size(); ++t) {
      SCOPED_TRACE(::testing::Message() << "device " << device << " " << TierLabel(tiers[t].kind) << " " << tiers[t].bytes);
      const testing::TwoLevelTruth truth = Simulated(g, profile, device, tiers[t]);
      const TierRung& r = curve.tier_rungs[t];
      EXPECT_GT(truth.hit_requests, 0u);
      EXPECT_EQ(r[kTierMatchTokens], truth.tier_tokens);
      EXPECT_EQ(r[kTierAttentionFlops], truth.attention_flops);
      EXPECT_EQ(r[kTierPrefillFlops], truth.prefill_flops);
      EXPECT_EQ(r[kTierHitRequests], truth.hit_requests);
      EXPECT_EQ(r[kTierSlowerRequests], truth.slower_requests);
      EXPECT_EQ(r[kTierSlowerTokens], truth.slower_tokens);
      // Seconds: each request's nanoseconds rounded once.
      const double slack = 1e-9 * static_cast<double>(truth.hit_requests);
      EXPECT_NEAR(Seconds(r[kTierRecomputeNanos]), truth.recompute_seconds, slack);
      EXPECT_NEAR(Seconds(r[kTierReloadNanos]), truth.reload_seconds, slack);
      EXPECT_NEAR(Seconds(r[kTierSlowerExcessNanos]), truth.excess_seconds, slack);
      slower += truth.slower_requests;
      reloaded += truth.hit_requests - truth.slower_requests;
    }
  }
  EXPECT_GT(slower, 100u);
  EXPECT_GT(reloaded, 100u);
}

}  // namespace
}  // namespace kvledger
