#include "lib/cost_model/alpha_calculator.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "lib/cost_model/attention_geometry.h"
#include "lib/cost_model/number_format.h"

namespace kvledger {
namespace {

absl::Status OutOfRange(InputNamer name, const char* field, double value, const char* rule) {
  return absl::InvalidArgumentError(absl::StrCat(name(field), " = ", FormatDouble(value), ": ", rule));
}

absl::Status CheckTokens(InputNamer name, const char* field, const std::optional<uint64_t>& tokens) {
  if (!tokens || (*tokens >= 1 && *tokens <= kMaxTokens)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(name(field), " = ", *tokens, ": must be in [1, ", kMaxTokens, "]"));
}

bool InUnitInterval(double x) { return std::isfinite(x) && x >= 0 && x <= 1; }

std::optional<double> Inverse(double remaining) {
  if (remaining <= 0) return std::nullopt;
  return 1.0 / remaining;
}


// The inputs each attention kind takes and needs: another kind's input is refused, never ignored,
// and a missing one is named alone.
absl::Status CheckKindInputs(const AlphaInputs& in, InputNamer name) {
  const char* kind = in.kind == MixerKind::kFullCausal ? "full" : in.kind == MixerKind::kSlidingWindow ? "swa" : "recurrent";
  const std::string with = absl::StrCat(" with ", name("attention"), " ", kind);
  auto refuse = [&](const char* field) {
    const std::string takes =
        in.kind == MixerKind::kFullCausal ? std::string("full attention has none")
        : in.kind == MixerKind::kSlidingWindow
            ? absl::StrCat("swa takes ", name("window_fraction"), ", or ", name("window"), " with ", name("prompt_tokens"))
            : absl::StrCat("recurrent takes ", name("checkpoint"), " with ", name("prompt_tokens"));
    return absl::InvalidArgumentError(absl::StrCat(name(field), ": not an input", with, " (", takes, ")"));
  };
  auto require = [&](const char* field) { return absl::InvalidArgumentError(absl::StrCat(name(field), ": required", with)); };
  const bool swa = in.kind == MixerKind::kSlidingWindow, recurrent = in.kind == MixerKind::kLinear;
  if (!swa && in.window_fraction) return refuse("window_fraction");
  if (!swa && in.window_tokens) return refuse("window");
  if (!recurrent && in.checkpoint_tokens) return refuse("checkpoint");
  if (swa && in.window_fraction && in.window_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(name("window_fraction"), ": give either it or ", name("window"), ", not both"));
  }
  if (swa && !in.window_fraction && !in.window_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(name("window_fraction"), " or ", name("window"), ": required", with));
  }
  if (swa && in.window_tokens && !in.prompt_tokens) return require("prompt_tokens");
  if (recurrent && !in.checkpoint_tokens) return require("checkpoint");
  if (recurrent && !in.prompt_tokens) return require("prompt_tokens");
  return absl::OkStatus();
}

// The inputs every kind shares: ranges, and the companions one needs.
absl::Status CheckInputs(const AlphaInputs& in, InputNamer name) {
  if (!InUnitInterval(in.alpha)) return OutOfRange(name, "alpha", in.alpha, "must be in [0, 1]");
  if (in.beta && !InUnitInterval(*in.beta)) return OutOfRange(name, "beta", *in.beta, "must be in [0, 1]");
  if (in.overhead && !(std::isfinite(*in.overhead) && *in.overhead >= 0)) {
    return OutOfRange(name, "overhead", *in.overhead, "must be finite and >= 0");
  }
  if (in.overhead && !in.beta) {
    return absl::InvalidArgumentError(absl::StrCat(name("overhead"), ": needs ", name("beta"),
                                                   " (the end-to-end estimate adds h to the block remaining)"));
  }
  for (auto [field, share] : {std::pair{"queue_share", in.queue_share}, std::pair{"decode_share", in.decode_share}}) {
    if (share && !InUnitInterval(*share)) return OutOfRange(name, field, *share, "must be in [0, 1]");
  }
  if (in.queue_share.value_or(0) + in.decode_share.value_or(0) > 1) {
    return absl::InvalidArgumentError(absl::StrCat(name("decode_share"), " = ", FormatDouble(*in.decode_share),
                                                   ": must be <= 1 - ", name("queue_share"), " = ",
                                                   FormatDouble(1 - *in.queue_share)));
  }
  for (auto [field, tokens] : {std::pair{"prompt_tokens", in.prompt_tokens}, std::pair{"window", in.window_tokens},
                               std::pair{"checkpoint", in.checkpoint_tokens}}) {
    if (auto s = CheckTokens(name, field, tokens); !s.ok()) return s;
  }
  return CheckKindInputs(in, name);
}

