#include "lib/cost_model/alpha_calculator.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "lib/cost_model/attention_geometry.h"
#include "lib/cost_model/number_format.h"

namespace kvledger {
namespace {

absl::Status OutOfRange(const char* name, double value, const char* rule) {
  return absl::InvalidArgumentError(absl::StrCat(name, " = ", FormatDouble(value), ": ", rule));
}

absl::Status CheckTokens(const char* name, const std::optional<uint64_t>& tokens) {
  if (!tokens || (*tokens >= 1 && *tokens <= kMaxTokens)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(name, " = ", *tokens, ": must be in [1, ", kMaxTokens, "]"));
}

bool InUnitInterval(double x) { return std::isfinite(x) && x >= 0 && x <= 1; }

std::optional<double> Inverse(double remaining) {
  if (remaining <= 0) return std::nullopt;
  return 1.0 / remaining;
}

}  // namespace

absl::StatusOr<AlphaResult> CalculateAlpha(const AlphaInputs& in) {
  if (!InUnitInterval(in.alpha)) return OutOfRange("alpha", in.alpha, "must be in [0, 1]");
  if (in.beta && !InUnitInterval(*in.beta)) return OutOfRange("beta", *in.beta, "must be in [0, 1]");
  if (in.overhead && !(std::isfinite(*in.overhead) && *in.overhead >= 0)) {
    return OutOfRange("overhead", *in.overhead, "must be finite and >= 0");
  }
  if (in.overhead && !in.beta) {
    return absl::InvalidArgumentError("overhead: needs beta (the end-to-end estimate adds h to the block remaining)");
  }
  for (auto [name, share] : {std::pair{"queue_share", in.queue_share}, std::pair{"decode_share", in.decode_share}}) {
    if (share && !InUnitInterval(*share)) return OutOfRange(name, *share, "must be in [0, 1]");
  }
  const double waiting = in.queue_share.value_or(0) + in.decode_share.value_or(0);
  if (waiting > 1) {
    return absl::InvalidArgumentError(absl::StrCat("decode_share = ", FormatDouble(*in.decode_share),
                                                   ": must be <= 1 - queue_share = ",
                                                   FormatDouble(1 - *in.queue_share)));
  }
  for (auto [name, tokens] : {std::pair{"prompt_tokens", in.prompt_tokens}, std::pair{"window", in.window_tokens},
                               std::pair{"checkpoint", in.checkpoint_tokens}}) {
    if (auto s = CheckTokens(name, tokens); !s.ok()) return s;
  }

  AlphaResult out;
  double token_alpha = in.alpha;  // share of token-wise work skipped
  switch (in.kind) {
    case MixerKind::kFullCausal:
      out.attention_remaining = 1.0 - in.alpha * in.alpha;
      break;
    case MixerKind::kSlidingWindow: {
      double w;
      if (in.window_fraction) {
        w = *in.window_fraction;
        if (!(std::isfinite(w) && w > 0 && w <= static_cast<double>(kMaxTokens))) {
          return OutOfRange("window_fraction", w, "must be > 0 and <= 2147483648");
        }
      } else if (in.window_tokens && in.prompt_tokens) {
        w = static_cast<double>(*in.window_tokens) / static_cast<double>(*in.prompt_tokens);
      } else {
        return absl::InvalidArgumentError(
            "sliding window: needs window_fraction, or window with prompt_tokens");
      }
      const double total = ContinuousWindowWork(1.0, w);
      out.attention_remaining = (total - ContinuousWindowWork(in.alpha, w)) / total;
      break;
    }
    case MixerKind::kLinear: {
      if (!in.checkpoint_tokens || !in.prompt_tokens) {
        return absl::InvalidArgumentError("recurrent: needs checkpoint and prompt_tokens");
      }
      const uint64_t n = *in.prompt_tokens;
      // floor(alpha N), exactly: from the caller's exact value, else from the double alpha.
      const uint64_t match = in.match_tokens ? *in.match_tokens : *FloorRatioTimes(in.alpha, n);
      if (match > n) {
        return absl::InvalidArgumentError(
            absl::StrCat("match_tokens = ", match, ": must be <= prompt_tokens = ", n));
      }
      const uint64_t aligned = AlignDown(match, *in.checkpoint_tokens);
      out.aligned_tokens = aligned;
      out.replay_tokens = match - aligned;
      out.attention_remaining = static_cast<double>(n - aligned) / static_cast<double>(n);
      token_alpha = static_cast<double>(aligned) / static_cast<double>(n);
      break;
    }
  }
  out.attention_speedup = Inverse(out.attention_remaining);
  if (in.beta) {
    const double block = *in.beta * out.attention_remaining + (1.0 - *in.beta) * (1.0 - token_alpha);
    out.block_remaining = block;
    out.block_speedup = Inverse(block);
    if (in.overhead) out.e2e_speedup = Inverse(block + *in.overhead);
  }
  if (in.queue_share || in.decode_share) {
    const double prefill_remaining =
        in.overhead ? *out.block_remaining + *in.overhead : out.block_remaining.value_or(out.attention_remaining);
    out.request_speedup = Inverse(waiting + (1.0 - waiting) * prefill_remaining);
    out.request_speedup_bound = Inverse(waiting);
  }
  return out;
}

}  // namespace kvledger
