// Reload or recompute (docs/cost-model.md §10): for one request about to be scheduled, which cached
// prefix to reload (from the candidate tiers that hold one) or whether to recompute it all, with
// estimated seconds for each choice and the evidence each estimate rests on.
//
// Per candidate, with P_eff its reusable boundary (alignment and recurrent checkpoints applied, as
// for a record), bytes(P_eff) its KV/state bytes, and T(pass) the compute-time model's seconds of a
// pass (§8: the live pass curve, else the affine fixed cost + FLOPs / rate):
//   reload_seconds    = bytes(P_eff) / bandwidth(model, tier)
//   recompute_seconds = T(full pass of N) - T(suffix pass of N - P_eff)   (the reused part, computed instead)
//   prefill_seconds   = reload_seconds + T(suffix pass)
// and recomputing from scratch costs T(full pass). §10 says when all or none of a candidate's prefix
// is the best choice (always under the affine model), and these are the only choices offered.
//
// A rate is the fleet's (every replica's live evidence, fleet_rates.h, when the replica reads it),
// else live (decayed records of this replica; for compute, the ready fit), else the profile's
// stated figure (no fixed cost), else unknown: an estimate that needs an unknown rate is absent,
// never guessed.
#ifndef KVLEDGER_LIB_ADVICE_ADVISOR_H_
#define KVLEDGER_LIB_ADVICE_ADVISOR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/accounting/compute_time.h"
#include "lib/accounting/fleet_rates.h"
#include "lib/accounting/live_rates.h"
#include "lib/accounting/record_facts.h"
#include "lib/profiles/model_registry.h"

