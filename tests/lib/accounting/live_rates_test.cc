// Live rates: decayed sums worked by hand, order independence, and which records feed them.
#include "lib/accounting/live_rates.h"

#include <thread>

#include "gtest/gtest.h"
#include "lib/accounting/ledger.h"
#include "lib/profiles/profile_catalog.h"

namespace kvledger {
namespace {

// One half-life is 300 s: a sample of 300 s ago weighs 1/2.
TEST(DecayedRateTest, HandWorkedDecay) {
  DecayedRate r;
  r.Observe(100, 1, /*now=*/0, /*half_life=*/300);
  r.Observe(300, 1, 300, 300);
  const auto e = r.Evidence();
  ASSERT_TRUE(e.has_value());
  // (100/2 + 300) / (1/2 + 1) = 350 / 1.5
  EXPECT_DOUBLE_EQ(e->rate, 350.0 / 1.5);
  EXPECT_DOUBLE_EQ(e->weight, 1.5);
  EXPECT_EQ(e->samples, 2u);
  // Read 600 s later: both sums halve twice, the rate stays, the weight falls to 1.5 / 4.
  DecayedRate later;
  r.AddDecayedTo(later, 900, 300);
  EXPECT_DOUBLE_EQ(later.Evidence()->rate, 350.0 / 1.5);
  EXPECT_DOUBLE_EQ(later.Evidence()->weight, 1.5 / 4);
}

// A sample read from another thread's clock, older than the sums, is decayed instead: the same
// sums whatever the order of arrival.
TEST(DecayedRateTest, OrderOfArrivalDoesNotMatter) {
  DecayedRate in_order, reversed;
  in_order.Observe(100, 1, 0, 300);
  in_order.Observe(300, 1, 300, 300);
  reversed.Observe(300, 1, 300, 300);
  reversed.Observe(100, 1, 0, 300);
  EXPECT_DOUBLE_EQ(in_order.Evidence()->rate, reversed.Evidence()->rate);
  EXPECT_DOUBLE_EQ(in_order.Evidence()->weight, reversed.Evidence()->weight);
}

TEST(DecayedRateTest, NoSampleNoRate) { EXPECT_FALSE(DecayedRate().Evidence().has_value()); }

// A duration too small to be a measurement gives no rate, never an infinite one.
TEST(DecayedRateTest, NoInfiniteRate) {
  DecayedRate r;
  r.Observe(536870912, 5e-324, 0, 300);
  EXPECT_FALSE(r.Evidence().has_value());
  r.Observe(536870912, 0.5, 0, 300);  // a real sample makes the sums a rate again
  ASSERT_TRUE(r.Evidence().has_value());
  EXPECT_DOUBLE_EQ(r.Evidence()->rate, 2 * 536870912 / 0.5);
}

class LiveRatesTest : public ::testing::Test {
 protected:
  RecordFacts Hit(double reload, std::optional<double> suffix) {
    RecordFacts f;
    f.model = "llama-3.1-8b";
    f.tier_value = 2;  // host
    f.prompt_tokens = 8192;
    f.logical_match_tokens = 4096;
    f.reload_seconds = reload;
    f.suffix_prefill_seconds = suffix;
    return f;
  }
  ProfileCatalog catalog_ = ProfileCatalog::Builtin();
  ModelRegistry registry_{catalog_, 1, UnknownModelPolicy::kGeneric};
  Aggregator aggregator_{registry_.slots().slot_count()};
  double now_ = 0;
  LiveRates rates_{registry_.slots().slot_count(), 300, [this] { return now_; }, /*refit_seconds=*/0};
  Ledger ledger_{registry_, aggregator_, &rates_};
  uint32_t slot_ = registry_.Resolve("llama-3.1-8b")->label->slot;
};

// llama-3.1-8b, N = 8192, 4096 reused: 4096 x 131072 = 536870912 bytes; the suffix prefill is
// 131943542816768 - 61573724897280 = 70369817919488 FLOPs (the figures Explain shows).
TEST_F(LiveRatesTest, RatesFromRecordsByHand) {
  ASSERT_TRUE(ledger_.Record(Hit(0.05, 0.4)).ok());
  now_ = 300;
  ASSERT_TRUE(ledger_.Record(Hit(0.1, 0.2)).ok());
  const auto bandwidth = rates_.ReloadBandwidth(slot_, Tier::kHost);
  ASSERT_TRUE(bandwidth.has_value());
  // (536870912 / 2 + 536870912) / (0.05 / 2 + 0.1)
  EXPECT_DOUBLE_EQ(bandwidth->rate, 805306368.0 / 0.125);
  EXPECT_DOUBLE_EQ(bandwidth->weight, 1.5);
  EXPECT_EQ(bandwidth->samples, 2u);
  EXPECT_FALSE(rates_.ComputeModel(slot_).has_value());  // two samples of one size: not ready
  EXPECT_FALSE(rates_.ReloadBandwidth(slot_, Tier::kDisk).has_value());

  const auto entries = rates_.Snapshot();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].tier, Tier::kHost);
  EXPECT_DOUBLE_EQ(entries[0].evidence.rate, bandwidth->rate);
}

