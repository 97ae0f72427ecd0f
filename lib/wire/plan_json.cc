#include "lib/wire/plan_json.h"

#include <charconv>
#include <optional>
#include <cmath>

namespace kvledger {
namespace {

std::string Shortest(double value) {
  if (!std::isfinite(value)) return "null";
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

JsonObject TotalsToJson(const PlanTotals& totals) {
  JsonObject o;
  for (const PlanColumn& column : PlanTotalsColumns()) o.Json(column.name, column.value(totals));
  return o;
}

}  // namespace

const std::vector<PlanColumn>& PlanTotalsColumns() {
  using T = const PlanTotals&;
  static const std::vector<PlanColumn> columns = {
      {"requests", [](T t) { return Uint128ToString(t.requests); }},
      {"hit_requests", [](T t) { return Uint128ToString(t.hit_requests); }},
      {"prompt_tokens", [](T t) { return Uint128ToString(t.prompt_tokens); }},
      {"logical_match_tokens", [](T t) { return Uint128ToString(t.logical_match_tokens); }},
      {"reused_tokens", [](T t) { return Uint128ToString(t.reused_tokens); }},
      {"token_hit_ratio", [](T t) { return Shortest(t.TokenHitRatio()); }},
      {"attention_baseline_flops", [](T t) { return Uint128ToString(t.attention_baseline_flops); }},
      {"attention_avoided_flops", [](T t) { return Uint128ToString(t.attention_avoided_flops); }},
      {"attention_avoided_ratio", [](T t) { return Shortest(t.AttentionAvoided()); }},
      {"prefill_baseline_flops", [](T t) { return Uint128ToString(t.prefill_baseline_flops); }},
      {"prefill_avoided_flops", [](T t) { return Uint128ToString(t.prefill_avoided_flops); }},
      {"prefill_avoided_ratio", [](T t) { return Shortest(t.PrefillAvoided()); }},
      {"reused_bytes", [](T t) { return Uint128ToString(t.reused_bytes); }},
      {"compared_hits", [](T t) { return Uint128ToString(t.compared); }},
      // Unknown (null, "-" in the text) when no hit had both a reload and a recompute estimate.
      {"reload_seconds", [](T t) { return t.compared == 0 ? std::string("null") : Shortest(t.reload_seconds); }},
      {"recompute_seconds", [](T t) { return t.compared == 0 ? std::string("null") : Shortest(t.recompute_seconds); }},
      {"cheaper_recomputed_hits",
       [](T t) { return t.compared == 0 ? std::string("null") : Uint128ToString(t.cheaper_recomputed); }},
  };
  return columns;
}

JsonObject PlanResultToJson(const PlanResult& r) {
  JsonObject capacity_tokens, capacity_bytes, matched_from;
  for (size_t t = 0; t < kPlanTierCount; ++t) {
    const char* tier = TierLabel(kPlanTiers[t]);
    const bool finite = r.config.Finite(t);  // null: unlimited, or no such tier
    capacity_tokens.Integer(tier, finite ? std::optional<Uint128>(r.config.capacity_tokens[t]) : std::nullopt);
    capacity_bytes.Integer(tier, finite ? std::optional<Uint128>(r.capacity_bytes[t]) : std::nullopt);
    matched_from.Integer(tier, r.matched_tokens_from[t]);
  }
  JsonObject by_tier;
  for (int tier = 0; tier < kTierCount; ++tier) {
    if (r.by_tier[tier].requests > 0) by_tier.Object(TierLabel(static_cast<Tier>(tier)), TotalsToJson(r.by_tier[tier]));
  }
  JsonObject o;
  o.Object("capacity_tokens", capacity_tokens).Object("capacity_bytes", capacity_bytes);
  o.Object("total", TotalsToJson(r.total)).Object("by_tier", by_tier).Object("matched_tokens_from", matched_from);
  return o;
}

namespace {

// The context applied (null when neither flag nor profile states one) and the requests beyond it:
// the same at every capacity, so given once.
void ContextToJson(const PlanResult& first, JsonObject& o) {
  const BeyondContext& b = first.beyond_context;
  JsonObject beyond;
  beyond.Integer("requests", b.requests).Integer("prompt_tokens", b.prompt_tokens);
  beyond.Integer("longest_prompt_tokens", static_cast<Uint128>(b.longest_prompt_tokens));
  if (b.requests > 0) beyond.Integer("first_line", b.first_line);
  else beyond.Null("first_line");
  if (first.context_tokens) o.Integer("context_tokens", *first.context_tokens);
  else o.Null("context_tokens");
  o.Object("beyond_context", beyond);
}

}  // namespace

std::string PlanRunToJson(const Profile& profile, uint64_t block_tokens, const std::vector<PlanResult>& results,
                          const std::string& second_tiers) {
  std::vector<JsonObject> entries;
  entries.reserve(results.size());
  for (const PlanResult& r : results) entries.push_back(PlanResultToJson(r));
  JsonObject o;
  o.String("model", profile.name()).Integer("block_tokens", block_tokens);
  if (!results.empty()) ContextToJson(results.front(), o);
  o.Array("results", entries);
  if (!second_tiers.empty()) o.Json("second_tiers", second_tiers);
  return o.str();
}

}  // namespace kvledger