namespace kvledger {

inline constexpr int kMaxAdviceCandidates = 16;

struct AdviceCandidateInput {
  int tier_value = 0;  // raw wire enum value: device, host, disk or remote
  int64_t logical_match_tokens = 0;
  std::optional<int64_t> recoverable_tokens;
  std::optional<double> wait_seconds;  // a router's expected scheduling wait on the replica
  std::string replica;                 // opaque, echoed
};

inline constexpr size_t kMaxReplicaIdBytes = 128;

struct AdviceRequestInput {
  std::string model;
  int64_t prompt_tokens = 0;
  std::vector<AdviceCandidateInput> candidates;
};

struct RateUsed {
  Basis basis = Basis::kNone;
  std::optional<double> rate;  // bytes/s or FLOP/s; absent with basis none
  uint64_t samples = 0;        // live records behind it (0 unless live)
  double weight = 0;           // their decayed weight
  double fixed_seconds = 0;    // compute only: the cost per pass (0 unless a live fit has one)
};

struct CandidateAdvice {
  Tier tier = Tier::kNone;
  uint64_t logical_match_tokens = 0;
  uint64_t reused_tokens = 0;  // P_eff
  Uint128 reused_bytes = 0;
  Uint128 reused_flops = 0;  // F(P_eff): prefill FLOPs the reload saves
  RateUsed bandwidth;
  std::optional<double> reload_seconds;
  std::optional<double> recompute_seconds;
  std::optional<double> prefill_seconds;
  Basis basis = Basis::kNone;  // the weaker of the bandwidth's and the compute rate's
  std::string replica;
  std::optional<double> wait_seconds;
  // wait + the prefill of its choice (docs/cost-model.md §11); absent when a rate it needs is
  // unknown. `reload` is whether reloading (all or part) is the choice: the faster, beyond the
  // recompute estimate's stated error (a tie recomputes).
  std::optional<double> expected_seconds;
  // BreakEvenTokens with this candidate's bandwidth, the compute rate and its wait; absent when a
  // rate is unknown or reloading never pays.
  std::optional<uint64_t> break_even_tokens;
  // Under a live pass curve (docs/cost-model.md §10): reloading only the first partial_reload_tokens
  // and computing the rest beats both reloading all of the prefix and recomputing everything; the
  // prefill with that choice. Absent otherwise.
  // Offered only when its gain over the better of the two exceeds the recompute estimate's stated
  // error on the compute seconds between them (docs/cost-model.md §10, "Ties").
  std::optional<uint64_t> partial_reload_tokens;
  std::optional<double> partial_prefill_seconds;
  std::optional<double> partial_compute_seconds;  // its pass-time part (not on the wire)
  bool reload = false;
  uint32_t rank = 0;  // 1 = fastest; 0 = not ranked
};

struct Advice {
  std::string model;
  uint64_t prompt_tokens = 0;
  Uint128 prefill_flops = 0;  // F(N)
  RateUsed compute;
  std::optional<double> recompute_all_seconds;
  std::vector<CandidateAdvice> candidates;
  // Index of the recommended candidate, -1 to recompute from scratch; absent when no choice can be
  // estimated (the compute rate is unknown, or every candidate's bandwidth is).
  std::optional<int> recommended;
  std::optional<double> saving_seconds;  // recompute_all_seconds - the recommended prefill_seconds
  // How much faster the fastest choice is estimated than the next fastest, and whether some other
  // choice is within the recompute estimate's stated error of it (docs/cost-model.md §10, "Ties"):
  // then the recommendation is the simplest of those (recompute, then reloading a whole prefix). With
  // replicas, of the first-ranked replica's choices.
  std::optional<double> gain_seconds;
  bool tie = false;
  // A candidate carried a wait or a replica: candidates are replicas, ranked by expected_seconds,
  // and the recommendation is the first-ranked one's choice.
  bool by_replica = false;
  // "host", "disk", ... for a candidate, "recompute", or "" when there is no recommendation.
  std::string recommendation() const;
};

// The break-even of reloading from one tier (docs/cost-model.md §13): the least reusable prefix, in
// tokens at a boundary `model` can resume at, from which on reloading it (after `wait_seconds`) at
// `bytes_per_second` is faster than recomputing it under `compute` — the threshold an engine's
// reload knob wants. Absent when reloading never pays up to kMaxTokens. Under the affine model the
// gap between the two, F(p) / C - wait - bytes(p) / B, is convex in p, so the prefixes where
// reloading pays for good are one interval [p*, kMaxTokens] and a binary search finds p*; under a
// pass curve the same search finds the last crossing where the gain changes sign at most once (§13).
std::optional<uint64_t> BreakEvenTokens(const absl::StatusOr<Resolution>& model, Tier tier, double bytes_per_second,
                                        const ComputeTime& compute, double wait_seconds = 0);

// BreakEvenTokens (no wait) of reloading `model`'s prefixes from `tier`, from the rates Advise
// answers with (the fleet's, else this replica's live ones, else the profile's figures): the
// kvledger_reload_break_even_tokens gauge, equal to Advise's break_even_tokens for a candidate of
// that tier without a wait. Absent when the model is unknown, a rate is, or reloading never pays.
std::optional<uint64_t> ReloadBreakEvenTokens(const ModelRegistry& registry, const std::string& model, Tier tier,
                                              const LiveRates* rates, const FleetRates* fleet);

// The reload bandwidth of `tier` for `model` that Advise answers with: the fleet's, else this
// replica's live one, else the profile's stated figure; rate unset when none is known.
RateUsed ReloadBandwidthUsed(const ModelRegistry& registry, const std::string& model, Tier tier, const LiveRates* rates,
                             const FleetRates* fleet);

// The refusal of a request with more than kMaxAdviceCandidates candidates (also given before one is
// parsed, by the server).
std::string TooManyCandidatesMessage(size_t candidates);

// Validates the request (INVALID_ARGUMENT naming the field, its value and the rule, as for a
// record) and advises. `rates` may be null (no live rates), and `fleet` (no fleet rates).
absl::StatusOr<Advice> Advise(const AdviceRequestInput& request, const ModelRegistry& registry,
                              const LiveRates* rates, const FleetRates* fleet = nullptr);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_ADVICE_ADVISOR_H_
