#include "lib/accounting/validation.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/accounting/rejection.h"
#include "lib/profiles/profile_catalog.h"
#include "tests/testing/status_matchers.h"

namespace kvledger {
namespace {

using ::kvledger::testing::IsOk;
using ::kvledger::testing::StatusIs;
using ::testing::HasSubstr;

RecordFacts Valid() {
  RecordFacts f;
  f.model = "llama-3.1-8b";
  f.tier_value = 2;
  f.prompt_tokens = 1000;
  f.logical_match_tokens = 600;
  f.recoverable_tokens = 592;
  f.recompute_tokens = 8;
  f.reload_seconds = 0.02;
  f.suffix_prefill_seconds = 0.1;
  f.ttft_seconds = 0.15;
  return f;
}

// Expects rejection with exactly this message and reason.
void ExpectRejected(const Verdict& verdict, const std::string& message, RejectReason reason) {
  ASSERT_FALSE(verdict.ok()) << message;
  EXPECT_EQ(verdict.rejection().message, message);
  EXPECT_EQ(verdict.rejection().reason, reason) << RejectReasonLabel(verdict.rejection().reason);
}

TEST(ValidationTest, ValidRecordPasses) { EXPECT_THAT(ToStatus(ValidateFields(Valid())), IsOk()); }

// Each rule names the field, its value and the rule, with its own reason.
TEST(ValidationTest, EveryRuleNamesFieldValueAndRule) {
  RecordFacts f = Valid();
  f.prompt_tokens = 0;
  ExpectRejected(ValidateFields(f), "prompt_tokens = 0: must be in [1, 2147483648]",
                 RejectReason::kInvalidPromptTokens);
  f = Valid();
  f.prompt_tokens = (int64_t{1} << 31) + 1;
  ExpectRejected(ValidateFields(f), "prompt_tokens = 2147483649: must be in [1, 2147483648]",
                 RejectReason::kInvalidPromptTokens);
  f = Valid();
  f.logical_match_tokens = 1200;
  ExpectRejected(ValidateFields(f), "logical_match_tokens = 1200: must be in [0, prompt_tokens = 1000]",
                 RejectReason::kInvalidLogicalMatchTokens);
  f = Valid();
  f.logical_match_tokens = -1;
  ExpectRejected(ValidateFields(f), "logical_match_tokens = -1: must be in [0, prompt_tokens = 1000]",
                 RejectReason::kInvalidLogicalMatchTokens);
  f = Valid();
  f.recoverable_tokens = 601;
  ExpectRejected(ValidateFields(f), "recoverable_tokens = 601: must be in [0, logical_match_tokens = 600]",
                 RejectReason::kInvalidRecoverableTokens);
  f = Valid();
  f.recompute_tokens = 7;  // reused 593 would exceed recoverable 592
  ExpectRejected(ValidateFields(f),
                 "recompute_tokens = 7: must be in [logical_match_tokens - recoverable_tokens = 8, "
                 "logical_match_tokens = 600] (reused = logical_match - recompute may not exceed the "
                 "recoverable boundary)",
                 RejectReason::kInvalidRecomputeTokens);
  f = Valid();
  f.recoverable_tokens.reset();
  f.recompute_tokens = 601;
  ExpectRejected(ValidateFields(f),
                 "recompute_tokens = 601: must be in [0, logical_match_tokens = 600] (reused = "
                 "logical_match - recompute may not exceed the recoverable boundary)",
                 RejectReason::kInvalidRecomputeTokens);
  f = Valid();
  f.reload_seconds = std::nan("");
  ExpectRejected(ValidateFields(f), "reload_seconds = nan: must be finite, >= 0 and <= 86400 seconds",
                 RejectReason::kInvalidReloadSeconds);
  f = Valid();
  f.suffix_prefill_seconds = -0.5;
  ExpectRejected(ValidateFields(f), "suffix_prefill_seconds = -0.5: must be finite, >= 0 and <= 86400 seconds",
                 RejectReason::kInvalidSuffixPrefillSeconds);
  f = Valid();
  f.suffix_prefill_seconds = 86400.0001;  // printed as given, not as "86400"
  ExpectRejected(ValidateFields(f), "suffix_prefill_seconds = 86400.0001: must be finite, >= 0 and <= 86400 seconds",
                 RejectReason::kInvalidSuffixPrefillSeconds);
  f.suffix_prefill_seconds = 0.1;
  f.ttft_seconds = std::numeric_limits<double>::infinity();
  ExpectRejected(ValidateFields(f), "ttft_seconds = inf: must be finite, >= 0 and <= 86400 seconds",
                 RejectReason::kInvalidTtftSeconds);
  f = Valid();
  f.tier_value = 9;
  ExpectRejected(ValidateFields(f),
                 "tier = 9: must be one of TIER_DEVICE (1), TIER_HOST (2), TIER_DISK (3), TIER_REMOTE (4), "
                 "TIER_MIXED (5), TIER_UNKNOWN (6), or TIER_UNSPECIFIED (0) for a miss",
                 RejectReason::kInvalidTier);
  f = Valid();
  f.tier_value = 7;  // one past TIER_UNKNOWN
  EXPECT_EQ(ValidateFields(f).rejection().reason, RejectReason::kInvalidTier);
  for (int mixed_or_unknown : {5, 6}) {  // a hit that names no single tier is valid
    f.tier_value = mixed_or_unknown;
    EXPECT_TRUE(ValidateFields(f).ok()) << mixed_or_unknown;
  }
  f = Valid();
  f.tier_value = 0;
  ExpectRejected(ValidateFields(f),
                 "tier = TIER_UNSPECIFIED: must be set when logical_match_tokens > 0 (logical_match_tokens = 600)",
                 RejectReason::kInvalidTier);
  f = Valid();
  f.model = "";
  ExpectRejected(ValidateFields(f), "model = \"\": must be 1-128 printable ASCII characters without spaces",
                 RejectReason::kInvalidModel);
  f = Valid();
  f.model = "llama\n8b";
  ExpectRejected(ValidateFields(f),
                 "model = \"llama\\n8b\": must be 1-128 printable ASCII characters without spaces",
                 RejectReason::kInvalidModel);
  // Every byte, alone and inside a name of 40 (long enough for the vectorized loop): a name is
  // printable ASCII without spaces exactly when each byte is in '!'..'~'.
  for (int byte = 0; byte < 256; ++byte) {
    const char c = static_cast<char>(byte);
    const bool printable = byte >= 0x21 && byte <= 0x7e;
    for (const std::string& name : {std::string(1, c), std::string(20, 'a') + c + std::string(19, 'b')}) {
      f = Valid();
      f.model = name;
      EXPECT_EQ(ValidateFields(f).ok(), printable) << "byte " << byte << ", length " << name.size();
    }
  }
  const std::string long_id(300, 'x');
  f = Valid();
  f.request_id = long_id;
  EXPECT_THAT(ToStatus(ValidateFields(f)), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("(300 bytes): must be at most 256 bytes")));
}

// A miss may leave the tier unspecified.
TEST(ValidationTest, MissNeedsNoTier) {
  RecordFacts f = Valid();
  f.tier_value = 0;
  f.logical_match_tokens = 0;
  f.recoverable_tokens.reset();
  f.recompute_tokens.reset();
  EXPECT_THAT(ToStatus(ValidateFields(f)), IsOk());
}

TEST(ValidationTest, StateBoundariesAgainstProfile) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const Profile& kimi = *catalog.Find("kimi-linear-48b-a3b");
  RecordFacts f = Valid();
  f.model = "kimi-linear-48b-a3b";
  f.recoverable_tokens = 512;
  f.recompute_tokens = 100;
  f.state_boundaries = {{"kda", 512}, {"mla", 592}};
  EXPECT_THAT(ToStatus(ValidateAgainstProfile(f, kimi)), IsOk());

