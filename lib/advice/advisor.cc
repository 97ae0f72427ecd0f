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

// A choice's estimated seconds beat another's by more than the recompute estimate's stated error on
// the compute seconds between them (docs/cost-model.md §10, "Ties"): `compute` is the pass-time part
// of each (what the compute model decides), and only that part carries the model's error.
bool BeatsBeyondError(double seconds, double compute, double other_seconds, double other_compute) {
  return other_seconds - seconds > kRecomputeEstimateError * std::fabs(other_compute - compute);
}

// One choice Advise can make for the request: recompute everything (candidate -1), reload all of a
// candidate's prefix, or its partial reload (simpler first); its estimated prefill seconds and their
// pass-time part.
struct Choice {
  int candidate;
  int simplicity;  // 0 recompute, 1 reload all, 2 reload part
  double seconds, compute;
};

// The pick among `choices` (docs/cost-model.md §10, "Ties"): the fastest, unless it does not beat
// some other beyond the stated error; then the simplest (then fastest) of those it does not beat,
// and a tie. The gain is the fastest's margin over the next fastest.
struct Pick {
  const Choice* choice = nullptr;
  bool tie = false;
  std::optional<double> gain;
};
Pick PickChoice(const std::vector<Choice>& choices) {
  Pick p;
  const Choice* fastest = &*std::min_element(choices.begin(), choices.end(), [](const Choice& a, const Choice& b) {
    return a.seconds < b.seconds || (a.seconds == b.seconds && a.simplicity < b.simplicity);
  });
  p.choice = fastest;
  for (const Choice& o : choices) {
    if (&o == fastest) continue;
    p.gain = std::min(p.gain.value_or(o.seconds - fastest->seconds), o.seconds - fastest->seconds);
    if (BeatsBeyondError(fastest->seconds, fastest->compute, o.seconds, o.compute)) continue;
    p.tie = true;
    if (o.simplicity < p.choice->simplicity || (o.simplicity == p.choice->simplicity && o.seconds < p.choice->seconds)) {
      p.choice = &o;
    }
  }
  return p;
}

// A costed candidate's own choices (its prefix reloaded all or in part, or recomputed: then the whole
// prompt's pass), for a replica; `recompute_all` is T(full pass).
std::vector<Choice> CandidateChoices(const CandidateAdvice& c, int index, double recompute_all) {
  std::vector<Choice> out = {{-1, 0, recompute_all, recompute_all},
                             {index, 1, *c.prefill_seconds, *c.prefill_seconds - *c.reload_seconds}};
  if (c.partial_prefill_seconds) out.push_back({index, 2, *c.partial_prefill_seconds, *c.partial_compute_seconds});
  return out;
}

// Each candidate's expected time until its prefill is done, and the ranking (docs/cost-model.md
// §11): wait + the prefill of its pick among reloading all or part of its prefix and recomputing
// (ties go to the simpler) + the rest. When any candidate carries a wait, one without a wait is not
// ranked: its wait is unknown, not 0.
void RankReplicas(Advice& advice) {
  const bool waits_given = std::any_of(advice.candidates.begin(), advice.candidates.end(),
                                       [](const CandidateAdvice& c) { return c.wait_seconds.has_value(); });
  std::vector<size_t> known;
  std::vector<Pick> picks(advice.candidates.size());
  std::vector<std::vector<Choice>> choices(advice.candidates.size());
  for (size_t i = 0; i < advice.candidates.size(); ++i) {
    CandidateAdvice& c = advice.candidates[i];
    if (!c.prefill_seconds || !c.recompute_seconds || !advice.recompute_all_seconds) continue;
    if (waits_given && !c.wait_seconds) continue;
    const double rest = *c.prefill_seconds - *c.reload_seconds;
    choices[i] = CandidateChoices(c, static_cast<int>(i), *c.recompute_seconds + rest);
    picks[i] = PickChoice(choices[i]);
    c.reload = picks[i].choice->candidate >= 0;
    c.expected_seconds = c.wait_seconds.value_or(0) + picks[i].choice->seconds;
    known.push_back(i);
  }
  std::stable_sort(known.begin(), known.end(), [&](size_t a, size_t b) {
    return *advice.candidates[a].expected_seconds < *advice.candidates[b].expected_seconds;
  });
  for (size_t r = 0; r < known.size(); ++r) advice.candidates[known[r]].rank = static_cast<uint32_t>(r + 1);
  if (!advice.by_replica || known.empty()) return;
  const size_t best = known.front();
  advice.recommended = static_cast<int>(best);
  advice.tie = picks[best].tie;
  advice.gain_seconds = picks[best].gain;
  // What reuse saves on the chosen replica against recomputing the whole prompt there.
  advice.saving_seconds = *advice.recompute_all_seconds - picks[best].choice->seconds;
}