// The totals the fleet's counters export never decay: two host hits 300 s apart sum whole (bytes,
// seconds, weight = samples), while the rate's weight is 1.5; a second thread's sample adds in.
TEST_F(LiveRatesTest, TotalsAreUndecayedSums) {
  ASSERT_TRUE(ledger_.Record(Hit(0.05, 0.4)).ok());
  now_ = 300;
  std::thread other([this] { ASSERT_TRUE(ledger_.Record(Hit(0.1, 0.2)).ok()); });
  other.join();
  EXPECT_DOUBLE_EQ(rates_.ReloadBandwidth(slot_, Tier::kHost)->weight, 1.5);
  now_ = 3000;
  const LiveRates::Sums totals = rates_.TotalsNow();
  ASSERT_EQ(totals.reload.size(), 1u);
  EXPECT_EQ(totals.reload[0].tier, Tier::kHost);
  const std::array<double, 4> want = {2 * 536870912.0, 0.05 + 0.1, 2, 2};  // kReloadParts
  for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(totals.reload[0].parts[i], want[i]) << kReloadParts[i];
  ASSERT_EQ(totals.compute.size(), 1u);
  // tflops: the suffix of 70369817919488 FLOPs twice; seconds 0.4 + 0.2; weight and samples 2.
  EXPECT_DOUBLE_EQ(totals.compute[0].parts[0], 2 * 70.369817919488);
  EXPECT_DOUBLE_EQ(totals.compute[0].parts[1], 0.4 + 0.2);
  EXPECT_DOUBLE_EQ(totals.compute[0].parts[kComputeFitSums], 2);
  EXPECT_DOUBLE_EQ(totals.compute[0].parts[kComputeFitSums + 1], 2);
}

// Misses of several sizes from an engine whose pass takes 12 ms + F / 3e14 FLOP/s make the model
// ready; the snapshot carries it first, as FLOP/s with its fixed cost.
TEST_F(LiveRatesTest, ComputeModelFromRecords) {
  for (int prompt : {512, 1024, 2048, 4096, 8192, 512, 1024, 2048}) {
    RecordFacts miss;
    miss.model = "llama-3.1-8b";
    miss.prompt_tokens = prompt;
    const double flops = Uint128ToDouble(Evaluate(miss, registry_)->prefill_baseline_flops);
    miss.suffix_prefill_seconds = 0.012 + flops / 3e14;
    ASSERT_TRUE(ledger_.Record(miss).ok());
  }
  const auto model = rates_.ComputeModel(slot_);
  ASSERT_TRUE(model.has_value());
  EXPECT_NEAR(model->FlopsPerSecond(), 3e14, 3e14 * 1e-9);
  EXPECT_NEAR(model->fixed_seconds, 0.012, 1e-10);
  const auto entries = rates_.Snapshot();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_FALSE(entries[0].tier.has_value());
  EXPECT_DOUBLE_EQ(entries[0].evidence.rate, model->FlopsPerSecond());
  EXPECT_DOUBLE_EQ(entries[0].fixed_seconds, model->fixed_seconds);
  EXPECT_EQ(entries[0].evidence.samples, 8u);
}

// An outlying pass moves the fit a bounded step: once the model is ready, a record whose suffix took
// 100 x the model's time (a preempted pass) is added as 2 x it. Beside the three honest passes of its
// size it lifts the curve there by at most half (unclamped, to about 25 x).
TEST_F(LiveRatesTest, OutlyingPassesAreHeldWithinTwiceTheModel) {
  auto miss = [&](int prompt, double factor) {
    RecordFacts f;
    f.model = "llama-3.1-8b";
    f.prompt_tokens = prompt;
    const double flops = Uint128ToDouble(Evaluate(f, registry_)->prefill_baseline_flops);
    f.suffix_prefill_seconds = (0.012 + flops / 3e14) * factor;
    return f;
  };
  for (int prompt : {512, 1024, 2048, 4096, 8192, 512, 1024, 2048, 4096, 8192, 512, 1024, 2048, 4096, 8192, 16384}) {
    ASSERT_TRUE(ledger_.Record(miss(prompt, 1)).ok());
  }
  const RecordFacts probe = miss(4096, 1);
  const double truth = *probe.suffix_prefill_seconds;
  const auto before = rates_.ComputeModel(slot_, /*current=*/true);
  ASSERT_TRUE(before && before->curve);
  EXPECT_NEAR(before->PassSeconds(Evaluate(probe, registry_)->FullPass()), truth, truth * 1e-3);
  ASSERT_TRUE(ledger_.Record(miss(4096, 100)).ok());
  const auto after = rates_.ComputeModel(slot_, /*current=*/true);
  const double estimate = after->PassSeconds(Evaluate(probe, registry_)->FullPass());
  EXPECT_GT(estimate, truth);        // the outlier counts ...
  EXPECT_LT(estimate, 1.5 * truth);  // ... as 2 x the model
}

