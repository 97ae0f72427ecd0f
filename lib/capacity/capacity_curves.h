// What each capacity of a ladder would have bought, live (docs/cost-model.md §14): every accepted
// record with prefix block ids is replayed through its cache's SampledStack, and for each capacity the
// prefix it would have matched there becomes the record it would have been, costed by the same
// Derive() as every record. Exact while a cache's stack holds every block; past its share of the
// memory budget, each sampled block adds its own share of the figures (the record at its end minus the
// record at its start) divided by the sampling rate, an estimate. Counters per model and capacity,
// integers; they add across caches, engines and replicas. With tier sizes (CurveLimits::tiers), each
// record is costed again with a second tier of each size below its device's capacity
// (second_tier.h, docs/cost-model.md §15). Thread-safe.
#ifndef KVLEDGER_LIB_ACCOUNTING_CAPACITY_CURVES_H_
#define KVLEDGER_LIB_ACCOUNTING_CAPACITY_CURVES_H_

#include <array>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "lib/accounting/derived_figures.h"
#include "lib/accounting/record_facts.h"
#include "lib/accounting/record_observer.h"
#include "lib/capacity/ladder.h"
#include "lib/capacity/sampled_stack.h"
#include "lib/capacity/second_tier.h"
#include "lib/base/monotonic.h"
#include "lib/base/mutex.h"
#include "lib/cost_model/exact_int.h"
#include "lib/profiles/profile.h"

namespace kvledger {

static_assert(kUnlimited == SampledStack::kAbsent, "an absent block is past every finite capacity");

// The record a request would have been with `match_tokens` of its prompt matched, in a cache of one
// tier (a hit is a device hit): what a Plan and the curves both cost.
RecordFacts FactsAtMatch(absl::string_view model, int64_t prompt_tokens, std::optional<int64_t> output_tokens,
                         int64_t match_tokens);

// The second tiers costed below each cache's device (docs/cost-model.md §15).
struct TierOptions {
  std::vector<TierSize> sizes;  // none: no tier figures
  // The device's capacity in tokens where a record does not give its cache's (cache_capacity_blocks);
  // 0: only records that give it are costed with tiers.
  uint64_t device_tokens = 0;
  // Whether a tier also holds copies of the device's blocks (write-through: vLLM's OffloadingConnector
  // stores every computed block, SGLang's HiCache with write_through): a tier of H blocks then holds
  // the H most recent, and serves the depths in (C, H]; else (exclusive) those in (C, C + H].
  bool inclusive = false;
  // The reload bandwidth measured for (model, tier kind), bytes/s, when there is one; else (or
  // unset) the tier size's stated bandwidth.
  std::function<std::optional<double>(absl::string_view model, Tier kind)> measured_bandwidth;
};

struct CurveLimits {
  size_t max_caches = 64;                    // (model, cache_id) pairs replayed at once
  uint64_t max_samples_per_cache = 1u << 16;  // blocks each cache's stack holds; past it, sampled
  // A cache that sent no record this long gives its place (and its stack's memory) to a new cache
  // when all max_caches are taken; while every cache is more recent, a new one's records are untracked.
  double cache_idle_seconds = 600;
  UseOrder use_order = UseOrder::kTailFirst;  // the order each request's blocks are used in
  TierOptions tiers = {};
};

// The sums of one second tier's size, in TierField order: what it holds beyond the device's match, and
// over the requests it holds part of with a compute model (seconds known), what the engine does with it.
enum TierField : size_t {
  kTierMatchTokens,        // prefix tokens the tier holds that the device does not
  kTierAttentionFlops,     // attention FLOPs those tokens' reuse avoids, at the reused boundary
  kTierPrefillFlops,       // prefill FLOPs likewise
  kTierHitRequests,        // requests the tier holds part of
  kTierSecondsKnown,       // of them, those with a compute model
  kTierRecomputeNanos,     // recompute seconds (×1e9) the tier's reloads avoid, threshold on
  kTierReloadNanos,        // reload seconds (×1e9) those reloads take
  kTierSlowerRequests,     // requests whose reload is slower than recomputing: the threshold recomputes
  kTierSlowerTokens,       // their tokens held by the tier
  kTierSlowerExcessNanos,  // what reloading them regardless would cost: reload − recompute (×1e9)
  kTierFieldCount
};
using TierRung = std::array<Uint128, kTierFieldCount>;

class CapacityCurves final : public RecordObserver {
 public:
  // Sums at one capacity.
  struct Rung {
    Uint128 match_tokens = 0;  // the logical match the capacity would have given
    Uint128 attention_avoided_flops = 0, prefill_avoided_flops = 0;  // at the reused boundary
    Uint128 recompute_avoided_nanos = 0;  // estimated seconds (×1e9) of the reused prefix, over seconds_known
  };
  struct ModelCurve {
    uint32_t model_slot = 0;
    uint64_t requests = 0;       // records replayed
    uint64_t seconds_known = 0;  // of them, those with a compute model for the seconds
    uint64_t untracked = 0;      // records with ids not replayed: every place was taken by a cache active
                                 // within cache_idle_seconds
    uint64_t released_caches = 0;  // caches of this model that gave their place back, idle
    uint64_t caches = 0;           // caches of this model replayed now (a gauge, filled by Snapshot)
    uint64_t sampled = 0;           // of the requests, those costed from a sample (rate below 1)
    uint64_t forgotten_blocks = 0;  // blocks dropped from a cache's sample as its rate fell
    Uint128 prompt_tokens = 0, attention_baseline_flops = 0, prefill_baseline_flops = 0;
    std::vector<Rung> rungs;  // one per capacity(), in order
    // Records with ids but no device capacity for the tiers to stand below (no cache_capacity_blocks
    // and no TierOptions::device_tokens).
    uint64_t tier_no_device = 0;
    std::vector<TierRung> tier_rungs;  // one per limits().tiers.sizes, in order
  };

