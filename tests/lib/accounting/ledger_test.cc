#include "lib/accounting/ledger.h"

#include <cmath>
#include <limits>
#include <random>

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
  Aggregator aggregator(registry.slots().slot_count());
  Ledger ledger(registry, aggregator);
  EXPECT_THAT(ToStatus(ledger.Record(Hit("llama-3.1-8b"))), IsOk());
  RecordFacts bad = Hit("llama-3.1-8b");
  bad.logical_match_tokens = 2000;
  EXPECT_THAT(ToStatus(ledger.Record(bad)), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("logical_match_tokens = 2000")));
  EXPECT_THAT(ToStatus(ledger.Record(Hit("no-such-model"))),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("known profiles:")));
  const AggregateSnapshot s = aggregator.Snapshot();
  ASSERT_EQ(s.cells.size(), 1u);
  EXPECT_EQ(s.cells[0].totals.requests(), 1u);
  EXPECT_EQ(s.rejected[static_cast<int>(RejectReason::kInvalidLogicalMatchTokens)], 1u);
  EXPECT_EQ(s.rejected[static_cast<int>(RejectReason::kUnknownModel)], 1u);
  RecordFacts bad_boundary = Hit("kimi-linear-48b-a3b");
  bad_boundary.state_boundaries = {{"nope", 1}};
  EXPECT_THAT(ToStatus(ledger.Record(bad_boundary)), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("state_group")));
  // Only the catalog's profiles hold labels: rejected records never claim a slot.
  EXPECT_EQ(registry.slots().LabelsBySlot().size(), registry.slots().known_slots());
}

// A ledger that never claims (the server's one for synthetic records) counts an unknown name under
// "other" and leaves the registry's slots to real traffic; catalog names keep their own slots.
TEST_F(LedgerTest, ANeverClaimingLedgerTakesNoSlot) {
  ModelRegistry registry(catalog_, 4, UnknownModelPolicy::kGeneric);
  Aggregator aggregator(registry.slots().slot_count());
  Ledger ledger(registry, aggregator, nullptr, LabelClaims::kNever);
  EXPECT_THAT(ToStatus(ledger.Record(Hit("a-model-never-seen"))), IsOk());
  EXPECT_THAT(ToStatus(ledger.Record(Hit("llama-3.1-8b"))), IsOk());
  EXPECT_EQ(registry.slots().LabelsBySlot().size(), registry.slots().known_slots());
  uint64_t other = 0, total = 0;
  for (const auto& cell : aggregator.Snapshot().cells) {
    total += cell.totals.requests();
    if (cell.model_slot == registry.slots().other_slot()) other += cell.totals.requests();
  }
  EXPECT_EQ(total, 2u);
  EXPECT_EQ(other, 1u);
}

// Past max_models unknown names, records land in the "other" slot and the folding is counted;
// known profiles keep their own labels whatever came first.
TEST_F(LedgerTest, FoldedRecordsAreCounted) {
  ModelRegistry registry(catalog_, 1, UnknownModelPolicy::kGeneric);
  Aggregator aggregator(registry.slots().slot_count());
  Ledger ledger(registry, aggregator);
  ASSERT_THAT(ToStatus(ledger.Record(Hit("junk-1"))), IsOk());
  ASSERT_THAT(ToStatus(ledger.Record(Hit("junk-2"))), IsOk());
  ASSERT_THAT(ToStatus(ledger.Record(Hit("junk-3"))), IsOk());
  ASSERT_THAT(ToStatus(ledger.Record(Hit("qwen3-8b"))), IsOk());
  const AggregateSnapshot s = aggregator.Snapshot();
  EXPECT_EQ(s.folded_records, 2u);
  ASSERT_EQ(s.cells.size(), 3u);  // qwen3-8b (a catalog slot), junk-1, other
  EXPECT_EQ(registry.slots().LabelsBySlot()[s.cells[0].model_slot].model, "qwen3-8b");
  EXPECT_EQ(registry.slots().LabelsBySlot()[s.cells[1].model_slot].model, "junk-1");
  EXPECT_EQ(s.cells[2].model_slot, registry.slots().other_slot());
  EXPECT_EQ(s.cells[2].totals.requests(), 2u);
}

