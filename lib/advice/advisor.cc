#include "lib/advice/advisor.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/accounting/ledger.h"
#include "lib/cost_model/number_format.h"

namespace kvledger {
namespace {

double ProfileBandwidth(const Profile& profile, Tier tier) {
  const auto& serving = profile.definition().serving();
  switch (tier) {
    case Tier::kDevice:
      return serving.device_reload_bytes_per_second();
    case Tier::kHost:
      return serving.host_reload_bytes_per_second();
    case Tier::kDisk:
      return serving.disk_reload_bytes_per_second();
    case Tier::kRemote:
      return serving.remote_reload_bytes_per_second();
    case Tier::kNone:
    case Tier::kMixed:
    case Tier::kUnknown:
      break;
  }
  return 0;
}

// The fleet's rate when there is one (fleet_rates.h), else this replica's live rate, else the
// profile's figure when it states one (> 0).
RateUsed Choose(const std::optional<RateEvidence>& fleet, const std::optional<RateEvidence>& live, double stated) {
  RateUsed used;
  const bool from_fleet = fleet && fleet->rate > 0;
  if (from_fleet || (live && live->rate > 0)) {
    const RateEvidence& e = from_fleet ? *fleet : *live;
    used.basis = from_fleet ? Basis::kFleet : Basis::kLive;
    used.rate = e.rate;
    used.samples = e.samples;
    used.weight = e.weight;
  } else if (stated > 0) {
    used.basis = Basis::kProfile;
    used.rate = stated;
  }
  return used;
}

std::optional<double> Seconds(Uint128 amount, const RateUsed& rate) {
  if (amount == 0) return 0.0;
  if (!rate.rate) return std::nullopt;
  return Uint128ToDouble(amount) / *rate.rate;
}

// The compute-time model as a rate with its fixed cost per pass.
RateUsed ComputeRate(const std::optional<ComputeTime>& model) {
  RateUsed used;
  if (!model) return used;
  used.basis = model->basis;
  used.rate = model->FlopsPerSecond();
  used.samples = model->samples;
  used.weight = model->weight;
  used.fixed_seconds = model->fixed_seconds;
  return used;
}

}  // namespace

std::string Advice::recommendation() const {
  if (!recommended) return "";
  if (*recommended < 0) return "recompute";
  const CandidateAdvice& c = candidates[static_cast<size_t>(*recommended)];
  return by_replica && !c.reload ? "recompute" : TierLabel(c.tier);
}

namespace {

// The least prefill seconds of a costed candidate: reloading all of its prefix, part of it (under a
// pass curve), or `recompute` (recomputing it instead: the caller's figure).
double BestPrefillSeconds(const CandidateAdvice& c, double recompute) {
  double best = std::min(*c.prefill_seconds, recompute);
  if (c.partial_prefill_seconds) best = std::min(best, *c.partial_prefill_seconds);
  return best;
}

// Each candidate's expected time until its prefill is done, and the ranking (docs/cost-model.md
// §11): wait + the better of reloading and recomputing its prefix + the rest of the prefill. When
// any candidate carries a wait, one without a wait is not ranked: its wait is unknown, not 0.
void RankReplicas(Advice& advice) {
  const bool waits_given = std::any_of(advice.candidates.begin(), advice.candidates.end(),
                                       [](const CandidateAdvice& c) { return c.wait_seconds.has_value(); });
  std::vector<size_t> known;
  for (size_t i = 0; i < advice.candidates.size(); ++i) {
    CandidateAdvice& c = advice.candidates[i];
    if (!c.prefill_seconds || !c.recompute_seconds || !advice.recompute_all_seconds) continue;
    if (waits_given && !c.wait_seconds) continue;
    const double rest = *c.prefill_seconds - *c.reload_seconds;
    // A tie moves no bytes; a partial reload is only kept when it is the fastest.
    c.reload = *c.reload_seconds < *c.recompute_seconds || c.partial_prefill_seconds.has_value();
    c.expected_seconds = c.wait_seconds.value_or(0) + BestPrefillSeconds(c, *c.recompute_seconds + rest);
    known.push_back(i);
  }
  std::stable_sort(known.begin(), known.end(), [&](size_t a, size_t b) {
    return *advice.candidates[a].expected_seconds < *advice.candidates[b].expected_seconds;
  });
  for (size_t r = 0; r < known.size(); ++r) advice.candidates[known[r]].rank = static_cast<uint32_t>(r + 1);
  if (!advice.by_replica || known.empty()) return;
  const CandidateAdvice& best = advice.candidates[known.front()];
  advice.recommended = static_cast<int>(known.front());
  // What reuse saves on the chosen replica against recomputing the whole prompt there.
  advice.saving_seconds = *advice.recompute_all_seconds - BestPrefillSeconds(best, *advice.recompute_all_seconds);
}

}  // namespace

std::string TooManyCandidatesMessage(size_t candidates) {
  return absl::StrCat("candidates (", candidates, " of them): at most ", kMaxAdviceCandidates);
}

namespace {

// A candidate's own inputs, before it is costed; `at` prefixes the field ("candidates[1].").
absl::Status CheckCandidate(const AdviceCandidateInput& in, const std::string& at) {
  if (!IsSourceTierValue(in.tier_value)) {
    return absl::InvalidArgumentError(absl::StrCat(at, "tier = ", in.tier_value,
                                                   ": must be the tier holding the prefix: 1 (device), 2 (host), "
                                                   "3 (disk) or 4 (remote)"));
  }
  if (in.logical_match_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, "logical_match_tokens = ", in.logical_match_tokens, ": must be >= 1 (a cached prefix)"));
  }
  if (in.wait_seconds && !(std::isfinite(*in.wait_seconds) && *in.wait_seconds >= 0 && *in.wait_seconds <= 86400)) {
    return absl::InvalidArgumentError(absl::StrCat(at, "wait_seconds = ", FormatDouble(*in.wait_seconds),
                                                   ": must be finite, >= 0 and <= 86400 seconds"));
  }
  if (in.replica.size() > kMaxReplicaIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat(at, "replica (", in.replica.size(), " bytes): must be at most ",
                                                   kMaxReplicaIdBytes, " bytes"));
  }
  return absl::OkStatus();
}