  f.state_boundaries = {{"attention", 512}};
  ExpectRejected(ValidateAgainstProfile(f, kimi),
                 "state_boundaries[0].state_group = \"attention\": must name a layer group of profile "
                 "'kimi-linear-48b-a3b' (kda_dense, kda, mla)",
                 RejectReason::kInvalidStateBoundaries);
  f.state_boundaries = {{"kda", 512}, {"kda", 512}};
  ExpectRejected(ValidateAgainstProfile(f, kimi), "state_boundaries[1].state_group = \"kda\": must appear only once",
                 RejectReason::kInvalidStateBoundaries);
  f.state_boundaries = {{"kda", 700}};
  ExpectRejected(ValidateAgainstProfile(f, kimi),
                 "state_boundaries[0].boundary_tokens = 700: must be in [0, logical_match_tokens = 600]",
                 RejectReason::kInvalidStateBoundaries);
  f.state_boundaries = {{"kda", 256}, {"mla", 592}};
  ExpectRejected(ValidateAgainstProfile(f, kimi),
                 "state_boundaries: minimum boundary_tokens = 256: must equal recoverable_tokens = 512 (the "
                 "recoverable boundary is the minimum over state groups)",
                 RejectReason::kInvalidStateBoundaries);
  f.recoverable_tokens.reset();
  f.recompute_tokens = 300;  // boundaries imply at least 600 - 256 = 344
  ExpectRejected(ValidateAgainstProfile(f, kimi),
                 "recompute_tokens = 300: must be >= logical_match_tokens - min(state_boundaries) = 344",
                 RejectReason::kInvalidRecomputeTokens);
}