// Evaluate explains without recording or claiming a slot.
TEST_F(LedgerTest, EvaluateRecordsNothing) {
  ModelRegistry registry(catalog_, 4, UnknownModelPolicy::kGeneric);
  auto figures = Evaluate(Hit("qwen3-8b"), registry);
  ASSERT_TRUE(figures.ok());
  EXPECT_EQ(figures->reused_tokens, 496u);
  ASSERT_TRUE(Evaluate(Hit("my-model"), registry).ok());
  EXPECT_EQ(registry.slots().LabelsBySlot().size(), registry.slots().known_slots());  // no unknown name claimed a slot
}

// Hostile input never crashes and is never lost: 20,000 records drawn from edge values are each
// either counted once or rejected with a specific reason, and the totals say exactly that.
TEST_F(LedgerTest, HostileRecordsAreCountedOrRejectedNeverLost) {
  ModelRegistry registry(catalog_, 4, UnknownModelPolicy::kReject);
  Aggregator aggregator(registry.slots().slot_count());
  Ledger ledger(registry, aggregator);
  const int64_t ints[] = {std::numeric_limits<int64_t>::min(), -1, 0, 1, 15, 16, 17, 255, 256, 1000, 4096,
                          int64_t{1} << 31, (int64_t{1} << 31) + 1, std::numeric_limits<int64_t>::max()};
  const double doubles[] = {-1.0, 0.0, 1e-12, 0.25, 86400.0, 86400.5, std::nan(""),
                            std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
  const std::string models[] = {"llama-3.1-8b", "kimi-linear-48b-a3b", "gemma-2-9b", "", "bad model",
                                "nope", std::string(200, 'm'), std::string("a\0b", 3)};
  const std::string groups[] = {"kda", "mla", "local", "zzz"};
  std::mt19937_64 rng(42);
  auto pick_int = [&] { return ints[rng() % std::size(ints)]; };
  auto pick_double = [&] { return doubles[rng() % std::size(doubles)]; };
  uint64_t ok = 0, failed = 0;
  std::array<uint64_t, kRejectReasonCount> per_reason{};
  for (int i = 0; i < 20000; ++i) {
    RecordFacts f;
    const std::string& model = models[rng() % std::size(models)];
    f.model = model;
    f.tier_value = static_cast<int>(rng() % 7) - 1;
    f.prompt_tokens = pick_int();
    f.logical_match_tokens = rng() % 2 ? pick_int() : f.prompt_tokens / 2;
    if (rng() % 2) f.recoverable_tokens = rng() % 2 ? pick_int() : f.logical_match_tokens;
    if (rng() % 2) f.recompute_tokens = rng() % 2 ? pick_int() : 0;
    f.reload_seconds = pick_double();
    f.suffix_prefill_seconds = pick_double();
    f.ttft_seconds = pick_double();
    for (uint64_t b = rng() % 3; b > 0; --b) f.state_boundaries.push_back({groups[rng() % 4], pick_int()});
    const Verdict verdict = ledger.Record(f);
    if (verdict.ok()) {
      ++ok;
    } else {
      ++failed;
      ASSERT_FALSE(verdict.rejection().message.empty());
      per_reason[static_cast<int>(verdict.rejection().reason)]++;
    }
  }
  const AggregateSnapshot s = aggregator.Snapshot();
  uint64_t counted = 0, rejected = 0;
  for (const auto& cell : s.cells) counted += cell.totals.requests();
  for (uint64_t r : s.rejected) rejected += r;
  EXPECT_EQ(counted, ok);
  EXPECT_EQ(rejected, failed);
  EXPECT_GT(ok, 20u);  // the generator does produce valid records too (37 with this seed)
  for (RejectReason reason : kAllRejectReasons) {  // counted under the reason each verdict named
    EXPECT_EQ(s.rejected[static_cast<int>(reason)], per_reason[static_cast<int>(reason)]) << RejectReasonLabel(reason);
  }
}

}  // namespace
}  // namespace kvledger