// Where one request's rates come from: the fleet's by model label, this replica's by label slot.
struct Rates {
  const FleetRates* fleet = nullptr;
  const LiveRates* live = nullptr;  // null when the model has no slot of its own
  const std::string& model;
  uint32_t slot = 0;

  std::optional<ComputeTime> ComputeModel() const {
    std::optional<ComputeTime> fit = fleet != nullptr ? fleet->ComputeModel(model) : std::nullopt;
    if (!fit && live != nullptr) fit = live->ComputeModel(slot, /*current=*/true);  // every record acknowledged
    return fit;
  }
};

// Seconds recomputing the reusable prefix of `p` tokens saves over reloading it after `wait`: > 0
// where reloading pays. Nothing when `p` is not a valid prefix of the model.
// The figures of reusing all `p` tokens of a `p`-token prompt from `tier`: what a break-even weighs.
Checked<RecordFigures> PrefixFigures(const absl::StatusOr<Resolution>& model, Tier tier, uint64_t p) {
  RecordFacts facts;
  facts.model = model->profile->name();
  facts.tier_value = static_cast<int>(tier);
  facts.prompt_tokens = static_cast<int64_t>(p);
  facts.logical_match_tokens = static_cast<int64_t>(p);
  return Evaluate(facts, model);
}

std::optional<double> ReloadGain(const absl::StatusOr<Resolution>& model, Tier tier, uint64_t p, double bandwidth,
                                 const ComputeTime& compute, double wait) {
  auto figures = PrefixFigures(model, tier, p);
  if (!figures.ok()) return std::nullopt;
  return compute.RecomputeSeconds(figures->FullPass(), figures->SuffixPass()) - wait -
         Uint128ToDouble(figures->reused_bytes) / bandwidth;
}