  // `capacity_tokens`: ascending finite capacities, at most kMaxLadderCapacities (the unlimited one
  // is added). INVALID_ARGUMENT otherwise.
  // Idle times are read on `clock` (monotonic seconds).
  static absl::StatusOr<std::unique_ptr<CapacityCurves>> Create(std::vector<uint64_t> capacity_tokens,
                                                                size_t slot_count, CurveLimits limits = {},
                                                                std::function<double()> clock = MonotonicSeconds);

  // Replays an accepted record's block ids (nothing without them) and counts each capacity's figures,
  // estimating seconds from `source` as the record's own figures were.
  void Observe(uint32_t slot, const RecordFacts& facts, const Profile& profile, const EstimateSource& source);
  // The same, as the Ledger hands it a record (RecordObserver).
  void Observe(uint32_t slot, const RecordFacts& facts, const RecordFigures& figures,
               const EstimateSource& source) override {
    Observe(slot, facts, *figures.profile, source);
  }
  bool TakesCurvesOnly() const override { return true; }

  // The models with a replayed or untracked record, by slot.
  std::vector<ModelCurve> Snapshot() const;
  const std::vector<uint64_t>& capacities() const { return capacities_; }  // ascending, kUnlimited last
  const CurveLimits& limits() const { return limits_; }
  uint64_t MemoryBytes() const;  // every cache's stack

