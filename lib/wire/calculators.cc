#include "lib/wire/calculators.h"
#include "lib/base/quote.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "google/protobuf/util/json_util.h"
#include "lib/accounting/record_facts.h"
#include "lib/cost_model/kv_capacity.h"
#include "lib/cost_model/number_format.h"
#include "lib/wire/json_writer.h"
#include "lib/wire/proto_json.h"

namespace kvledger {
namespace {

// True when the decimal text states a value above 1 that its nearest double (1) would hide.
bool DecimalAboveOne(absl::string_view text) {
  const size_t point = text.find('.');
  absl::string_view whole = text.substr(0, point);
  while (!whole.empty() && whole.front() == '0') whole.remove_prefix(1);
  if (whole.size() > 1 || (!whole.empty() && whole != "1")) return true;
  if (whole.empty() || point == absl::string_view::npos) return false;
  return text.substr(point + 1).find_first_not_of('0') != absl::string_view::npos;
}


}  // namespace

std::string FlagName(absl::string_view field) { return absl::StrCat("--", absl::StrReplaceAll(field, {{"_", "-"}})); }

absl::StatusOr<Alpha> ParseAlpha(absl::string_view text, std::optional<uint64_t> prompt_tokens, InputNamer name) {
  Alpha alpha;
  if (!absl::SimpleAtod(text, &alpha.value)) {
    return absl::InvalidArgumentError(absl::StrCat(name("alpha"), " = ", Quoted(text), ": must be a number"));
  }
  // A decimal above 1 whose nearest double is 1 ("1.00000000000000000001") is above 1 all the same.
  if (!(alpha.value >= 0 && alpha.value <= 1) || (FloorDecimalTimes(text, 1) && DecimalAboveOne(text))) {
    return absl::InvalidArgumentError(absl::StrCat(name("alpha"), " = ", text, ": must be in [0, 1]"));
  }
  if (prompt_tokens && *prompt_tokens >= 1 && *prompt_tokens <= kMaxTokens) {
    // floor(alpha N) from the digits as typed: exact, no tolerance (docs/cost-model.md §4.1); from the
    // double for another notation (1e-1).
    const auto exact = FloorDecimalTimes(text, *prompt_tokens);
    alpha.match_tokens = exact ? static_cast<uint64_t>(*exact) : *FloorRatioTimes(alpha.value, *prompt_tokens);
  }
  return alpha;
}

absl::StatusOr<AlphaResult> RunCalc(const CalcParams& p, InputNamer name) {
  AlphaInputs in;
  auto alpha = ParseAlpha(p.alpha, p.prompt_tokens, name);
  if (!alpha.ok()) return alpha.status();
  in.alpha = alpha->value;
  in.match_tokens = alpha->match_tokens;
  if (p.attention == "full") {
    in.kind = MixerKind::kFullCausal;
  } else if (p.attention == "swa") {
    in.kind = MixerKind::kSlidingWindow;
  } else if (p.attention == "recurrent") {
    in.kind = MixerKind::kLinear;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(name("attention"), " = ", Quoted(p.attention), ": must be full, swa or recurrent"));
  }
  in.window_fraction = p.window_fraction;
  in.window_tokens = p.window;
  in.prompt_tokens = p.prompt_tokens;
  in.checkpoint_tokens = p.checkpoint;
  in.beta = p.beta;
  in.overhead = p.overhead;
  in.queue_share = p.queue_share;
  in.decode_share = p.decode_share;
  return CalculateAlpha(in, name);
}

std::string CalcToJson(const AlphaResult& r, const CalcParams& p) {
  JsonObject o;
  o.Number("attention_remaining", r.attention_remaining).Number("attention_speedup", r.attention_speedup);
  if (r.block_remaining) o.Number("block_remaining", *r.block_remaining).Number("block_speedup", r.block_speedup);
  if (p.overhead) o.Number("e2e_speedup", r.e2e_speedup);
  if (p.queue_share || p.decode_share) {
    o.Number("request_speedup", r.request_speedup).Number("request_speedup_bound", r.request_speedup_bound);
  }
  if (r.aligned_tokens) o.Integer("aligned_tokens", *r.aligned_tokens).Integer("replay_tokens", *r.replay_tokens);
  return o.str();
}