// One candidate costed from its figures and the rates (docs/cost-model.md §10).
CandidateAdvice Costed(const AdviceCandidateInput& in, const RecordFigures& figures, const Profile& profile,
                       const Rates& rates, const std::optional<ComputeTime>& model, const RateUsed& compute) {
  CandidateAdvice c;
  c.tier = figures.tier;
  c.logical_match_tokens = figures.logical_match_tokens;
  c.reused_tokens = figures.reused_tokens;
  c.reused_bytes = figures.reused_bytes;
  c.reused_flops = figures.ReusedPrefillFlops();
  c.bandwidth = Choose(rates.fleet != nullptr ? rates.fleet->ReloadBandwidth(rates.model, c.tier) : std::nullopt,
                       rates.live != nullptr ? rates.live->ReloadBandwidth(rates.slot, c.tier) : std::nullopt,
                       ProfileBandwidth(profile, c.tier));
  c.reload_seconds = Seconds(c.reused_bytes, c.bandwidth);
  if (model) {
    c.recompute_seconds = model->RecomputeSeconds(figures.FullPass(), figures.SuffixPass());
    if (c.reload_seconds) c.prefill_seconds = *c.reload_seconds + model->PassSeconds(figures.SuffixPass());
  }
  // Nothing to reload needs no bandwidth; otherwise the weaker of the two rates.
  c.basis = c.reused_bytes == 0 ? compute.basis : std::min(c.bandwidth.basis, compute.basis);
  c.replica = in.replica;
  c.wait_seconds = in.wait_seconds;
  return c;
}

// The coarsest boundary spacing of the model's layer groups: one step up from any resumable boundary
// reaches the next.
uint64_t BoundaryStep(const Resolution& model) {
  uint64_t step = 1;
  for (const auto& group : model.profile->shape().groups) step = std::max(step, group.alignment_tokens);
  return step;
}

// Under a pass curve, T(q) of reloading q tokens is concave only while the suffix N - q stays within
// one segment of h (docs/cost-model.md §10), so besides all and none the best q is a resumable
// boundary next to a suffix length at a knot: the boundary at or below N - k (and the next one up,
// while below P_eff) for each knot k between N - P_eff and N. Records the best of those when it
// beats both reloading all of the prefix and recomputing everything.
void AddPartialReload(RecordFacts facts, const absl::StatusOr<Resolution>& model, const ComputeTime& compute,
                      double recompute_all_seconds, CandidateAdvice& c) {
  if (!compute.curve || !c.bandwidth.rate || !c.prefill_seconds) return;
  const uint64_t n = static_cast<uint64_t>(facts.prompt_tokens);
  double best = std::min(*c.prefill_seconds, recompute_all_seconds);
  facts.recoverable_tokens.reset();
  const uint64_t step = BoundaryStep(*model);
  for (const uint64_t k : kPassKnotTokens) {
    if (k <= n - c.reused_tokens || k >= n) continue;
    for (const uint64_t q : {n - k, n - k + step}) {  // the boundaries at or below, and above, N - k
      if (q >= c.reused_tokens) continue;
      facts.logical_match_tokens = static_cast<int64_t>(q);
      auto figures = Evaluate(facts, model);
      if (!figures.ok() || figures->reused_tokens == 0) continue;
      const double seconds =
          Uint128ToDouble(figures->reused_bytes) / *c.bandwidth.rate + compute.PassSeconds(figures->SuffixPass());
      if (seconds < best) {
        best = seconds;
        c.partial_reload_tokens = figures->reused_tokens;
        c.partial_prefill_seconds = seconds;
      }
    }
  }
}

// Each candidate's break-even with its bandwidth, the compute rate and its wait; computed once per
// (tier, bandwidth, wait), since candidates of one tier and wait share it.
void AddBreakEvens(const absl::StatusOr<Resolution>& model, const std::optional<ComputeTime>& compute,
                   Advice& advice) {
  if (!compute) return;
  struct Known {
    Tier tier;
    double bandwidth, wait;
    std::optional<uint64_t> tokens;
  };
  std::vector<Known> known;
  for (CandidateAdvice& c : advice.candidates) {
    if (!c.bandwidth.rate) continue;
    const double wait = c.wait_seconds.value_or(0);
    auto same = std::find_if(known.begin(), known.end(), [&](const Known& k) {
      return k.tier == c.tier && k.bandwidth == *c.bandwidth.rate && k.wait == wait;
    });
    if (same == known.end()) {
      known.push_back({c.tier, *c.bandwidth.rate, wait,
                       BreakEvenTokens(model, c.tier, *c.bandwidth.rate, *compute, wait)});
      same = known.end() - 1;
    }
    c.break_even_tokens = same->tokens;
  }
}