// Attention remaining for the kind (docs/cost-model.md §2); for recurrent layers also the resume
// boundary and the token-wise share skipped.
absl::Status KindRemaining(const AlphaInputs& in, InputNamer name, AlphaResult& out, double& token_alpha) {
  switch (in.kind) {
    case MixerKind::kFullCausal:
      out.attention_remaining = 1.0 - in.alpha * in.alpha;
      return absl::OkStatus();
    case MixerKind::kSlidingWindow: {
      double w;
      if (in.window_fraction) {
        w = *in.window_fraction;
        if (!(std::isfinite(w) && w > 0 && w <= static_cast<double>(kMaxTokens))) {
          return OutOfRange(name, "window_fraction", w, "must be > 0 and <= 2147483648");
        }
      } else if (in.window_tokens && in.prompt_tokens) {
        w = static_cast<double>(*in.window_tokens) / static_cast<double>(*in.prompt_tokens);
      } else {  // CheckKindInputs refused this already
        return absl::InternalError("sliding window without its window");
      }
      const double total = ContinuousWindowWork(1.0, w);
      out.attention_remaining = (total - ContinuousWindowWork(in.alpha, w)) / total;
      return absl::OkStatus();
    }
    case MixerKind::kLinear: {
      if (!in.checkpoint_tokens || !in.prompt_tokens) {  // CheckKindInputs refused this already
        return absl::InternalError("recurrent attention without its checkpoint and prompt tokens");
      }
      const uint64_t n = *in.prompt_tokens;
      // floor(alpha N), exactly: from the caller's exact value, else from the double alpha.
      const uint64_t match = in.match_tokens ? *in.match_tokens : *FloorRatioTimes(in.alpha, n);
      if (match > n) {
        return absl::InvalidArgumentError(absl::StrCat("match_tokens = ", match, ": must be <= ", name("prompt_tokens"),
                                                       " = ", n));
      }
      const uint64_t aligned = AlignDown(match, *in.checkpoint_tokens);
      out.aligned_tokens = aligned;
      out.replay_tokens = match - aligned;
      out.attention_remaining = static_cast<double>(n - aligned) / static_cast<double>(n);
      token_alpha = static_cast<double>(aligned) / static_cast<double>(n);
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string FieldName(absl::string_view field) { return std::string(field); }

absl::StatusOr<AlphaResult> CalculateAlpha(const AlphaInputs& in, InputNamer name) {
  if (absl::Status s = CheckInputs(in, name); !s.ok()) return s;
  AlphaResult out;
  double token_alpha = in.alpha;  // share of token-wise work skipped
  if (absl::Status s = KindRemaining(in, name, out, token_alpha); !s.ok()) return s;
  out.attention_speedup = Inverse(out.attention_remaining);
  if (in.beta) {
    const double block = *in.beta * out.attention_remaining + (1.0 - *in.beta) * (1.0 - token_alpha);
    out.block_remaining = block;
    out.block_speedup = Inverse(block);
    if (in.overhead) out.e2e_speedup = Inverse(block + *in.overhead);
  }
  if (in.queue_share || in.decode_share) {
    const double waiting = in.queue_share.value_or(0) + in.decode_share.value_or(0);
    const double prefill_remaining =
        in.overhead ? *out.block_remaining + *in.overhead : out.block_remaining.value_or(out.attention_remaining);
    out.request_speedup = Inverse(waiting + (1.0 - waiting) * prefill_remaining);
    out.request_speedup_bound = Inverse(waiting);
  }
  return out;
}

}  // namespace kvledger