const std::vector<CalculatorInput<CalcParams>>& CalcInputs() {
  using P = CalcParams;
  static const auto* inputs = new std::vector<CalculatorInput<P>>{
      {"alpha", "logical hit ratio in [0, 1]; a decimal is taken exactly as typed", &P::alpha, true},
      {"attention", "full | swa | recurrent (default full)", &P::attention},
      {"window_fraction", "swa: window W / prompt N", &P::window_fraction},
      {"window", "swa: window W in tokens (with prompt_tokens)", &P::window},
      {"prompt_tokens", "prompt length N", &P::prompt_tokens},
      {"checkpoint", "recurrent: checkpoint interval C in tokens (with prompt_tokens)", &P::checkpoint},
      {"beta", "attention share of baseline prefill FLOPs, [0, 1]", &P::beta},
      {"overhead", "h: reuse overheads / full-prefill time (needs beta)", &P::overhead},
      {"queue_share", "share of the request's latency spent waiting to be scheduled, [0, 1]", &P::queue_share},
      {"decode_share", "share of the request's latency spent decoding, [0, 1]", &P::decode_share},
  };
  return *inputs;
}

const std::vector<CalculatorInput<KvBytesParams>>& KvBytesInputs() {
  using P = KvBytesParams;
  static const auto* inputs = new std::vector<CalculatorInput<P>>{
      {"model", "profile name (MLA, sliding-window and recurrent aware)", &P::model},
      {"layers", "layers L", &P::layers},
      {"sequences", "sequences S (default 1)", &P::sequences},
      {"tokens", "cached tokens T per sequence", &P::tokens, true},
      {"kv_heads", "K/V heads H (never query heads)", &P::kv_heads},
      {"head_dim", "head dimension D", &P::head_dim},
      {"bytes_per_element", "cache dtype bytes B", &P::bytes_per_element},
      {"budget_bytes", "memory budget X in bytes", &P::budget_bytes},
      {"reserved_bytes", "bytes reserved for weights and runtime Y (default 0)", &P::reserved_bytes},
  };
  return *inputs;
}

absl::StatusOr<KvBytesResult> RunKvBytes(const KvBytesParams& p, const ProfileCatalog& catalog, InputNamer name) {
  if (!p.tokens) return absl::InvalidArgumentError(absl::StrCat(name("tokens"), ": required"));
  const uint64_t s = p.sequences.value_or(1);
  const uint64_t tokens = *p.tokens;
  KvBytesResult r;
  if (!p.model.empty()) {
    if (p.layers || p.kv_heads || p.head_dim || p.bytes_per_element) {
      return absl::InvalidArgumentError(absl::StrCat(name("model"), ": give either ", name("model"),
                                                     " or an explicit shape, not both"));
    }
    const Profile* profile = catalog.Find(p.model);
    if (profile == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(name("model"), " = ", Quoted(p.model), ": no profile of that name"));
    }
    // A profile's per-sequence bytes fit 2^115 for any 64-bit token count (docs/cost-model.md §7);
    // only the product with the sequence count can overflow.
    const auto total = CheckedProduct({CacheBytes(profile->shape(), tokens), s});
    if (!total) {
      return absl::InvalidArgumentError(absl::StrCat(name("tokens"), " ", tokens, " x ", name("sequences"), " ", s,
                                                     ": the cache would exceed 2^128 bytes; check the inputs"));
    }
    r.kv_bytes = *total;
    r.bytes_per_token = BytesPerCachedToken(profile->shape());
    r.state_bytes = Uint128{StateBytesPerSequence(profile->shape())} * s;
  } else {
    if (!p.layers || !p.kv_heads || !p.head_dim || !p.bytes_per_element) {
      return absl::InvalidArgumentError(absl::StrCat(name("layers"), ", ", name("kv_heads"), ", ", name("head_dim"),
                                                     " and ", name("bytes_per_element"), ": required without ",
                                                     name("model")));
    }
    const KvShape shape{*p.layers, *p.kv_heads, *p.head_dim, *p.bytes_per_element};
    const auto per_token = KvBytesPerToken(shape);
    const auto total = per_token ? CheckedProduct({*per_token, s, tokens}) : std::nullopt;
    if (!total) {
      return absl::InvalidArgumentError(absl::StrCat(
          "2 x ", name("layers"), " ", *p.layers, " x ", name("kv_heads"), " ", *p.kv_heads, " x ", name("head_dim"),
          " ", *p.head_dim, " x ", name("bytes_per_element"), " ", *p.bytes_per_element, " x ", name("sequences"), " ",
          s, " x ", name("tokens"), " ", tokens, ": exceeds 2^128 bytes; check the inputs"));
    }
    r.bytes_per_token = *per_token;
    r.kv_bytes = *total;
  }
  if (p.reserved_bytes && !p.budget_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(name("reserved_bytes"), ": only with ", name("budget_bytes"),
                                                   " (it is taken from the budget)"));
  }
  if (p.reserved_bytes && *p.reserved_bytes > *p.budget_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(name("reserved_bytes"), " = ", *p.reserved_bytes,
                                                   ": must be at most ", name("budget_bytes"), " = ", *p.budget_bytes));
  }
  if (p.budget_bytes) {
    r.max_tokens = MaxCachedTokens(*p.budget_bytes, p.reserved_bytes.value_or(0), r.state_bytes.value_or(0),
                                   r.bytes_per_token);
  }
  return r;
}