// The fit is refitted at most once per refit period, so every surface reads the same one.
TEST_F(LiveRatesTest, RefitAtMostOncePerPeriod) {
  LiveRates rates(registry_.slots().slot_count(), 300, [this] { return now_; }, /*refit_seconds=*/1);
  Ledger ledger(registry_, aggregator_, &rates);
  EXPECT_FALSE(rates.ComputeModel(slot_).has_value());
  for (int i = 1; i <= 9; ++i) {  // 9: at now_ = 1 their weight has decayed below 9
    RecordFacts miss;
    miss.model = "llama-3.1-8b";
    miss.prompt_tokens = 512 * i;
    miss.suffix_prefill_seconds = 0.01 * i;
    ASSERT_TRUE(ledger.Record(miss).ok());
  }
  EXPECT_FALSE(rates.ComputeModel(slot_).has_value());  // the fit of now_ = 0 still stands
  now_ = 1;
  EXPECT_TRUE(rates.ComputeModel(slot_).has_value());
}

// A question (Advise) reads a fit that reflects every record observed before it, even within the
// refit period; the record path keeps the period's fit. Once: a replay followed at once by advise
// answered "unknown" for a second.
TEST_F(LiveRatesTest, AQuestionSeesEveryRecordBeforeIt) {
  LiveRates rates(registry_.slots().slot_count(), 300, [this] { return now_; }, /*refit_seconds=*/1);
  Ledger ledger(registry_, aggregator_, &rates);
  EXPECT_FALSE(rates.ComputeModel(slot_, /*current=*/true).has_value());
  for (int i = 1; i <= 9; ++i) {
    RecordFacts miss;
    miss.model = "llama-3.1-8b";
    miss.prompt_tokens = 512 * i;
    miss.suffix_prefill_seconds = 0.01 * i;
    ASSERT_TRUE(ledger.Record(miss).ok());
  }
  EXPECT_FALSE(rates.ComputeModel(slot_).has_value());  // the record path: the fit of before
  const auto current = rates.ComputeModel(slot_, /*current=*/true);
  ASSERT_TRUE(current.has_value());
  EXPECT_EQ(current->samples, 9u);
  EXPECT_EQ(rates.ComputeModel(slot_)->samples, 9u);  // one fit: the record path reads it too
  RecordFacts more;
  more.model = "llama-3.1-8b";
  more.prompt_tokens = 8192;
  more.suffix_prefill_seconds = 0.2;
  ASSERT_TRUE(ledger.Record(more).ok());
  EXPECT_EQ(rates.ComputeModel(slot_)->samples, 9u);
  EXPECT_EQ(rates.ComputeModel(slot_, /*current=*/true)->samples, 10u);
}

// The record path reads a fit through a per-thread copy: two instances on one thread never see each
// other's, and a refit made on another thread is what this thread reads next.
TEST_F(LiveRatesTest, EachThreadReadsTheCurrentFitOfItsOwnInstance) {
  LiveRates first(registry_.slots().slot_count(), 300, [this] { return now_; }, /*refit_seconds=*/1);
  LiveRates second(registry_.slots().slot_count(), 300, [this] { return now_; }, /*refit_seconds=*/1);
  auto feed = [&](LiveRates& rates, int records) {
    Ledger ledger(registry_, aggregator_, &rates);
    for (int i = 1; i <= records; ++i) {
      RecordFacts miss;
      miss.model = "llama-3.1-8b";
      miss.prompt_tokens = 512 * i;
      miss.suffix_prefill_seconds = 0.01 * i;
      ASSERT_TRUE(ledger.Record(miss).ok());
    }
  };
  feed(first, 9);
  feed(second, 12);
  ASSERT_TRUE(first.ComputeModel(slot_, /*current=*/true).has_value());
  ASSERT_TRUE(second.ComputeModel(slot_, /*current=*/true).has_value());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(first.ComputeModel(slot_)->samples, 9u);
    EXPECT_EQ(second.ComputeModel(slot_)->samples, 12u);
  }
  feed(first, 2);
  std::thread([&] { EXPECT_EQ(first.ComputeModel(slot_, /*current=*/true)->samples, 11u); }).join();
  EXPECT_EQ(first.ComputeModel(slot_)->samples, 11u);
  EXPECT_EQ(second.ComputeModel(slot_)->samples, 12u);
}

