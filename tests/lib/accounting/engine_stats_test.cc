// Engine statistics: every rule's message, exact totals, what reaches the live rates, and that a
// rejected entry changes nothing but its reason's count.
#include "lib/accounting/engine_stats.h"

#include <cmath>
#include <thread>

#include "gtest/gtest.h"
#include "lib/profiles/profile_catalog.h"

namespace kvledger {
namespace {

class EngineStatsTest : public ::testing::Test {
 protected:
  static TransferFacts Transfer(uint64_t bytes, double seconds, int tier = 2) {
    return TransferFacts{"llama-3.1-8b", tier, bytes, seconds, 0};
  }
  void ExpectRejected(const EngineStatsVerdict& r, EngineStatsRejectReason reason, const std::string& message) {
    ASSERT_FALSE(r.ok()) << message;
    EXPECT_EQ(r.rejection().reason, reason);
    EXPECT_EQ(r.rejection().message, message);
  }
  ProfileCatalog catalog_ = ProfileCatalog::Builtin();
  ModelRegistry registry_{catalog_, 1, UnknownModelPolicy::kReject};
  double now_ = 0;
  LiveRates rates_{registry_.slots().slot_count(), 300, [this] { return now_; }};
  EngineStats stats_{registry_, &rates_};
  uint32_t slot_ = registry_.Resolve("llama-3.1-8b")->label->slot;
};

// Proves: transfers sum exactly per (model, tier) (seconds in nanounits), count operations, and
// feed the live bandwidth; unrecorded requests sum per (model, reason).
TEST_F(EngineStatsTest, TotalsAreExactSums) {
  EXPECT_TRUE(stats_.AddTransfer(Transfer(1'000'000'000, 0.1), "transfers[0].").ok());
  TransferFacts two = Transfer(3'000'000'000, 0.2);
  two.transfers = 7;
  EXPECT_TRUE(stats_.AddTransfer(two, "transfers[1].").ok());
  EXPECT_TRUE(stats_.AddTransfer(Transfer(5, 0.000000001, 4), "transfers[2].").ok());
  EXPECT_TRUE(stats_.AddUnrecorded({"llama-3.1-8b", 1, 3, 0}, "unrecorded[0].").ok());
  EXPECT_TRUE(stats_.AddUnrecorded({"llama-3.1-8b", 2, 2, 8192}, "unrecorded[1].").ok());
  EXPECT_TRUE(stats_.AddUnrecorded({"llama-3.1-8b", 2, 1, 4096}, "unrecorded[2].").ok());

  const EngineStats::Snapshot s = stats_.Totals();
  const auto& host = s.transfers.at({slot_, Tier::kHost});
  EXPECT_EQ(host.bytes, Uint128{4'000'000'000});
  EXPECT_EQ(host.seconds_nanounits, Uint128{300'000'000});
  EXPECT_EQ(host.transfers, Uint128{8});  // 1 (unset) + 7
  EXPECT_EQ(s.transfers.at({slot_, Tier::kRemote}).seconds_nanounits, Uint128{1});
  EXPECT_EQ(s.unrecorded.at({slot_, UnrecordedReason::kAborted}).requests, Uint128{3});
  EXPECT_EQ(s.unrecorded.at({slot_, UnrecordedReason::kFailed}).requests, Uint128{3});
  EXPECT_EQ(s.unrecorded.at({slot_, UnrecordedReason::kFailed}).logical_match_tokens, Uint128{12288});
  for (uint64_t n : s.rejected) EXPECT_EQ(n, 0u);

  const auto bandwidth = rates_.ReloadBandwidth(slot_, Tier::kHost);
  ASSERT_TRUE(bandwidth.has_value());
  EXPECT_DOUBLE_EQ(bandwidth->rate, 4e9 / 0.3);
  EXPECT_EQ(bandwidth->samples, 2u);
}

// Proves: the sums never go backwards: 2^24 entries of the largest accepted count (2^40 each) sum
// to 2^64 exactly, past where a 64-bit counter wrapped (once 1.392e19 fell to 1.130e17).
TEST_F(EngineStatsTest, CountersNeverWrap) {
  TransferFacts most = Transfer(1, 0.1);
  most.transfers = kMaxUnrecordedRequests;
  for (int i = 0; i < (1 << 24); ++i) {
    ASSERT_TRUE(stats_.AddTransfer(most, "transfers[0].").ok());
    ASSERT_TRUE(stats_.AddUnrecorded({"llama-3.1-8b", 1, kMaxUnrecordedRequests, 0}, "unrecorded[0].").ok());
  }
  const EngineStats::Snapshot s = stats_.Totals();
  EXPECT_EQ(s.transfers.at({slot_, Tier::kHost}).transfers, Uint128{1} << 64);
  EXPECT_EQ(s.unrecorded.at({slot_, UnrecordedReason::kAborted}).requests, Uint128{1} << 64);
}

// Proves: each rule rejects with the entry, the field, the value and the rule; nothing else moves.
TEST_F(EngineStatsTest, EveryRuleNamesTheEntryFieldValueAndRule) {
  ExpectRejected(stats_.AddTransfer(Transfer(1, 0.1, 5), "transfers[0]."), EngineStatsRejectReason::kInvalidTier,
                 "transfers[0].tier = 5: must be the tier the data came from: device, host, disk or remote (1-4)");
  ExpectRejected(stats_.AddTransfer(Transfer(1, 0.1, 0), "transfers[1]."), EngineStatsRejectReason::kInvalidTier,
                 "transfers[1].tier = 0: must be the tier the data came from: device, host, disk or remote (1-4)");
  ExpectRejected(stats_.AddTransfer(Transfer((uint64_t{1} << 53) + 1, 0.1), "transfers[2]."),
                 EngineStatsRejectReason::kInvalidBytes,
                 "transfers[2].bytes = 9007199254740993: must be <= 2^53 (9007199254740992)");
  ExpectRejected(stats_.AddTransfer(Transfer(1, 0), "transfers[3]."), EngineStatsRejectReason::kInvalidSeconds,
                 "transfers[3].seconds = 0: must be finite, > 0 and <= 86400 seconds");
  ExpectRejected(stats_.AddTransfer(Transfer(1, std::nan("")), "transfers[4]."),
                 EngineStatsRejectReason::kInvalidSeconds,
                 "transfers[4].seconds = nan: must be finite, > 0 and <= 86400 seconds");
  TransferFacts unknown = Transfer(1, 0.1);
  unknown.model = "gpt-5";
  const auto rejected = stats_.AddTransfer(unknown, "transfers[5].");
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.rejection().reason, EngineStatsRejectReason::kUnknownModel);
  EXPECT_EQ(rejected.rejection().message.rfind("transfers[5].model = \"gpt-5\"", 0), 0u) << rejected.rejection().message;
  TransferFacts bad_name = Transfer(1, 0.1);
  bad_name.model = "two words";
  ExpectRejected(stats_.AddTransfer(bad_name, "transfers[6]."), EngineStatsRejectReason::kInvalidModel,
                 "transfers[6].model = \"two words\": must be 1-128 printable ASCII characters without spaces");
  ExpectRejected(stats_.AddUnrecorded({"llama-3.1-8b", 0, 1, 0}, "unrecorded[0]."),
                 EngineStatsRejectReason::kInvalidReason,
                 "unrecorded[0].reason = 0: must be UNRECORDED_REASON_ABORTED (1) or UNRECORDED_REASON_FAILED (2)");
  ExpectRejected(stats_.AddUnrecorded({"llama-3.1-8b", 1, 0, 0}, "unrecorded[1]."),
                 EngineStatsRejectReason::kInvalidRequests, "unrecorded[1].requests = 0: must be in [1, 2^40]");
  ExpectRejected(stats_.AddUnrecorded({"llama-3.1-8b", 2, 1, (uint64_t{1} << 31) + 1}, "unrecorded[2]."),
                 EngineStatsRejectReason::kInvalidLogicalMatchTokens,
                 "unrecorded[2].logical_match_tokens = 2147483649: must be <= requests * 2^31 = 2147483648");

  const EngineStats::Snapshot s = stats_.Totals();
  EXPECT_TRUE(s.transfers.empty());
  EXPECT_TRUE(s.unrecorded.empty());
  EXPECT_EQ(s.rejected[static_cast<size_t>(EngineStatsRejectReason::kInvalidTier)], 2u);
  EXPECT_EQ(s.rejected[static_cast<size_t>(EngineStatsRejectReason::kInvalidSeconds)], 2u);
  EXPECT_EQ(s.rejected[static_cast<size_t>(EngineStatsRejectReason::kUnknownModel)], 1u);
  EXPECT_TRUE(rates_.Snapshot().empty());
}

// Proves: concurrent writers (two engines' loggers) lose nothing (run under ThreadSanitizer too).
TEST_F(EngineStatsTest, ConcurrentWritersSumExactly) {
  auto feed = [&] {
    for (int i = 0; i < 1000; ++i) {
      ASSERT_TRUE(stats_.AddTransfer(Transfer(1000, 0.001), "").ok());
      ASSERT_TRUE(stats_.AddUnrecorded({"llama-3.1-8b", 1, 1, 0}, "").ok());
    }
  };
  std::thread one(feed), two(feed);
  one.join();
  two.join();
  const EngineStats::Snapshot s = stats_.Totals();
  EXPECT_EQ(s.transfers.at({slot_, Tier::kHost}).bytes, Uint128{2'000'000});
  EXPECT_EQ(s.transfers.at({slot_, Tier::kHost}).seconds_nanounits, Uint128{2'000'000'000});
  EXPECT_EQ(s.unrecorded.at({slot_, UnrecordedReason::kAborted}).requests, 2000u);
  EXPECT_EQ(rates_.ReloadBandwidth(slot_, Tier::kHost)->samples, 2000u);
}

// Proves: the reason labels are the exported ones.
TEST_F(EngineStatsTest, Labels) {
  EXPECT_STREQ(UnrecordedReasonLabel(UnrecordedReason::kAborted), "aborted");
  EXPECT_STREQ(UnrecordedReasonLabel(UnrecordedReason::kFailed), "failed");
  EXPECT_STREQ(EngineStatsRejectReasonLabel(EngineStatsRejectReason::kInvalidLogicalMatchTokens),
               "invalid_logical_match_tokens");
}

}  // namespace
}  // namespace kvledger
