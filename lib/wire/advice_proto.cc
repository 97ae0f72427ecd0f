#include "lib/wire/advice_proto.h"
#include "lib/base/quote.h"

#include <functional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/wire/json_writer.h"

namespace kvledger {
namespace {

void RateToProto(const RateUsed& rate, v1::Rate* out) {
  out->set_basis(static_cast<v1::Basis>(rate.basis));
  if (rate.rate) out->set_value(*rate.rate);
  out->set_samples(rate.samples);
  out->set_weight(rate.weight);
  out->set_fixed_seconds(rate.fixed_seconds);
}

std::optional<double> Optional(bool has, double value) { return has ? std::optional<double>(value) : std::nullopt; }

const char* BasisName(v1::Basis basis) { return BasisLabel(static_cast<Basis>(basis)); }

JsonObject RateJson(const v1::Rate& rate) {
  JsonObject o;
  o.String("basis", BasisName(rate.basis()))
      .Number("value", Optional(rate.has_value(), rate.value()))
      .Integer("samples", Uint128{rate.samples()})
      .Number("weight", rate.weight())
      .Number("fixed_seconds", rate.fixed_seconds());
  return o;
}

std::optional<Uint128> Decimal(const std::string& text) {
  Uint128 value = 0;
  for (char c : text) {
    if (!absl::ascii_isdigit(c)) return std::nullopt;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  return text.empty() ? std::nullopt : std::optional<Uint128>(value);
}

}  // namespace

namespace {

std::optional<int> SourceTierValue(absl::string_view label) {
  const std::optional<Tier> tier = TierFromLabel(label);
  if (!tier || !IsSourceTier(*tier)) return std::nullopt;
  return static_cast<int>(*tier);
}

// replica=a,tier=host,tokens=3000[,recoverable=2992][,wait=0.02]
absl::StatusOr<v1::AdviceCandidate> ParseKeyValueCandidate(absl::string_view text,
                                                           const std::function<absl::Status(absl::string_view)>& fail) {
  v1::AdviceCandidate candidate;
  bool has_tier = false, has_tokens = false;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    const std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    int64_t tokens = 0;
    double seconds = 0;
    if (kv.first == "tier") {
      const std::optional<int> tier = SourceTierValue(kv.second);
      if (!tier) return fail(absl::StrCat("the tier must be ", SourceTierList()));
      candidate.set_tier(static_cast<v1::Tier>(*tier));
      has_tier = true;
    } else if (kv.first == "tokens" && absl::SimpleAtoi(kv.second, &tokens)) {
      candidate.set_logical_match_tokens(tokens);
      has_tokens = true;
    } else if (kv.first == "recoverable" && absl::SimpleAtoi(kv.second, &tokens)) {
      candidate.set_recoverable_tokens(tokens);
    } else if (kv.first == "wait" && absl::SimpleAtod(kv.second, &seconds)) {
      candidate.set_wait_seconds(seconds);
    } else if (kv.first == "replica") {
      candidate.set_replica(std::string(kv.second));
    } else {
      return fail(absl::StrCat(Quoted(part), ": must be tier=TIER, tokens=N, recoverable=N, wait=SECONDS "
                               "or replica=ID"));
    }
  }
  if (!has_tier || !has_tokens) return fail("needs tier= and tokens=");
  return candidate;
}

}  // namespace

absl::StatusOr<v1::AdviceCandidate> ParseCandidate(absl::string_view text, absl::string_view what) {
  auto fail = [&](absl::string_view rule) {
    return absl::InvalidArgumentError(absl::StrCat(what, " = ", Quoted(text), ": ", rule));
  };
  if (absl::StrContains(text, '=')) return ParseKeyValueCandidate(text, fail);
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  if (parts.size() != 2 && parts.size() != 3) {
    return fail("must be TIER:MATCH_TOKENS[:RECOVERABLE_TOKENS] or replica=ID,tier=TIER,tokens=N[,wait=SECONDS]");
  }
  v1::AdviceCandidate candidate;
  const std::optional<int> tier = SourceTierValue(parts[0]);
  if (!tier) return fail(absl::StrCat("the tier must be ", SourceTierList()));
  candidate.set_tier(static_cast<v1::Tier>(*tier));
  int64_t tokens = 0;
  if (!absl::SimpleAtoi(parts[1], &tokens)) return fail("MATCH_TOKENS must be an integer");
  candidate.set_logical_match_tokens(tokens);
  if (parts.size() == 3) {
    if (!absl::SimpleAtoi(parts[2], &tokens)) return fail("RECOVERABLE_TOKENS must be an integer");
    candidate.set_recoverable_tokens(tokens);
  }
  return candidate;
}

AdviceRequestInput AdviceRequestFromProto(const v1::AdviceRequest& request) {
  AdviceRequestInput in;
  in.model = request.model();
  in.prompt_tokens = request.prompt_tokens();
  for (const auto& c : request.candidates()) {
    AdviceCandidateInput candidate;
    candidate.tier_value = c.tier();
    candidate.logical_match_tokens = c.logical_match_tokens();
    if (c.has_recoverable_tokens()) candidate.recoverable_tokens = c.recoverable_tokens();
    if (c.has_wait_seconds()) candidate.wait_seconds = c.wait_seconds();
    candidate.replica = c.replica();
    in.candidates.push_back(candidate);
  }
  return in;
}

v1::Advice AdviceToProto(const Advice& advice) {
  v1::Advice out;
  out.set_model(advice.model);
  out.set_prompt_tokens(static_cast<int64_t>(advice.prompt_tokens));
  out.set_prefill_flops(Uint128ToString(advice.prefill_flops));
  RateToProto(advice.compute, out.mutable_compute());
  if (advice.recompute_all_seconds) out.set_recompute_all_seconds(*advice.recompute_all_seconds);
  for (const CandidateAdvice& c : advice.candidates) {
    v1::CandidateAdvice* o = out.add_candidates();
    o->set_tier(static_cast<v1::Tier>(c.tier));
    o->set_logical_match_tokens(static_cast<int64_t>(c.logical_match_tokens));
    o->set_reused_tokens(static_cast<int64_t>(c.reused_tokens));
    o->set_reused_bytes(Uint128ToString(c.reused_bytes));
    o->set_reused_flops(Uint128ToString(c.reused_flops));
    RateToProto(c.bandwidth, o->mutable_bandwidth());
    if (c.reload_seconds) o->set_reload_seconds(*c.reload_seconds);
    if (c.recompute_seconds) o->set_recompute_seconds(*c.recompute_seconds);
    if (c.prefill_seconds) o->set_prefill_seconds(*c.prefill_seconds);
    o->set_basis(static_cast<v1::Basis>(c.basis));
    o->set_replica(c.replica);
    if (c.wait_seconds) o->set_wait_seconds(*c.wait_seconds);
    if (c.expected_seconds) {
      o->set_expected_seconds(*c.expected_seconds);
      o->set_choice(c.reload ? TierLabel(c.tier) : "recompute");
    }
    o->set_rank(c.rank);
    if (c.break_even_tokens) o->set_break_even_tokens(static_cast<int64_t>(*c.break_even_tokens));
    if (c.partial_reload_tokens) {
      o->set_partial_reload_tokens(static_cast<int64_t>(*c.partial_reload_tokens));
      o->set_partial_prefill_seconds(*c.partial_prefill_seconds);
    }
  }
  out.set_recommendation(advice.recommendation());
  if (advice.recommended && *advice.recommended >= 0) {
    out.set_recommended_candidate(*advice.recommended);
    if (advice.by_replica) out.set_recommended_replica(advice.candidates[static_cast<size_t>(*advice.recommended)].replica);
  }
  if (advice.saving_seconds) out.set_saving_seconds(*advice.saving_seconds);
  if (advice.gain_seconds) out.set_gain_seconds(*advice.gain_seconds);
  out.set_tie(advice.tie);
  return out;
}

std::string AdviceToJson(const v1::Advice& advice) {
  std::vector<JsonObject> candidates;
  for (const auto& c : advice.candidates()) {
    JsonObject o;
    o.String("tier", TierLabel(static_cast<Tier>(c.tier())))
        .Integer("match_tokens", Uint128{static_cast<uint64_t>(c.logical_match_tokens())})
        .Integer("reused_tokens", Uint128{static_cast<uint64_t>(c.reused_tokens())})
        .Integer("reused_bytes", Decimal(c.reused_bytes()))
        .Integer("reused_flops", Decimal(c.reused_flops()))
        .Number("reload_seconds", Optional(c.has_reload_seconds(), c.reload_seconds()))
        .Number("recompute_seconds", Optional(c.has_recompute_seconds(), c.recompute_seconds()))
        .Number("prefill_seconds", Optional(c.has_prefill_seconds(), c.prefill_seconds()))
        .String("basis", BasisName(c.basis()))
        .Integer("samples", Uint128{c.bandwidth().samples()})
        .Object("bandwidth", RateJson(c.bandwidth()))
        .String("replica", c.replica())
        .Number("wait_seconds", Optional(c.has_wait_seconds(), c.wait_seconds()))
        .Number("expected_seconds", Optional(c.has_expected_seconds(), c.expected_seconds()));
    if (c.choice().empty()) {
      o.Null("choice");
    } else {
      o.String("choice", c.choice());
    }
    if (c.rank() == 0) {
      o.Null("rank");
    } else {
      o.Integer("rank", Uint128{c.rank()});
    }
    if (c.has_break_even_tokens()) {
      o.Integer("break_even_tokens", Uint128{static_cast<uint64_t>(c.break_even_tokens())});
    } else {
      o.Null("break_even_tokens");
    }
    if (c.has_partial_reload_tokens()) {
      o.Integer("partial_reload_tokens", Uint128{static_cast<uint64_t>(c.partial_reload_tokens())});
    } else {
      o.Null("partial_reload_tokens");
    }
    o.Number("partial_prefill_seconds", Optional(c.has_partial_prefill_seconds(), c.partial_prefill_seconds()));
    candidates.push_back(o);
  }
  JsonObject o;
  o.String("model", advice.model()).Integer("prompt_tokens", Uint128{static_cast<uint64_t>(advice.prompt_tokens())});
  if (advice.recommendation().empty()) {
    o.Null("recommendation");
  } else {
    o.String("recommendation", advice.recommendation());
  }
  if (advice.recommended_replica().empty()) {
    o.Null("recommended_replica");
  } else {
    o.String("recommended_replica", advice.recommended_replica());
  }
  o.Number("saving_seconds", Optional(advice.has_saving_seconds(), advice.saving_seconds()))
      .Number("gain_seconds", Optional(advice.has_gain_seconds(), advice.gain_seconds()))
      .Bool("tie", advice.tie())
      .Number("recompute_all_seconds", Optional(advice.has_recompute_all_seconds(), advice.recompute_all_seconds()))
      .Integer("prefill_flops", Decimal(advice.prefill_flops()))
      .Object("compute", RateJson(advice.compute()))
      .Array("candidates", candidates);
  return o.str();
}

}  // namespace kvledger
