#include "lib/planning/plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/capacity/capacity_curves.h"
#include "lib/capacity/sampled_stack.h"
#include "lib/accounting/validation.h"
#include "lib/cost_model/model_shape.h"

namespace kvledger {

uint64_t PlanConfig::CapacityBlocks(size_t tier) const {
  const uint64_t tokens = capacity_tokens[tier];
  return tokens == kUnlimited ? kUnlimited : tokens / block_tokens;
}

void PlanTotals::Add(const RecordFigures& f) {
  ++requests;
  if (f.logical_match_tokens > 0) ++hit_requests;
  prompt_tokens += f.prompt_tokens;
  logical_match_tokens += f.logical_match_tokens;
  reused_tokens += f.reused_tokens;
  attention_baseline_flops += f.attention_baseline_flops;
  attention_avoided_flops += f.ReusedAttentionFlops();
  prefill_baseline_flops += f.prefill_baseline_flops;
  prefill_avoided_flops += f.ReusedPrefillFlops();
  reused_bytes += f.reused_bytes;
  if (f.reload_compared && f.logical_match_tokens > 0) {
    ++compared;
    reload_seconds += *f.reload_seconds;
    recompute_seconds += *f.estimated_recompute_seconds;
    if (f.reload_slower_than_recompute) ++cheaper_recomputed;
  }
}

void PlanTotals::Add(const PlanTotals& o) {
  requests += o.requests;
  hit_requests += o.hit_requests;
  prompt_tokens += o.prompt_tokens;
  logical_match_tokens += o.logical_match_tokens;
  reused_tokens += o.reused_tokens;
  attention_baseline_flops += o.attention_baseline_flops;
  attention_avoided_flops += o.attention_avoided_flops;
  prefill_baseline_flops += o.prefill_baseline_flops;
  prefill_avoided_flops += o.prefill_avoided_flops;
  reused_bytes += o.reused_bytes;
  compared += o.compared;
  reload_seconds += o.reload_seconds;
  recompute_seconds += o.recompute_seconds;
  cheaper_recomputed += o.cheaper_recomputed;
}

namespace {

double Ratio(Uint128 part, Uint128 whole) {
  return whole == 0 ? 0.0 : Uint128ToDouble(part) / Uint128ToDouble(whole);
}

// The record's tier: the one tier holding every matched block, `mixed` when they span tiers, none
// for a miss.
Tier MatchTier(const TieredBlockCache::Match& match) {
  if (match.blocks == 0) return Tier::kNone;
  for (size_t t = 0; t < match.per_tier.size(); ++t) {
    if (match.per_tier[t] == match.blocks) return kPlanTiers[t];
  }
  return Tier::kMixed;
}

// The tokens each tier served: whole blocks, but the prompt's partial last block counts its tokens.
std::array<uint64_t, kPlanTierCount> TokensFrom(const TieredBlockCache::Match& match, uint64_t match_tokens,
                                                uint64_t block_tokens) {
  std::array<uint64_t, kPlanTierCount> tokens{};
  for (size_t t = 0; t < match.per_tier.size(); ++t) tokens[t] = match.per_tier[t] * block_tokens;
  if (match.blocks > 0) tokens[match.last_tier] -= match.blocks * block_tokens - match_tokens;
  return tokens;
}

// The reload a hit would have paid: the reused bytes, each tier's share (by matched tokens) at that
// tier's bandwidth; a device share costs nothing. Unset when a tier it needs has no bandwidth.
std::optional<double> ReloadSeconds(const RecordFigures& figures, const std::array<uint64_t, kPlanTierCount>& from,
                                    const PlanConfig& config) {
  if (figures.logical_match_tokens == 0) return std::nullopt;
  double seconds = 0;
  for (size_t t = 1; t < kPlanTierCount; ++t) {
    if (from[t] == 0) continue;
    if (!config.bandwidth[t] || *config.bandwidth[t] <= 0) return std::nullopt;
    const double share = static_cast<double>(from[t]) / static_cast<double>(figures.logical_match_tokens);
    seconds += Uint128ToDouble(figures.reused_bytes) * share / *config.bandwidth[t];
  }
  return seconds;
}

void CountBeyondContext(const TraceRequest& request, BeyondContext& beyond) {
  if (beyond.requests++ == 0) beyond.first_line = request.line;
  beyond.prompt_tokens += static_cast<Uint128>(request.input_length);
  beyond.longest_prompt_tokens = std::max(beyond.longest_prompt_tokens, request.input_length);
}

}  // namespace

absl::Status CheckContextTokens(absl::string_view name, uint64_t value) {
  if (value >= kMinContextTokens && value <= kMaxTokens) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(name, " = ", value, ": must be in [", kMinContextTokens, ", ", kMaxTokens, "] tokens"));
}

