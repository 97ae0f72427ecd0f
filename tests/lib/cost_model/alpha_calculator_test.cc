#include "lib/cost_model/alpha_calculator.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace kvledger {
namespace {

using ::kvledger::testing::StatusIs;
using ::testing::HasSubstr;

// docs/cost-model.md example 1: a 50 % hit avoids 25 % of full attention.
TEST(AlphaCalculatorTest, FullAttentionHalfHit) {
  AlphaInputs in;
  in.alpha = 0.5;
  in.beta = 0.4;
  in.overhead = 0.1;
  auto r = CalculateAlpha(in);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->attention_remaining, 0.75);
  EXPECT_DOUBLE_EQ(*r->attention_speedup, 4.0 / 3.0);
  EXPECT_DOUBLE_EQ(*r->block_remaining, 0.4 * 0.75 + 0.6 * 0.5);  // 0.6
  EXPECT_DOUBLE_EQ(*r->block_speedup, 1 / 0.6);
  EXPECT_DOUBLE_EQ(*r->e2e_speedup, 1 / 0.7);
  EXPECT_FALSE(r->aligned_tokens.has_value());
}

// A full hit leaves no attention: the speedup is unbounded (absent), not infinite.
TEST(AlphaCalculatorTest, FullHitIsUnbounded) {
  AlphaInputs in;
  in.alpha = 1;
  auto r = CalculateAlpha(in);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->attention_remaining, 0);
  EXPECT_FALSE(r->attention_speedup.has_value());
}

// docs/cost-model.md example 3: window fraction 1/4, alpha 1/2 leaves 4/7 of the work.
TEST(AlphaCalculatorTest, SlidingWindowByFraction) {
  AlphaInputs in;
  in.alpha = 0.5;
  in.kind = MixerKind::kSlidingWindow;
  in.window_fraction = 0.25;
  auto r = CalculateAlpha(in);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->attention_remaining, 4.0 / 7.0);
  // The same through --window and --prompt-tokens.
  in.window_fraction.reset();
  in.window_tokens = 1024;
  in.prompt_tokens = 4096;
  EXPECT_DOUBLE_EQ(CalculateAlpha(in)->attention_remaining, 4.0 / 7.0);
  // A window wider than the prompt is full attention.
  in.window_tokens = 8192;
  EXPECT_DOUBLE_EQ(CalculateAlpha(in)->attention_remaining, 0.75);
}

// docs/cost-model.md example 4: recurrent, C = 256, N = 1000, alpha 0.5 resumes at 256.
TEST(AlphaCalculatorTest, RecurrentAlignsToCheckpoint) {
  AlphaInputs in;
  in.alpha = 0.5;
  in.kind = MixerKind::kLinear;
  in.checkpoint_tokens = 256;
  in.prompt_tokens = 1000;
  in.beta = 0.5;
  auto r = CalculateAlpha(in);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r->aligned_tokens, 256u);
  EXPECT_EQ(*r->replay_tokens, 244u);
  EXPECT_DOUBLE_EQ(r->attention_remaining, 0.744);
  EXPECT_DOUBLE_EQ(*r->block_remaining, 0.744);  // token-wise work also resumes at 256
  // The double nearest 0.3 is below 0.3, so floor(alpha N) of the double is exactly 299; the
  // caller that knows the decimal passes the exact match instead.
  in.alpha = 0.3;
  in.checkpoint_tokens = 1;
  EXPECT_EQ(*CalculateAlpha(in)->aligned_tokens, 299u);
  in.match_tokens = 300;
  EXPECT_EQ(*CalculateAlpha(in)->aligned_tokens, 300u);
  // No tolerance turns a near-full hit into a full one.
  in.match_tokens.reset();
  in.alpha = 0.999999999999;
  EXPECT_EQ(*CalculateAlpha(in)->aligned_tokens, 999u);
}

// Proves: token inputs are bounded like records, and the message names the input and the range.
TEST(AlphaCalculatorTest, TokenInputsAreBounded) {
  AlphaInputs in;
  in.alpha = 1;
  in.kind = MixerKind::kLinear;
  in.checkpoint_tokens = 1;
  in.prompt_tokens = 18446744073709551615u;
  EXPECT_THAT(CalculateAlpha(in), StatusIs(absl::StatusCode::kInvalidArgument,
                                           "prompt_tokens = 18446744073709551615: must be in [1, 2147483648]"));
  in.prompt_tokens = 0;
  EXPECT_THAT(CalculateAlpha(in), StatusIs(absl::StatusCode::kInvalidArgument,
                                           "prompt_tokens = 0: must be in [1, 2147483648]"));
  in.prompt_tokens = 2147483648u;  // the bound itself is exact: a full hit is the whole prompt
  EXPECT_EQ(*CalculateAlpha(in)->aligned_tokens, 2147483648u);
  in.checkpoint_tokens = 2147483649u;
  EXPECT_THAT(CalculateAlpha(in), StatusIs(absl::StatusCode::kInvalidArgument,
                                           "checkpoint = 2147483649: must be in [1, 2147483648]"));
  in.checkpoint_tokens = 1;
  in.match_tokens = 2147483649u;
  EXPECT_THAT(CalculateAlpha(in), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("match_tokens = 2147483649: must be <= prompt_tokens")));
  in = AlphaInputs{};
  in.alpha = 0.5;
  in.kind = MixerKind::kSlidingWindow;
  in.window_tokens = 0;
  in.prompt_tokens = 10;
  EXPECT_THAT(CalculateAlpha(in), StatusIs(absl::StatusCode::kInvalidArgument,
                                           "window = 0: must be in [1, 2147483648]"));
  in.window_tokens.reset();
  in.window_fraction = 1e300;
  EXPECT_THAT(CalculateAlpha(in), StatusIs(absl::StatusCode::kInvalidArgument,
                                           "window_fraction = 1e+300: must be > 0 and <= 2147483648"));
}