// Without replicas: the pick (PickChoice) among recomputing everything and every costed candidate's
// choices, when any is known.
void RecommendTier(Advice& advice) {
  if (!advice.recompute_all_seconds || advice.by_replica) return;
  std::vector<Choice> choices = {{-1, 0, *advice.recompute_all_seconds, *advice.recompute_all_seconds}};
  for (size_t i = 0; i < advice.candidates.size(); ++i) {
    const CandidateAdvice& c = advice.candidates[i];
    if (!c.prefill_seconds) continue;
    const auto own = CandidateChoices(c, static_cast<int>(i), *advice.recompute_all_seconds);
    choices.insert(choices.end(), own.begin() + 1, own.end());
  }
  if (!advice.candidates.empty() && choices.size() == 1) return;  // no candidate could be costed
  const Pick pick = PickChoice(choices);
  advice.recommended = pick.choice->candidate;
  advice.tie = pick.tie;
  advice.gain_seconds = pick.gain;
  advice.saving_seconds = *advice.recompute_all_seconds - pick.choice->seconds;
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

// Where one question's rates come from (docs/cost-model.md §10): the fleet's by model label, this
// replica's by label slot (none for a model without a slot of its own), the profile's figures.
// Advise and ReloadBreakEvenTokens both ask through it, so the gauge and Advise agree.
struct Rates {
  const FleetRates* fleet = nullptr;
  const LiveRates* live = nullptr;
  const std::string& model;
  uint32_t slot = 0;
  const Profile& profile;

  Rates(const Resolution& resolution, const std::string& name, const LiveRates* rates, const FleetRates* fleet_rates)
      : fleet(fleet_rates),
        live(resolution.label && !resolution.label->folded ? rates : nullptr),
        model(name),
        slot(live != nullptr ? resolution.label->slot : 0),
        profile(*resolution.profile) {}

  // The fleet's compute model, else this replica's live fit (every record acknowledged), else the
  // profile's stated throughput.
  std::optional<ComputeTime> ComputeModel() const {
    std::optional<ComputeTime> fit = fleet != nullptr ? fleet->ComputeModel(model) : std::nullopt;
    if (!fit && live != nullptr) fit = live->ComputeModel(slot, /*current=*/true);
    return ModelComputeTime(fit, profile.prefill_flops_per_second());
  }
  RateUsed Bandwidth(Tier tier) const {
    return Choose(fleet != nullptr ? fleet->ReloadBandwidth(model, tier) : std::nullopt,
                  live != nullptr ? live->ReloadBandwidth(slot, tier) : std::nullopt, ProfileBandwidth(profile, tier));
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
CandidateAdvice Costed(const AdviceCandidateInput& in, const RecordFigures& figures, const Rates& rates,
                       const std::optional<ComputeTime>& model, const RateUsed& compute) {
  CandidateAdvice c;
  c.tier = figures.tier;
  c.logical_match_tokens = figures.logical_match_tokens;
  c.reused_tokens = figures.reused_tokens;
  c.reused_bytes = figures.reused_bytes;
  c.reused_flops = figures.ReusedPrefillFlops();
  c.bandwidth = rates.Bandwidth(c.tier);
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

// The suffix lengths a partial reload of a prefix whose suffix is at least `lo` of `n` tokens may
// stop at. Under a pass curve, T of reloading q tokens is concave in q while the suffix N - q stays
// within one segment of the knots and one tile (docs/cost-model.md §10): its minimum over such a
// piece is at an end, and over a segment's tile ends at the segment's. So: each knot k, the first
// suffix of the tile above it (k + 1) and of the last tile below it (k - tile + 1), and the first
// tile end above `lo` and the suffix just past it.
std::vector<uint64_t> PartialReloadSuffixes(uint64_t lo, uint64_t n) {
  std::vector<uint64_t> out;
  auto add = [&](uint64_t k) {
    if (k > lo && k < n) out.push_back(k);
  };
  for (const uint64_t k : kPassKnotTokens) {
    add(k);
    add(k + 1);
    if (k >= kPassTileTokens) add(k - kPassTileTokens + 1);
  }
  const uint64_t above = (lo / kPassTileTokens + 1) * kPassTileTokens;
  add(above);
  add(above + 1);
  return out;
}

// Records the best partial reload of the candidate (see PartialReloadSuffixes) when it beats the
// better of reloading all of the prefix and recomputing everything beyond the stated error: a gain
// inside it is a tie, and the simpler choice stands.
void AddPartialReload(RecordFacts facts, const absl::StatusOr<Resolution>& model, const ComputeTime& compute,
                      double recompute_all_seconds, CandidateAdvice& c) {
  if (!compute.curve || !c.bandwidth.rate || !c.prefill_seconds) return;
  const uint64_t n = static_cast<uint64_t>(facts.prompt_tokens);
  const bool all = *c.prefill_seconds < recompute_all_seconds;
  const double simple = all ? *c.prefill_seconds : recompute_all_seconds;
  const double simple_compute = all ? *c.prefill_seconds - *c.reload_seconds : recompute_all_seconds;
  double best = simple, best_compute = simple_compute;
  std::optional<uint64_t> best_tokens;
  facts.recoverable_tokens.reset();
  const uint64_t step = BoundaryStep(*model);
  for (const uint64_t k : PartialReloadSuffixes(n - c.reused_tokens, n)) {
    for (const uint64_t q : {n - k, n - k + step}) {  // the boundaries at or below, and above, N - k
      if (q >= c.reused_tokens) continue;
      facts.logical_match_tokens = static_cast<int64_t>(q);
      auto figures = Evaluate(facts, model);
      if (!figures.ok() || figures->reused_tokens == 0) continue;
      const double pass = compute.PassSeconds(figures->SuffixPass());
      const double seconds = Uint128ToDouble(figures->reused_bytes) / *c.bandwidth.rate + pass;
      if (seconds < best) {
        best = seconds;
        best_compute = pass;
        best_tokens = figures->reused_tokens;
      }
    }
  }
  if (best_tokens && BeatsBeyondError(best, best_compute, simple, simple_compute)) {
    c.partial_reload_tokens = best_tokens;
    c.partial_prefill_seconds = best;
    c.partial_compute_seconds = best_compute;
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

std::optional<uint64_t> ReloadBreakEvenTokens(const ModelRegistry& registry, const std::string& model, Tier tier,
                                              const LiveRates* rates, const FleetRates* fleet) {
  const absl::StatusOr<Resolution> resolution = registry.Resolve(model);
  if (!resolution.ok()) return std::nullopt;
  const Rates sources(*resolution, model, rates, fleet);
  const std::optional<ComputeTime> compute = sources.ComputeModel();
  const RateUsed bandwidth = sources.Bandwidth(tier);
  if (!compute || !bandwidth.rate) return std::nullopt;
  return BreakEvenTokens(resolution, tier, *bandwidth.rate, *compute);
}

RateUsed ReloadBandwidthUsed(const ModelRegistry& registry, const std::string& model, Tier tier, const LiveRates* rates,
                             const FleetRates* fleet) {
  const absl::StatusOr<Resolution> resolution = registry.Resolve(model);
  if (!resolution.ok()) return RateUsed{};
  return Rates(*resolution, model, rates, fleet).Bandwidth(tier);
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
  const Rates sources(*model, request.model, rates, fleet);
  Advice advice;
  advice.model = request.model;
  advice.prompt_tokens = baseline->prompt_tokens;
  advice.prefill_flops = baseline->prefill_baseline_flops;
  const std::optional<ComputeTime> compute = sources.ComputeModel();
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
    advice.candidates.push_back(Costed(in, *figures, sources, compute, advice.compute));
    if (compute) AddPartialReload(facts, model, *compute, *advice.recompute_all_seconds, advice.candidates.back());
  }
  AddBreakEvens(model, compute, advice);
  RecommendTier(advice);
  RankReplicas(advice);
  return advice;
}

}  // namespace kvledger
