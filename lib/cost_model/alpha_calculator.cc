#include "lib/cost_model/alpha_calculator.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "lib/cost_model/attention_geometry.h"

namespace kvledger {
namespace {

absl::Status OutOfRange(const char* name, double value, const char* rule) {
  return absl::InvalidArgumentError(absl::StrCat(name, " = ", value, ": ", rule));
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
  if (in.prompt_tokens && *in.prompt_tokens == 0) {
    return absl::InvalidArgumentError("prompt_tokens = 0: must be >= 1");
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
        if (!(std::isfinite(w) && w > 0)) return OutOfRange("window_fraction", w, "must be > 0");
      } else if (in.window_tokens && in.prompt_tokens) {
        if (*in.window_tokens == 0) return absl::InvalidArgumentError("window = 0: must be >= 1");
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
      if (*in.checkpoint_tokens == 0) return absl::InvalidArgumentError("checkpoint = 0: must be >= 1");
      const uint64_t n = *in.prompt_tokens;
      // floor(alpha N); the 1e-9 guard keeps decimal inputs such as 0.3 x 1000 at 300.
      const auto match = static_cast<uint64_t>(
          std::min<double>(static_cast<double>(n), std::floor(in.alpha * n + 1e-9)));
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
  return out;
}

}  // namespace kvledger