// The whole-request fields (docs/cost-model.md §12): every rule, each message naming field, value and rule.
TEST(ValidationTest, WholeRequestFields) {
  RecordFacts f = Valid();
  f.queue_seconds = 0.05;
  f.output_tokens = 64;
  f.decode_seconds = 1.5;
  EXPECT_THAT(ToStatus(ValidateFields(f)), IsOk());
  f.queue_seconds = -1;
  ExpectRejected(ValidateFields(f), "queue_seconds = -1: must be finite, >= 0 and <= 86400 seconds",
                 RejectReason::kInvalidQueueSeconds);
  f.queue_seconds = 0.2;  // TTFT is 0.15
  ExpectRejected(ValidateFields(f),
                 "queue_seconds = 0.2: must be <= ttft_seconds = 0.15 (the wait ends before the first token)",
                 RejectReason::kInvalidQueueSeconds);
  f.queue_seconds = 0.15;
  EXPECT_THAT(ToStatus(ValidateFields(f)), IsOk());
  f.output_tokens = 0;
  ExpectRejected(ValidateFields(f), "output_tokens = 0: must be in [1, 2147483648]", RejectReason::kInvalidOutputTokens);
  f.output_tokens = 64;
  f.decode_seconds = std::numeric_limits<double>::infinity();
  ExpectRejected(ValidateFields(f), "decode_seconds = inf: must be finite, >= 0 and <= 86400 seconds",
                 RejectReason::kInvalidDecodeSeconds);
  f.decode_seconds = 1.5;
  f.output_tokens.reset();
  ExpectRejected(ValidateFields(f),
                 "decode_seconds = 1.5: needs output_tokens (the time per output token is decode_seconds / "
                 "(output_tokens - 1))",
                 RejectReason::kInvalidDecodeSeconds);
  f.output_tokens = 1;
  ExpectRejected(ValidateFields(f),
                 "decode_seconds = 1.5: must be 0 when output_tokens = 1 (one token has no time between the first "
                 "and the last)",
                 RejectReason::kInvalidDecodeSeconds);
  f.decode_seconds = 0;
  EXPECT_THAT(ToStatus(ValidateFields(f)), IsOk());
  f.decode_seconds.reset();  // output tokens alone are fine
  EXPECT_THAT(ToStatus(ValidateFields(f)), IsOk());
}

}  // namespace
}  // namespace kvledger

namespace kvledger {
namespace {

// Proves: every rejection carries the field its message begins with, as data, so a surface that
// names fields otherwise renders the message without rewriting its text.
TEST(ValidationTest, RejectionsCarryTheirField) {
  RecordFacts f = Valid();
  f.prompt_tokens = 0;
  Verdict v = ValidateFields(f);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.rejection().field, "prompt_tokens");
  EXPECT_EQ(v.rejection().Named([](absl::string_view field) { return absl::StrCat("--", field); }),
            "--prompt_tokens = 0: must be in [1, 2147483648]");
  for (auto mutate : std::initializer_list<void (*)(RecordFacts&)>{
           [](RecordFacts& r) { r.logical_match_tokens = r.prompt_tokens + 1; },
           [](RecordFacts& r) { r.ttft_seconds = -1; }, [](RecordFacts& r) { r.model = ""; },
           [](RecordFacts& r) { r.tier_value = 42; }, [](RecordFacts& r) { r.output_tokens = 0; }}) {
    RecordFacts bad = Valid();
    mutate(bad);
    const Verdict verdict = ValidateFields(bad);
    ASSERT_FALSE(verdict.ok());
    EXPECT_FALSE(verdict.rejection().field.empty()) << verdict.rejection().message;
    EXPECT_EQ(verdict.rejection().message.rfind(verdict.rejection().field, 0), 0u) << verdict.rejection().message;
  }
}

}  // namespace
}  // namespace kvledger