double PlanTotals::TokenHitRatio() const { return Ratio(logical_match_tokens, prompt_tokens); }
double PlanTotals::AttentionAvoided() const { return Ratio(attention_avoided_flops, attention_baseline_flops); }
double PlanTotals::PrefillAvoided() const { return Ratio(prefill_avoided_flops, prefill_baseline_flops); }

namespace {

PlanResult EmptyResult(const PlanConfig& config, const Profile& profile) {
  PlanResult result;
  result.config = config;
  result.context_tokens = config.context_tokens ? config.context_tokens : profile.context_tokens();
  for (size_t t = 0; t < kPlanTierCount && config.HasTier(t); ++t) {
    if (config.Finite(t)) {
      result.capacity_bytes[t] = static_cast<Uint128>(config.capacity_tokens[t]) * BytesPerCachedToken(profile.shape());
    }
  }
  return result;
}

// A request costed at one match: the record it would be, its figures and the tokens each tier served.
struct Costed {
  RecordFacts facts;
  RecordFigures figures;
  std::array<uint64_t, kPlanTierCount> from{};
};

// Costs `request` at `match` under `config`; INVALID_ARGUMENT naming the line when the cost model
// refuses it.
absl::StatusOr<Costed> Cost(const TraceRequest& request, const TieredBlockCache::Match& match, const Profile& profile,
                            const EstimateSource& source, const PlanConfig& config) {
  Costed c;
  // A trace's output_length 0 (a request that generated nothing, or a trace that does not say) is
  // no output reported; a record's output_tokens counts a generated token at least.
  c.facts = FactsAtMatch(
      profile.name(), request.input_length,
      request.output_length > 0 ? std::optional<int64_t>(request.output_length) : std::nullopt,
      std::min<int64_t>(static_cast<int64_t>(match.blocks * config.block_tokens), request.input_length));
  c.facts.tier_value = static_cast<int>(MatchTier(match));
  c.from = TokensFrom(match, static_cast<uint64_t>(c.facts.logical_match_tokens), config.block_tokens);
  Verdict verdict = ValidateFields(c.facts);
  if (verdict.ok()) verdict = ValidateAgainstProfile(c.facts, profile);
  if (!verdict.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("line ", request.line, ": ", verdict.rejection().message));
  }
  // Costed once without seconds (the work needs none), then with the reload those bytes would take.
  c.figures = Derive(c.facts, profile, source);
  if ((c.facts.reload_seconds = ReloadSeconds(c.figures, c.from, config))) c.figures = Derive(c.facts, profile, source);
  return c;
}

void AddCosted(const Costed& c, PlanResult& result) {
  result.by_tier[c.facts.tier_value].Add(c.figures);
  for (size_t t = 0; t < kPlanTierCount; ++t) result.matched_tokens_from[t] += c.from[t];
}

// Whether `configs` can share one pass over one stack: nothing but the tiers' capacities and
// bandwidths differs, and with a tier below the device the blocks are used tail first (then each
// block's own depth is its prefix depth, which says its tier: MatchAtDepths).
bool OnePass(const std::vector<PlanConfig>& configs) {
  for (const PlanConfig& c : configs) {
    const PlanConfig& first = configs.front();
    if ((c.HasTier(1) && c.use_order != UseOrder::kTailFirst) || c.block_tokens != first.block_tokens ||
        c.use_order != first.use_order ||
        c.context_tokens != first.context_tokens || c.compute.has_value() != first.compute.has_value()) {
      return false;
    }
    if (c.compute && (c.compute->curve || first.compute->curve || c.compute->basis != first.compute->basis ||
                      c.compute->fixed_seconds != first.compute->fixed_seconds ||
                      c.compute->seconds_per_flop != first.compute->seconds_per_flop)) {
      return false;  // a live pass curve: not compared here, so simulated one by one
    }
  }
  return true;
}

// The match `config`'s tiers make of a request's prefix depths, non-decreasing along its blocks (tail-first
// use). Exclusive LRU tiers, each holding what the one above evicts, with every used block going back to
// the top, are one LRU stack cut at the running sums of their capacities: tier t holds the depths past
// the tiers above it, up to its own capacity more (what TieredBlockCache simulates block by block).
TieredBlockCache::Match MatchAtDepths(const std::vector<SampledStack::Sampled>& depths, const PlanConfig& config) {
  TieredBlockCache::Match match;
  uint64_t bound = 0;  // the deepest depth the tiers so far hold
  for (size_t t = 0; t < kPlanTierCount && config.HasTier(t); ++t) {
    const uint64_t blocks = config.CapacityBlocks(t);
    bound = blocks == kUnlimited || bound >= kUnlimited - 1 - blocks ? kUnlimited - 1 : bound + blocks;
    const auto through = static_cast<size_t>(
        std::partition_point(depths.begin(), depths.end(),
                             [bound](const SampledStack::Sampled& d) { return d.depth <= bound; }) -
        depths.begin());
    match.per_tier.push_back(through - match.blocks);
    if (through > match.blocks) match.last_tier = t;
    match.blocks = through;
  }
  return match;
}