// Proves: a value out of range is printed as given, not rounded to 6 digits.
TEST(AlphaCalculatorTest, ValuesPrintedAsGiven) {
  AlphaInputs in;
  in.alpha = 1.0000001;
  EXPECT_THAT(CalculateAlpha(in), StatusIs(absl::StatusCode::kInvalidArgument, "alpha = 1.0000001: must be in [0, 1]"));
}

TEST(AlphaCalculatorTest, BadInputsNameTheInput) {
  AlphaInputs in;
  in.alpha = 1.5;
  EXPECT_THAT(CalculateAlpha(in), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("alpha = 1.5")));
  in.alpha = 0.5;
  in.beta = -0.1;
  EXPECT_THAT(CalculateAlpha(in), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("beta = -0.1")));
  in.beta.reset();
  in.overhead = 0.2;
  EXPECT_THAT(CalculateAlpha(in), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs beta")));
  in.overhead.reset();
  in.kind = MixerKind::kLinear;
  EXPECT_THAT(CalculateAlpha(in), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("checkpoint")));
  in.kind = MixerKind::kSlidingWindow;
  EXPECT_THAT(CalculateAlpha(in), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("window")));
}

// Proves: the whole request's speedup holds the queue and decode shares fixed (docs/cost-model.md §12).
// Hand: alpha 0.5, beta 0.3 -> block 0.3 x 0.75 + 0.7 x 0.5 = 0.575, + h 0.05 = 0.625; queue 0.2 and
// decode 0.5 -> 1 / (0.7 + 0.3 x 0.625) = 1 / 0.8875; the bound 1 / 0.7. Without beta the prefill's
// remaining is the attention's (0.75).
TEST(AlphaCalculatorTest, WholeRequestSpeedupHoldsQueueAndDecode) {
  AlphaInputs in;
  in.alpha = 0.5;
  in.beta = 0.3;
  in.overhead = 0.05;
  in.queue_share = 0.2;
  in.decode_share = 0.5;
  auto r = CalculateAlpha(in);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(*r->request_speedup, 1 / 0.8875);
  EXPECT_DOUBLE_EQ(*r->request_speedup_bound, 1 / 0.7);
  in.beta.reset();
  in.overhead.reset();
  EXPECT_DOUBLE_EQ(*CalculateAlpha(in)->request_speedup, 1 / (0.7 + 0.3 * 0.75));
  in.queue_share = 0;
  in.decode_share = 0;  // nothing but the prefill: the bound is unbounded
  EXPECT_FALSE(CalculateAlpha(in)->request_speedup_bound.has_value());
  in.decode_share = 0.9;
  in.queue_share = 0.2;
  EXPECT_THAT(CalculateAlpha(in), StatusIs(absl::StatusCode::kInvalidArgument,
                                           "decode_share = 0.9: must be <= 1 - queue_share = 0.8"));
  in.queue_share = -0.1;
  EXPECT_THAT(CalculateAlpha(in), StatusIs(absl::StatusCode::kInvalidArgument, "queue_share = -0.1: must be in [0, 1]"));
}

}  // namespace
}  // namespace kvledger

namespace kvledger {
namespace {

std::string Dashed(absl::string_view field) { return absl::StrCat("--", field); }

// Proves: each message names its inputs as the caller's namer says, where it is made (no rewriting
// afterwards), a missing companion is named alone, and another kind's input is refused.
TEST(AlphaCalculatorTest, MessagesNameInputsAsTheCallerDoes) {
  AlphaInputs in;
  in.alpha = 0.5;
  in.kind = MixerKind::kLinear;
  in.checkpoint_tokens = 256;
  EXPECT_THAT(CalculateAlpha(in, Dashed), StatusIs(absl::StatusCode::kInvalidArgument,
                                                   "--prompt_tokens: required with --attention recurrent"));
  in.kind = MixerKind::kFullCausal;
  EXPECT_THAT(CalculateAlpha(in), StatusIs(absl::StatusCode::kInvalidArgument,
                                           "checkpoint: not an input with attention full (full attention has none)"));
  in.checkpoint_tokens.reset();
  in.overhead = 0.1;
  EXPECT_THAT(CalculateAlpha(in, Dashed),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--overhead: needs --beta (the end-to-end estimate adds h to the block remaining)"));
}

}  // namespace
}  // namespace kvledger