 private:
  using CacheKey = std::pair<uint32_t, std::string>;  // (model slot, cache_id)
  struct Cache {
    Mutex mu;
    SampledStack stack ABSL_GUARDED_BY(mu);
    Cache(uint64_t max_samples, UseOrder order) : stack(max_samples, order) {}
  };
  struct Place {  // a cache's place in the table, with its last activity
    std::shared_ptr<Cache> cache;
    double last_active = 0;
    std::list<CacheKey>::iterator in_order;  // its entry in by_activity_
  };
  // A sampled record's estimate at each capacity, per figure (match tokens, attention FLOPs, prefill
  // FLOPs, nanoseconds): signed, since the sampling's correction may take away.
  using Estimate = std::vector<std::array<double, 4>>;
  using TierEstimate = std::vector<std::array<double, kTierFieldCount>>;  // per tier size
  struct Slot {
    mutable Mutex mu;
    ModelCurve curve ABSL_GUARDED_BY(mu);
    // The sampled records' estimates not yet in `curve`'s counters, which only rise: a whole unit
    // moves there once the running estimate reaches it.
    Estimate carry ABSL_GUARDED_BY(mu);
    TierEstimate tier_carry ABSL_GUARDED_BY(mu);
  };
  CapacityCurves(std::vector<uint64_t> capacities, size_t slot_count, CurveLimits limits,
                 std::function<double()> clock);
  // The cache's stack, made (taking an idle cache's place when the table is full) if new; null when
  // every place is taken by a cache active within cache_idle_seconds. `released`: the model slot of
  // a cache that gave its place back.
  std::shared_ptr<Cache> FindCache(uint32_t slot, absl::string_view cache_id, std::optional<uint32_t>* released);
  ModelCurve Figures(const RecordFacts& facts, absl::Span<const uint64_t> prefix_depths, const Profile& profile,
                     const EstimateSource& source) const;
  // The record replayed through `cache`'s stack and costed at every capacity.
  ModelCurve Replay(Cache& cache, const RecordFacts& facts, const Profile& profile, const EstimateSource& source,
                    Estimate& estimate, TierEstimate& tier_estimate) const;
  // The figures from a sample of the record's blocks taken at `rate` < 1.
  // Its baselines, and in `estimate` what each capacity would have bought.
  ModelCurve SampledFigures(const RecordFacts& facts, absl::Span<const SampledStack::Sampled> sampled, double rate,
                            const Profile& profile, const EstimateSource& source, Estimate& estimate) const;
  // The record's second tiers (docs/cost-model.md §15): in `delta` from its exact prefix depths, or
  // in `estimate` from a sample taken at `rate` < 1.
  struct TierPlace {  // where a record's tiers stand: below its device, each size's deepest depth
    uint64_t device_blocks = 0;
    std::vector<uint64_t> deepest;
  };
  // Where a record's tiers stand; nothing without tier sizes, or without a device (counted in `delta`).
  std::optional<TierPlace> TierPlaceOf(const RecordFacts& facts, const Profile& profile, ModelCurve& delta) const;
  // The bandwidth a record's reloads from a tier size take: measured for its model and kind, else stated.
  double TierBandwidth(const RecordFacts& facts, const TierSize& size) const;
  void ExactTiers(const RecordFacts& facts, absl::Span<const uint64_t> depths, const Profile& profile,
                  const EstimateSource& source, ModelCurve& delta) const;
  void SampledTiers(const RecordFacts& facts, absl::Span<const SampledStack::Sampled> sampled, double rate,
                    const Profile& profile, const EstimateSource& source, ModelCurve& delta,
                    TierEstimate& estimate) const;
  void Add(uint32_t slot, const ModelCurve& delta, const Estimate& estimate, const TierEstimate& tier_estimate);

  const std::vector<uint64_t> capacities_;
  const CurveLimits limits_;
  const std::function<double()> clock_;
  std::vector<Slot> slots_;
  mutable Mutex caches_mu_;
  absl::flat_hash_map<CacheKey, Place> caches_ ABSL_GUARDED_BY(caches_mu_);
  std::list<CacheKey> by_activity_ ABSL_GUARDED_BY(caches_mu_);  // least recently active first
};

}  // namespace kvledger

#endif  // KVLEDGER_LIB_ACCOUNTING_CAPACITY_CURVES_H_