// The ids below which a table indexed by the id is worth it: traces that number their blocks
// (Mooncake's and WEKA's hash_ids count up from 0) get one no larger than the trace's own ids; ids
// that are hashes get none.
uint64_t DenseIds(const std::vector<TraceRequest>& trace) {
  uint64_t references = 0;
  int64_t largest = -1;
  for (const TraceRequest& request : trace) {
    references += request.hash_ids.size();
    for (const int64_t id : request.hash_ids) largest = std::max(largest, id);
  }
  const uint64_t below = static_cast<uint64_t>(largest) + 1;  // 0 for a trace without ids
  return below <= 2 * references + 1024 ? below : 0;
}

absl::StatusOr<std::vector<PlanResult>> PlanInOnePass(const std::vector<TraceRequest>& trace, const Profile& profile,
                                                      const std::vector<PlanConfig>& configs) {
  std::vector<PlanResult> results;
  for (const PlanConfig& config : configs) results.push_back(EmptyResult(config, profile));
  const PlanConfig& first = configs.front();
  const EstimateSource source{first.compute, /*record_alone=*/false};
  SampledStack stack(SampledStack::kUnlimitedSamples, first.use_order, DenseIds(trace));  // exact
  std::vector<uint64_t> ids;
  std::vector<SampledStack::Sampled> depths;
  for (const TraceRequest& request : trace) {
    if (results[0].context_tokens && BeyondContextWindow(request.input_length, *results[0].context_tokens)) {
      for (PlanResult& result : results) CountBeyondContext(request, result.beyond_context);
      continue;
    }
    ids.assign(request.hash_ids.begin(), request.hash_ids.end());
    stack.Reference(ids, depths);  // every block, its prefix depth: non-decreasing
    std::optional<Costed> last;  // device-only capacities that match alike cost alike: one costing
    for (PlanResult& result : results) {
      const TieredBlockCache::Match match = MatchAtDepths(depths, result.config);
      const auto blocks = static_cast<int64_t>(match.blocks * first.block_tokens);
      const bool device_only = !result.config.HasTier(1);
      if (!device_only || !last || last->facts.logical_match_tokens != std::min(blocks, request.input_length)) {
        auto costed = Cost(request, match, profile, source, result.config);
        if (!costed.ok()) return costed.status();
        last = *std::move(costed);
      }
      AddCosted(*last, result);
      if (!device_only) last.reset();  // its figures hold its tiers' reload: not another config's
    }
  }
  for (PlanResult& result : results) {
    for (const PlanTotals& tier : result.by_tier) result.total.Add(tier);
  }
  return results;
}

}  // namespace

absl::StatusOr<PlanResult> Plan(const std::vector<TraceRequest>& trace, const Profile& profile,
                                const PlanConfig& config, const PlannedRecordVisitor& each) {
  PlanResult result = EmptyResult(config, profile);
  std::vector<uint64_t> capacity_blocks;
  for (size_t t = 0; t < kPlanTierCount && config.HasTier(t); ++t) capacity_blocks.push_back(config.CapacityBlocks(t));
  TieredBlockCache cache(std::move(capacity_blocks), config.use_order);
  const EstimateSource source{config.compute, /*record_alone=*/false};
  for (const TraceRequest& request : trace) {
    if (result.context_tokens && BeyondContextWindow(request.input_length, *result.context_tokens)) {
      CountBeyondContext(request, result.beyond_context);
      continue;
    }
    auto costed = Cost(request, cache.Lookup(request.hash_ids), profile, source, config);
    if (!costed.ok()) return costed.status();
    if (each) each(request, costed->facts);
    AddCosted(*costed, result);
    cache.Use(request.hash_ids);
  }
  for (const PlanTotals& tier : result.by_tier) result.total.Add(tier);
  return result;
}

absl::StatusOr<std::vector<PlanResult>> PlanAll(const std::vector<TraceRequest>& trace, const Profile& profile,
                                                const std::vector<PlanConfig>& configs) {
  if (configs.empty()) return std::vector<PlanResult>{};
  if (OnePass(configs)) return PlanInOnePass(trace, profile, configs);
  std::vector<PlanResult> results;
  for (const PlanConfig& config : configs) {
    auto result = Plan(trace, profile, config);
    if (!result.ok()) return result.status();
    results.push_back(*std::move(result));
  }
  return results;
}

}  // namespace kvledger
