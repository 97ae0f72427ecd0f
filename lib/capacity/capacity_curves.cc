#include "lib/capacity/capacity_curves.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/accounting/figure_schema.h"
#include "lib/cost_model/model_shape.h"

namespace kvledger {
namespace {

void AddCurve(const CapacityCurves::ModelCurve& from, CapacityCurves::ModelCurve& to) {
  to.requests += from.requests;
  to.seconds_known += from.seconds_known;
  to.untracked += from.untracked;
  to.released_caches += from.released_caches;
  to.sampled += from.sampled;
  to.forgotten_blocks += from.forgotten_blocks;
  to.prompt_tokens += from.prompt_tokens;
  to.attention_baseline_flops += from.attention_baseline_flops;
  to.prefill_baseline_flops += from.prefill_baseline_flops;
  to.rungs.resize(std::max(to.rungs.size(), from.rungs.size()));
  for (size_t i = 0; i < from.rungs.size(); ++i) {
    to.rungs[i].match_tokens += from.rungs[i].match_tokens;
    to.rungs[i].attention_avoided_flops += from.rungs[i].attention_avoided_flops;
    to.rungs[i].prefill_avoided_flops += from.rungs[i].prefill_avoided_flops;
    to.rungs[i].recompute_avoided_nanos += from.rungs[i].recompute_avoided_nanos;
  }
  to.tier_no_device += from.tier_no_device;
  to.tier_rungs.resize(std::max(to.tier_rungs.size(), from.tier_rungs.size()));
  for (size_t i = 0; i < from.tier_rungs.size(); ++i) {
    for (size_t f = 0; f < kTierFieldCount; ++f) to.tier_rungs[i][f] += from.tier_rungs[i][f];
  }
}

// Moves the whole units of an estimate's running `carry` into a counter that only rises.
void MoveWhole(double& carry, double add, Uint128& counter) {
  carry += add;
  if (carry < 1) return;
  const double whole = std::floor(carry);
  counter += static_cast<Uint128>(whole);
  carry -= whole;
}

}  // namespace

RecordFacts FactsAtMatch(absl::string_view model, int64_t prompt_tokens, std::optional<int64_t> output_tokens,
                         int64_t match_tokens) {
  RecordFacts facts;
  facts.model = model;
  facts.tier_value = static_cast<int>(match_tokens > 0 ? Tier::kDevice : Tier::kNone);
  facts.prompt_tokens = prompt_tokens;
  facts.logical_match_tokens = match_tokens;
  facts.output_tokens = output_tokens;
  return facts;
}

absl::StatusOr<std::unique_ptr<CapacityCurves>> CapacityCurves::Create(std::vector<uint64_t> capacity_tokens,
                                                                       size_t slot_count, CurveLimits limits,
                                                                       std::function<double()> clock) {
  capacity_tokens.erase(std::remove(capacity_tokens.begin(), capacity_tokens.end(), kUnlimited),
                        capacity_tokens.end());
  if (const std::string rule = LadderRule(capacity_tokens); !rule.empty()) return absl::InvalidArgumentError(rule);
  capacity_tokens.push_back(kUnlimited);
  return std::unique_ptr<CapacityCurves>(
      new CapacityCurves(std::move(capacity_tokens), slot_count, limits, std::move(clock)));
}

CapacityCurves::CapacityCurves(std::vector<uint64_t> capacities, size_t slot_count, CurveLimits limits,
                               std::function<double()> clock)
    : capacities_(std::move(capacities)), limits_(limits), clock_(std::move(clock)), slots_(slot_count) {}

std::shared_ptr<CapacityCurves::Cache> CapacityCurves::FindCache(uint32_t slot, absl::string_view cache_id,
                                                                 std::optional<uint32_t>* released) {
  const double now = clock_();
  MutexLock lock(&caches_mu_);
  CacheKey key(slot, std::string(cache_id));
  if (auto it = caches_.find(key); it != caches_.end()) {
    it->second.last_active = now;
    by_activity_.splice(by_activity_.end(), by_activity_, it->second.in_order);  // the most recent now
    return it->second.cache;
  }
  if (caches_.size() >= limits_.max_caches) {
    if (by_activity_.empty()) return nullptr;
    const auto oldest = caches_.find(by_activity_.front());
    if (now - oldest->second.last_active < limits_.cache_idle_seconds) return nullptr;
    *released = oldest->first.first;
    caches_.erase(oldest);  // its stack goes once no replay holds it
    by_activity_.pop_front();
  }
  Place& place = caches_[key];
  place.cache = std::make_shared<Cache>(limits_.max_samples_per_cache, limits_.use_order);
  place.last_active = now;
  place.in_order = by_activity_.insert(by_activity_.end(), std::move(key));
  return place.cache;
}

namespace {

CapacityCurves::Rung RungAt(const RecordFacts& facts, int64_t match, const Profile& profile,
                            const EstimateSource& source, bool seconds_known, RecordFigures* all = nullptr) {
  const RecordFigures figures =
      Derive(FactsAtMatch(facts.model, facts.prompt_tokens, facts.output_tokens, match), profile, source);
  CapacityCurves::Rung rung;
  rung.match_tokens = figures.logical_match_tokens;
  rung.attention_avoided_flops = figures.ReusedAttentionFlops();
  rung.prefill_avoided_flops = figures.ReusedPrefillFlops();
  if (seconds_known && figures.estimated_recompute_seconds.has_value()) {
    rung.recompute_avoided_nanos = ToNanoUnits(figures.estimated_recompute_seconds.value());
  }
  if (all != nullptr) *all = figures;
  return rung;
}


}  // namespace

CapacityCurves::ModelCurve CapacityCurves::Figures(const RecordFacts& facts, absl::Span<const uint64_t> prefix_depths,
                                                   const Profile& profile, const EstimateSource& source) const {
  const auto block = static_cast<uint64_t>(*facts.block_tokens);
  std::vector<int64_t> matches;  // the logical match at each capacity, non-decreasing
  for (uint64_t capacity : capacities_) {
    const auto matched = static_cast<uint64_t>(
        std::upper_bound(prefix_depths.begin(), prefix_depths.end(), DepthWithin(capacity, block)) -
        prefix_depths.begin());
    matches.push_back(static_cast<int64_t>(std::min(matched * block, static_cast<uint64_t>(facts.prompt_tokens))));
  }
  ModelCurve delta;
  delta.requests = 1;
  delta.rungs.resize(capacities_.size());
  for (size_t i = 0; i < matches.size();) {
    RecordFigures figures;
    const Rung rung = RungAt(facts, matches[i], profile, source, source.live.has_value(), &figures);
    if (i == 0) {
      delta.prompt_tokens = figures.prompt_tokens;
      delta.attention_baseline_flops = figures.attention_baseline_flops;
      delta.prefill_baseline_flops = figures.prefill_baseline_flops;
      delta.seconds_known = source.live.has_value() && figures.estimated_recompute_seconds.has_value() ? 1 : 0;
    }
    // Capacities that match alike cost alike: one Derive for the run.
    for (const int64_t match = matches[i]; i < matches.size() && matches[i] == match; ++i) {
      delta.rungs[i] = rung;
      if (delta.seconds_known == 0) delta.rungs[i].recompute_avoided_nanos = 0;
    }
  }
  return delta;
}

namespace {

std::array<double, 4> AsDoubles(const CapacityCurves::Rung& r) {
  return {Uint128ToDouble(r.match_tokens), Uint128ToDouble(r.attention_avoided_flops),
          Uint128ToDouble(r.prefill_avoided_flops), Uint128ToDouble(r.recompute_avoided_nanos)};
}

Uint128& Field(CapacityCurves::Rung& r, size_t f) {
  Uint128* fields[] = {&r.match_tokens, &r.attention_avoided_flops, &r.prefill_avoided_flops,
                       &r.recompute_avoided_nanos};
  return *fields[f];
}

}  // namespace

CapacityCurves::ModelCurve CapacityCurves::SampledFigures(const RecordFacts& facts,
                                                          absl::Span<const SampledStack::Sampled> sampled, double rate,
                                                          const Profile& profile, const EstimateSource& source,
                                                          Estimate& estimate) const {
  ModelCurve delta = Figures(facts, {}, profile, source);  // the baselines
  delta.sampled = 1;
  delta.rungs.assign(capacities_.size(), Rung{});
  const bool seconds = delta.seconds_known != 0;
  const auto block = static_cast<uint64_t>(*facts.block_tokens);
  const auto prompt = static_cast<uint64_t>(facts.prompt_tokens);
  const std::array<double, 4> none = AsDoubles(RungAt(facts, 0, profile, source, seconds));
  // SHARDS-adj: what every id's share adds up to (the record matched through its last id), less the
  // sampled shares scaled up, is put at the smallest depth: every capacity gets it.
  const auto covered = static_cast<int64_t>(std::min(facts.prefix_block_ids.size() * block, prompt));
  std::array<double, 4> adjust = AsDoubles(RungAt(facts, covered, profile, source, seconds));
  for (size_t f = 0; f < adjust.size(); ++f) adjust[f] -= none[f];
  estimate.assign(capacities_.size(), {0, 0, 0, 0});
  for (const SampledStack::Sampled& s : sampled) {
    if (s.position * block >= prompt) break;
    // This block's share: the record matched through it minus the record matched up to it.
    const auto from = static_cast<int64_t>(s.position * block);
    const auto to = static_cast<int64_t>(std::min((s.position + uint64_t{1}) * block, prompt));
    const std::array<double, 4> low = AsDoubles(RungAt(facts, from, profile, source, seconds));
    const std::array<double, 4> high = AsDoubles(RungAt(facts, to, profile, source, seconds));
    // The smallest capacity the block's depth reaches; every larger one gets its share too (summed below).
    size_t r = 0;
    while (r < capacities_.size() && s.depth > DepthWithin(capacities_[r], block)) ++r;
    for (size_t f = 0; f < adjust.size(); ++f) {
      const double share = (high[f] - low[f]) / rate;
      adjust[f] -= share;
      if (r < capacities_.size()) estimate[r][f] += share;
    }
  }
  for (size_t r = 0; r < capacities_.size(); ++r) {
    for (size_t f = 0; f < adjust.size(); ++f) estimate[r][f] += r == 0 ? adjust[f] : estimate[r - 1][f];
  }
  return delta;
}

void CapacityCurves::Add(uint32_t slot, const ModelCurve& delta, const Estimate& estimate,
                         const TierEstimate& tier_estimate) {
  Slot& totals = slots_[slot];
  MutexLock lock(&totals.mu);
  AddCurve(delta, totals.curve);
  if (!estimate.empty()) {
    totals.carry.resize(capacities_.size(), {0, 0, 0, 0});
    totals.curve.rungs.resize(capacities_.size());
    for (size_t r = 0; r < capacities_.size(); ++r) {
      for (size_t f = 0; f < 4; ++f) MoveWhole(totals.carry[r][f], estimate[r][f], Field(totals.curve.rungs[r], f));
    }
  }
  if (!tier_estimate.empty()) {
    totals.tier_carry.resize(tier_estimate.size(), {});
    totals.curve.tier_rungs.resize(tier_estimate.size(), TierRung{});
    for (size_t t = 0; t < tier_estimate.size(); ++t) {
      for (size_t f = 0; f < kTierFieldCount; ++f) {
        MoveWhole(totals.tier_carry[t][f], tier_estimate[t][f], totals.curve.tier_rungs[t][f]);
      }
    }
  }
}

namespace {

// A record of reuse distances (docs/cost-model.md §14): the prefix depths they give, a hit as deep
// as the cache (so capacities below it read it as a miss), an eviction d deep beyond it.
std::vector<uint64_t> DepthsFromDistances(const RecordFacts& facts) {
  const auto capacity = static_cast<uint64_t>(*facts.cache_capacity_blocks);
  std::vector<uint64_t> depths;
  uint64_t deepest = 0;
  for (uint64_t d : facts.prefix_block_reuse_distances) {
    const uint64_t depth = d == kNeverSeenDistance || d > kUnlimited - 1 - capacity ? kUnlimited
                                                                                             : capacity + d;
    deepest = std::max(deepest, depth);
    depths.push_back(deepest);
  }
  return depths;
}

}  // namespace

namespace {

// A prefix's figures at one match, as a second tier weighs them.
struct AtMatch {
  Uint128 tokens = 0, attention = 0, prefill = 0, bytes = 0;
  std::optional<double> recompute_seconds;  // with a live compute model only, as the curves' seconds
};

AtMatch ValuesAt(const RecordFacts& facts, int64_t match, const Profile& profile, const EstimateSource& source) {
  const RecordFigures f =
      Derive(FactsAtMatch(facts.model, facts.prompt_tokens, facts.output_tokens, match), profile, source);
  AtMatch at{f.logical_match_tokens, f.ReusedAttentionFlops(), f.ReusedPrefillFlops(), f.reused_bytes, std::nullopt};
  if (source.live) at.recompute_seconds = f.estimated_recompute_seconds;
  return at;
}

// The prompt tokens a cache holding the depths up to `deepest` matches, from non-decreasing prefix depths.
int64_t MatchWithin(absl::Span<const uint64_t> depths, uint64_t deepest, uint64_t block, int64_t prompt) {
  const auto blocks = static_cast<uint64_t>(std::upper_bound(depths.begin(), depths.end(), deepest) - depths.begin());
  return static_cast<int64_t>(std::min(blocks * block, static_cast<uint64_t>(prompt)));
}

// What the engine does with a tier's part of a request (its bytes and recompute seconds), into `out`
// (TierField order, one request's worth; `tokens` the part's tokens).
template <typename T>
void Choose(double tokens, double bytes, double recompute_seconds, double bandwidth, double wait, T& out) {
  const TierReload c = ChooseTierReload(bytes, recompute_seconds, bandwidth, wait);
  out[kTierSecondsKnown] = 1;
  if (c.slower) {
    out[kTierSlowerRequests] = 1;
    out[kTierSlowerTokens] = static_cast<typename T::value_type>(tokens);
    out[kTierSlowerExcessNanos] = static_cast<typename T::value_type>(std::llround(c.ExcessSeconds() * 1e9));
  } else {
    out[kTierRecomputeNanos] = static_cast<typename T::value_type>(std::llround(c.recompute_seconds * 1e9));
    out[kTierReloadNanos] = static_cast<typename T::value_type>(std::llround(c.reload_seconds * 1e9));
  }
}

}  // namespace

std::optional<CapacityCurves::TierPlace> CapacityCurves::TierPlaceOf(const RecordFacts& facts, const Profile& profile,
                                                                      ModelCurve& delta) const {
  const TierOptions& tiers = limits_.tiers;
  if (tiers.sizes.empty()) return std::nullopt;
  TierPlace place;
  const auto block = static_cast<uint64_t>(*facts.block_tokens);
  place.device_blocks = facts.cache_capacity_blocks ? static_cast<uint64_t>(*facts.cache_capacity_blocks)
                                                    : tiers.device_tokens / block;
  if (place.device_blocks == 0) {
    delta.tier_no_device = 1;
    return std::nullopt;
  }
  const uint64_t block_bytes = block * BytesPerCachedToken(profile.shape());
  for (const TierSize& size : tiers.sizes) {
    const uint64_t blocks = size.Blocks(block_bytes);
    if (tiers.inclusive) {
      place.deepest.push_back(std::max(place.device_blocks, blocks));
    } else {
      place.deepest.push_back(blocks > kUnlimited - 1 - place.device_blocks ? kUnlimited - 1
                                                                           : place.device_blocks + blocks);
    }
  }
  return place;
}

double CapacityCurves::TierBandwidth(const RecordFacts& facts, const TierSize& size) const {
  std::optional<double> measured;
  if (limits_.tiers.measured_bandwidth) measured = limits_.tiers.measured_bandwidth(facts.model, size.kind);
  return measured && *measured > 0 ? *measured : size.StatedBandwidth();
}

void CapacityCurves::ExactTiers(const RecordFacts& facts, absl::Span<const uint64_t> depths, const Profile& profile,
                                const EstimateSource& source, ModelCurve& delta) const {
  const std::optional<TierPlace> place = TierPlaceOf(facts, profile, delta);
  if (!place) return;
  const std::vector<TierSize>& sizes = limits_.tiers.sizes;
  const auto block = static_cast<uint64_t>(*facts.block_tokens);
  const int64_t device_match = MatchWithin(depths, place->device_blocks, block, facts.prompt_tokens);
  // Costed only where a tier holds something beyond the device, and once per distinct match.
  std::optional<AtMatch> low;
  int64_t high_match = -1;
  AtMatch high;
  delta.tier_rungs.assign(sizes.size(), TierRung{});
  for (size_t t = 0; t < sizes.size(); ++t) {
    const int64_t match = MatchWithin(depths, place->deepest[t], block, facts.prompt_tokens);
    if (match <= device_match) continue;
    if (!low) low = ValuesAt(facts, device_match, profile, source);
    if (match != high_match) high = ValuesAt(facts, high_match = match, profile, source);
    TierRung& r = delta.tier_rungs[t];
    r[kTierMatchTokens] = high.tokens - low->tokens;
    r[kTierAttentionFlops] = high.attention - low->attention;
    r[kTierPrefillFlops] = high.prefill - low->prefill;
    r[kTierHitRequests] = 1;
    if (!high.recompute_seconds || !low->recompute_seconds) continue;
    Choose(Uint128ToDouble(r[kTierMatchTokens]), Uint128ToDouble(high.bytes - low->bytes),
           *high.recompute_seconds - *low->recompute_seconds, TierBandwidth(facts, sizes[t]), sizes[t].wait_seconds, r);
  }
}

// Under sampling each sampled block the tier holds adds its share (the prefix through it minus the
// prefix up to it) divided by the rate, as the curves' rungs do; the threshold is applied to the
// request's estimated part, and the wait charged to a request whose sampled blocks the tier holds.
void CapacityCurves::SampledTiers(const RecordFacts& facts, absl::Span<const SampledStack::Sampled> sampled,
                                  double rate, const Profile& profile, const EstimateSource& source, ModelCurve& delta,
                                  TierEstimate& estimate) const {
  const std::optional<TierPlace> place = TierPlaceOf(facts, profile, delta);
  if (!place) return;
  const std::vector<TierSize>& sizes = limits_.tiers.sizes;
  const auto block = static_cast<uint64_t>(*facts.block_tokens);
  const auto prompt = static_cast<uint64_t>(facts.prompt_tokens);
  // Per tier size: tokens, attention, prefill, bytes, recompute seconds; whether seconds are known.
  std::vector<std::array<double, 5>> parts(sizes.size(), {0, 0, 0, 0, 0});
  bool seconds = source.live.has_value();
  for (const SampledStack::Sampled& s : sampled) {
    if (s.position * block >= prompt || s.depth <= place->device_blocks) continue;
    const AtMatch from = ValuesAt(facts, static_cast<int64_t>(s.position * block), profile, source);
    const AtMatch to = ValuesAt(facts, static_cast<int64_t>(std::min((s.position + 1) * block, prompt)), profile, source);
    seconds = seconds && from.recompute_seconds && to.recompute_seconds;
    const std::array<double, 5> share = {
        Uint128ToDouble(to.tokens - from.tokens), Uint128ToDouble(to.attention - from.attention),
        Uint128ToDouble(to.prefill - from.prefill), Uint128ToDouble(to.bytes - from.bytes),
        seconds ? *to.recompute_seconds - *from.recompute_seconds : 0.0};
    for (size_t t = 0; t < sizes.size(); ++t) {
      if (s.depth > place->deepest[t]) continue;
      for (size_t f = 0; f < share.size(); ++f) parts[t][f] += share[f] / rate;
    }
  }
  estimate.assign(sizes.size(), {});
  for (size_t t = 0; t < sizes.size(); ++t) {
    if (parts[t][0] <= 0) continue;
    auto& e = estimate[t];
    e[kTierMatchTokens] = parts[t][0];
    e[kTierAttentionFlops] = parts[t][1];
    e[kTierPrefillFlops] = parts[t][2];
    e[kTierHitRequests] = 1;
    if (seconds) Choose(parts[t][0], parts[t][3], parts[t][4], TierBandwidth(facts, sizes[t]), sizes[t].wait_seconds, e);
  }
}

CapacityCurves::ModelCurve CapacityCurves::Replay(Cache& cache, const RecordFacts& facts, const Profile& profile,
                                                  const EstimateSource& source, Estimate& estimate,
                                                  TierEstimate& tier_estimate) const {
  thread_local std::vector<SampledStack::Sampled> sampled;
  thread_local std::vector<uint64_t> depths;
  double rate = 1;
  uint64_t forgotten = 0;
  {
    MutexLock lock(&cache.mu);
    const uint64_t before = cache.stack.forgotten();
    rate = cache.stack.Reference(facts.prefix_block_ids, sampled, facts.output_block_ids);
    forgotten = cache.stack.forgotten() - before;
  }
  ModelCurve delta;
  if (rate < 1) {
    delta = SampledFigures(facts, sampled, rate, profile, source, estimate);
    SampledTiers(facts, sampled, rate, profile, source, delta, tier_estimate);
  } else {
    depths.clear();  // every block sampled: the exact prefix depths
    for (const SampledStack::Sampled& s : sampled) depths.push_back(s.depth);
    delta = Figures(facts, depths, profile, source);
    ExactTiers(facts, depths, profile, source, delta);
  }
  delta.forgotten_blocks = forgotten;
  return delta;
}

void CapacityCurves::Observe(uint32_t slot, const RecordFacts& facts, const Profile& profile,
                             const EstimateSource& source) {
  if (!facts.block_tokens || slot >= slots_.size()) return;
  if (!facts.prefix_block_reuse_distances.empty() && facts.cache_capacity_blocks) {
    const std::vector<uint64_t> depths = DepthsFromDistances(facts);
    ModelCurve delta = Figures(facts, depths, profile, source);
    ExactTiers(facts, depths, profile, source, delta);
    Add(slot, delta, {}, {});
    return;
  }
  if (facts.prefix_block_ids.empty()) return;
  std::optional<uint32_t> released;
  const std::shared_ptr<Cache> cache = FindCache(slot, facts.cache_id, &released);
  if (released && *released < slots_.size()) {
    MutexLock lock(&slots_[*released].mu);
    ++slots_[*released].curve.released_caches;
  }
  ModelCurve delta;
  thread_local Estimate estimate;
  thread_local TierEstimate tier_estimate;
  estimate.clear();
  tier_estimate.clear();
  if (cache == nullptr) {
    delta.untracked = 1;
  } else {
    delta = Replay(*cache, facts, profile, source, estimate, tier_estimate);
  }
  Add(slot, delta, estimate, tier_estimate);
}

std::vector<CapacityCurves::ModelCurve> CapacityCurves::Snapshot() const {
  std::vector<uint64_t> caches(slots_.size(), 0);
  {
    MutexLock lock(&caches_mu_);
    for (const auto& [key, place] : caches_) {
      if (key.first < caches.size()) ++caches[key.first];
    }
  }
  std::vector<ModelCurve> out;
  for (size_t s = 0; s < slots_.size(); ++s) {
    MutexLock lock(&slots_[s].mu);
    const ModelCurve& curve = slots_[s].curve;
    if (curve.requests == 0 && curve.untracked == 0) continue;
    out.push_back(curve);
    out.back().model_slot = static_cast<uint32_t>(s);
    out.back().caches = caches[s];
    out.back().rungs.resize(capacities_.size());
    out.back().tier_rungs.resize(limits_.tiers.sizes.size(), TierRung{});
  }
  return out;
}

uint64_t CapacityCurves::MemoryBytes() const {
  MutexLock lock(&caches_mu_);
  uint64_t bytes = 0;
  for (const auto& [key, place] : caches_) {
    MutexLock cache_lock(&place.cache->mu);
    bytes += place.cache->stack.MemoryBytes();
  }
  return bytes;
}

}  // namespace kvledger