std::string KvBytesToJson(const KvBytesResult& r) {
  JsonObject o;
  o.Integer("kv_bytes", r.kv_bytes).Integer("bytes_per_token", r.bytes_per_token);
  if (r.state_bytes) o.Integer("state_bytes", *r.state_bytes);
  if (r.max_tokens) o.Integer("max_tokens", *r.max_tokens);
  return o.str();
}

namespace {


// The model's profile with the what-if settings, validated like a profile file.
absl::StatusOr<std::unique_ptr<Profile>> WhatIf(const Profile& base, const ExplainInputs& inputs, InputNamer name) {
  // Past 32 bits a value would wrap in the profile's fields: refused as given, with the profile's range.
  for (const auto& [field, value] : {std::pair{"kv_page_tokens", inputs.kv_page_tokens},
                                     std::pair{"recurrent_checkpoint_tokens", inputs.recurrent_checkpoint_tokens}}) {
    if (value && *value > kMaxAlignmentTokens) {
      return absl::InvalidArgumentError(absl::StrCat(name(field), " = ", *value, ": must be in [1, ", kMaxAlignmentTokens, "]"));
    }
  }
  v1::ModelProfile definition = base.definition();
  if (inputs.kv_page_tokens) definition.mutable_serving()->set_kv_page_tokens(static_cast<uint32_t>(*inputs.kv_page_tokens));
  if (inputs.recurrent_checkpoint_tokens) {
    definition.mutable_serving()->set_recurrent_checkpoint_tokens(static_cast<uint32_t>(*inputs.recurrent_checkpoint_tokens));
  }
  auto profile = Profile::Make(definition);
  if (!profile.ok()) return profile.status();
  return std::make_unique<Profile>(*std::move(profile));
}

}  // namespace

absl::Status SetTier(v1::Record& record, absl::string_view label, InputNamer name) {
  if (label.empty()) {
    record.set_tier(record.logical_match_tokens() == 0 ? v1::TIER_UNSPECIFIED : v1::TIER_DEVICE);
    return absl::OkStatus();
  }
  const std::optional<Tier> tier = TierFromLabel(label);
  if (!tier) return absl::InvalidArgumentError(absl::StrCat(name("tier"), " = ", Quoted(label), ": must be ", TierLabelList()));
  record.set_tier(static_cast<v1::Tier>(*tier));
  return absl::OkStatus();
}

absl::StatusOr<ExplainSubject> PrepareExplain(v1::Record record, const ExplainInputs& inputs,
                                               const ModelRegistry& registry, bool match_given, InputNamer name) {
  if (inputs.alpha) {
    if (match_given) {
      return absl::InvalidArgumentError(absl::StrCat(name("alpha"), ": give either it or ", name("logical_match_tokens"),
                                                     ", not both"));
    }
    // An invalid prompt_tokens leaves the match 0, for Evaluate to name prompt_tokens itself.
    const int64_t n = record.prompt_tokens();
    auto alpha = ParseAlpha(*inputs.alpha, n > 0 ? std::optional<uint64_t>(static_cast<uint64_t>(n)) : std::nullopt, name);
    if (!alpha.ok()) return alpha.status();
    record.set_logical_match_tokens(static_cast<int64_t>(alpha->match_tokens.value_or(0)));
    if (absl::Status s = SetTier(record, inputs.tier, name); !s.ok()) return s;  // the default for this match
  }
  ExplainSubject subject;
  subject.model = registry.Resolve(record.model());
  subject.record = std::move(record);
  if (subject.model.ok() && inputs.what_if()) {
    auto profile = WhatIf(*subject.model->profile, inputs, name);
    if (!profile.ok()) return profile.status();
    subject.what_if = *std::move(profile);
    subject.model = Resolution{subject.what_if.get(), std::nullopt};
  }
  return subject;
}


std::string ProfilesToJson(const ProfileCatalog& catalog) {
  std::vector<JsonObject> profiles;
  for (const auto& profile_name : catalog.Names()) {
    const Profile& p = *catalog.Find(profile_name);
    uint64_t layers = 0;
    for (const auto& g : p.shape().groups) layers += g.num_layers;
    JsonObject o;
    o.String("name", p.name())
        .String("attention", p.attention_summary())
        .Integer("layers", Uint128{layers})
        .Integer("bytes_per_cached_token", Uint128{BytesPerCachedToken(p.shape())})
        .Integer("state_bytes_per_sequence", Uint128{StateBytesPerSequence(p.shape())})
        .Json("definition", ProtoToJson(p.definition()));
    profiles.push_back(o);
  }
  JsonObject out;
  out.Array("profiles", profiles);
  return out.str();
}

}  // namespace kvledger