// Without replicas: the candidate whose prefill is fastest, or recomputing, when any is known.
void RecommendTier(Advice& advice) {
  if (!advice.recompute_all_seconds || advice.by_replica) return;
  int best = -1;
  double best_seconds = *advice.recompute_all_seconds;
  bool any_known = advice.candidates.empty();
  for (size_t i = 0; i < advice.candidates.size(); ++i) {
    if (!advice.candidates[i].prefill_seconds) continue;
    const double seconds = BestPrefillSeconds(advice.candidates[i], best_seconds);
    any_known = true;
    if (seconds < best_seconds) {  // a tie keeps the choice that moves no bytes
      best = static_cast<int>(i);
      best_seconds = seconds;
    }
  }
  if (any_known) {
    advice.recommended = best;
    advice.saving_seconds = *advice.recompute_all_seconds - best_seconds;
  }
}

}  // namespace

std::optional<uint64_t> BreakEvenTokens(const absl::StatusOr<Resolution>& model, Tier tier, double bytes_per_second,
                                        const ComputeTime& compute, double wait_seconds) {
  if (!model.ok() || !(bytes_per_second > 0) || !(wait_seconds >= 0)) return std::nullopt;
  // Reloading pays for good at p: it pays there, and the gain does not fall at the next boundary
  // (a convex gap past its minimum only grows). False, then true from p* on.
  const uint64_t step = BoundaryStep(*model);
  auto pays_for_good = [&](uint64_t p) {
    const auto here = ReloadGain(model, tier, p, bytes_per_second, compute, wait_seconds);
    const auto next = ReloadGain(model, tier, std::min(p + step, kMaxTokens), bytes_per_second, compute, wait_seconds);
    return here && next && *here > 0 && *next >= *here;
  };
  if (!pays_for_good(kMaxTokens)) return std::nullopt;
  uint64_t lo = 1, hi = kMaxTokens;  // pays_for_good(hi); the answer is in [lo, hi]
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (pays_for_good(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return PrefixFigures(model, tier, lo)->reused_tokens;
}

absl::StatusOr<Advice> Advise(const AdviceRequestInput& request, const ModelRegistry& registry,
                              const LiveRates* rates, const FleetRates* fleet) {
  if (request.candidates.size() > kMaxAdviceCandidates) {
    return absl::InvalidArgumentError(TooManyCandidatesMessage(request.candidates.size()));
  }
  // The request itself, as a miss: validates model and prompt_tokens and gives F(N).
  RecordFacts whole;
  whole.model = request.model;
  whole.prompt_tokens = request.prompt_tokens;
  const absl::StatusOr<Resolution> model = registry.Resolve(request.model);
  auto baseline = Evaluate(whole, model);
  if (!baseline.ok()) return RejectionStatus(baseline.rejection());
  const Profile& profile = *model->profile;
  // Live rates are kept per label slot; a model without its own slot has none (the fleet's may).
  const bool own_slot = model->label && !model->label->folded;
  const Rates sources{fleet, own_slot ? rates : nullptr, request.model, own_slot ? model->label->slot : 0};
  Advice advice;
  advice.model = request.model;
  advice.prompt_tokens = baseline->prompt_tokens;
  advice.prefill_flops = baseline->prefill_baseline_flops;
  const std::optional<ComputeTime> compute = ModelComputeTime(sources.ComputeModel(), profile.prefill_flops_per_second());
  advice.compute = ComputeRate(compute);
  if (compute) advice.recompute_all_seconds = compute->PassSeconds(baseline->FullPass());
  for (size_t i = 0; i < request.candidates.size(); ++i) {
    const AdviceCandidateInput& in = request.candidates[i];
    const std::string at = absl::StrCat("candidates[", i, "].");
    if (absl::Status s = CheckCandidate(in, at); !s.ok()) return s;
    advice.by_replica = advice.by_replica || in.wait_seconds.has_value() || !in.replica.empty();
    RecordFacts facts = whole;
    facts.tier_value = in.tier_value;
    facts.logical_match_tokens = in.logical_match_tokens;
    facts.recoverable_tokens = in.recoverable_tokens;
    auto figures = Evaluate(facts, model);
    if (!figures.ok()) return RejectionStatus(figures.rejection(), at);
    advice.candidates.push_back(Costed(in, *figures, profile, sources, compute, advice.compute));
    if (compute) AddPartialReload(facts, model, *compute, *advice.recompute_all_seconds, advice.candidates.back());
  }
  AddBreakEvens(model, compute, advice);
  RecommendTier(advice);
  RankReplicas(advice);
  return advice;
}

}  // namespace kvledger
