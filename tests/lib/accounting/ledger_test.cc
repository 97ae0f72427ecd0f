#include "lib/accounting/ledger.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/profiles/profile_catalog.h"
#include "tests/testing/status_matchers.h"

namespace kvledger {
namespace {

using ::kvledger::testing::IsOk;
using ::kvledger::testing::StatusIs;
using ::testing::HasSubstr;

RecordFacts Hit(const char* model) {
  RecordFacts f;
  f.model = model;
  f.tier_value = 1;
  f.prompt_tokens = 1000;
  f.logical_match_tokens = 500;
  return f;
}

class LedgerTest : public ::testing::Test {
 protected:
  const ProfileCatalog catalog_ = ProfileCatalog::Builtin();
};

// A rejected record is counted by reason and not at all in the totals; a good one exactly once.
TEST_F(LedgerTest, RejectionsAreCountedByReasonOnly) {
  ModelRegistry registry(catalog_, 4, UnknownModelPolicy::kReject);
  Aggregator aggregator(5);
  Ledger ledger(registry, aggregator);
  EXPECT_THAT(ledger.Record(Hit("llama-3.1-8b")), IsOk());
  RecordFacts bad = Hit("llama-3.1-8b");
  bad.logical_match_tokens = 2000;
  EXPECT_THAT(ledger.Record(bad), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("logical_match_tokens = 2000")));
  EXPECT_THAT(ledger.Record(Hit("no-such-model")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("known profiles:")));
  const AggregateSnapshot s = aggregator.Snapshot();
  ASSERT_EQ(s.cells.size(), 1u);
  EXPECT_EQ(s.cells[0].totals.requests, 1u);
  EXPECT_EQ(s.rejected[static_cast<int>(RejectReason::kInvalidLogicalMatchTokens)], 1u);
  EXPECT_EQ(s.rejected[static_cast<int>(RejectReason::kUnknownModel)], 1u);
  EXPECT_TRUE(registry.Labels().size() == 1);  // the unknown model claimed no label
}

// Past max_models, records land in the "other" slot and the folding is counted.
TEST_F(LedgerTest, FoldedRecordsAreCounted) {
  ModelRegistry registry(catalog_, 1, UnknownModelPolicy::kReject);
  Aggregator aggregator(2);
  Ledger ledger(registry, aggregator);
  ASSERT_THAT(ledger.Record(Hit("qwen3-8b")), IsOk());
  ASSERT_THAT(ledger.Record(Hit("qwen3-32b")), IsOk());
  ASSERT_THAT(ledger.Record(Hit("deepseek-v3")), IsOk());
  const AggregateSnapshot s = aggregator.Snapshot();
  EXPECT_EQ(s.folded_records, 2u);
  ASSERT_EQ(s.cells.size(), 2u);
  EXPECT_EQ(s.cells[1].model_slot, registry.other_slot());
  EXPECT_EQ(s.cells[1].totals.requests, 2u);
}

// Evaluate explains without recording or claiming a slot.
TEST_F(LedgerTest, EvaluateRecordsNothing) {
  ModelRegistry registry(catalog_, 4, UnknownModelPolicy::kReject);
  auto figures = Evaluate(Hit("qwen3-8b"), registry);
  ASSERT_TRUE(figures.ok());
  EXPECT_EQ(figures->reused_tokens, 496u);
  EXPECT_TRUE(registry.Labels().empty());
}

}  // namespace
}  // namespace kvledger