// Only measured, positive times feed a rate; a miss has no reload; a record folded into "other"
// feeds nothing (it would mix models).
TEST_F(LiveRatesTest, WhatFeedsTheRates) {
  ASSERT_TRUE(ledger_.Record(Hit(0, std::nullopt)).ok());  // reload 0 s, suffix not measured
  RecordFacts miss = Hit(0.05, std::nullopt);
  miss.tier_value = 0;
  miss.logical_match_tokens = 0;
  miss.reload_seconds.reset();
  ASSERT_TRUE(ledger_.Record(miss).ok());
  EXPECT_FALSE(rates_.ReloadBandwidth(slot_, Tier::kHost).has_value());
  EXPECT_EQ(rates_.Snapshot().size(), 0u);  // nothing fed the compute model either

  RecordFacts a = Hit(0.05, 0.4), b = Hit(0.05, 0.4);
  a.model = "finetune-a";  // takes the one slot for unknown names
  b.model = "finetune-b";  // folded into "other"
  ASSERT_TRUE(ledger_.Record(a).ok());
  ASSERT_TRUE(ledger_.Record(b).ok());
  EXPECT_EQ(rates_.Snapshot().size(), 1u);  // finetune-a's host bandwidth only (one compute sample)
  EXPECT_FALSE(rates_.ReloadBandwidth(registry_.slots().other_slot(), Tier::kHost).has_value());
}

// A reload from a mixed or unknown source feeds no tier's bandwidth (it would blend tiers), while
// its suffix prefill still feeds the compute model.
TEST_F(LiveRatesTest, MixedAndUnknownTiersFeedNoBandwidth) {
  for (int i = 0; i < 8; ++i) {
    RecordFacts f = Hit(0.05, 0.5 - 0.05 * i);
    f.tier_value = 5 + i % 2;
    f.logical_match_tokens = 1024 * i;
    ASSERT_TRUE(ledger_.Record(f).ok());
  }
  for (int t = 0; t < kTierCount; ++t) EXPECT_FALSE(rates_.ReloadBandwidth(slot_, static_cast<Tier>(t)).has_value());
  ASSERT_TRUE(rates_.ComputeModel(slot_).has_value());
  EXPECT_EQ(rates_.ComputeModel(slot_)->samples, 8u);
}

// An aggregate transfer observation is one bandwidth sample, decayed like a record's reload:
// 1 GB in 0.1 s now and 2 GB in 0.1 s one half-life later give (0.5 + 2) GB / (0.05 + 0.1) s.
TEST_F(LiveRatesTest, TransfersFeedTheBandwidthByHand) {
  rates_.ObserveTransfer(slot_, Tier::kHost, 1e9, 0.1);
  now_ = 300;
  rates_.ObserveTransfer(slot_, Tier::kHost, 2e9, 0.1);
  rates_.ObserveTransfer(slot_, Tier::kMixed, 1e9, 0.1);     // not a source tier: ignored
  rates_.ObserveTransfer(slot_, Tier::kRemote, 1e9, 0);      // no time: ignored
  const auto host = rates_.ReloadBandwidth(slot_, Tier::kHost);
  ASSERT_TRUE(host.has_value());
  EXPECT_DOUBLE_EQ(host->rate, 2.5e9 / 0.15);
  EXPECT_EQ(host->samples, 2u);
  EXPECT_FALSE(rates_.ReloadBandwidth(slot_, Tier::kRemote).has_value());
  EXPECT_EQ(rates_.Snapshot().size(), 1u);  // transfers never touch the compute model
}

// Two writer threads land in different shards; the merged rate counts every sample.
TEST_F(LiveRatesTest, ShardsMerge) {
  auto feed = [&] {
    for (int i = 0; i < 500; ++i) ASSERT_TRUE(ledger_.Record(Hit(0.05, 0.4)).ok());
  };
  std::thread one(feed), two(feed);
  one.join();
  two.join();
  const auto bandwidth = rates_.ReloadBandwidth(slot_, Tier::kHost);
  EXPECT_EQ(bandwidth->samples, 1000u);
  EXPECT_DOUBLE_EQ(bandwidth->weight, 1000);
  // 1,000 floating-point additions: equal to 12 significant digits.
  EXPECT_NEAR(bandwidth->rate, 536870912.0 / 0.05, 536870912.0 / 0.05 * 1e-12);
}

}  // namespace
}  // namespace kvledger
