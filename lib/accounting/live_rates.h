// Live rates (docs/cost-model.md §8, §10): per (model slot, tier) the effective reload bandwidth
// (reused bytes / reload seconds), a ratio of exponentially decayed sums with a half-life, so the
// newest records weigh most and an old burst fades; per model slot the prefill compute-time model
// (a pass curve with its affine summary), fitted to the records' suffix prefills with the same decay
// (compute_time.h).
//
// Each sum decays as 2^(-age / half_life); the rate is the ratio of two sums decayed alike (the
// decay cancels when all samples are of one age), and the evidence is the number of samples and
// their decayed weight (1 per sample, fading with age). Soft state: per process, lost on restart;
// the undecayed sums beside them are exported as counters (TotalsNow).
//
// Thread-safe. Writers go to one of a fixed set of shards chosen per thread, like Aggregator.
#ifndef KVLEDGER_LIB_ACCOUNTING_LIVE_RATES_H_
#define KVLEDGER_LIB_ACCOUNTING_LIVE_RATES_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "lib/accounting/record_observer.h"
#include "lib/accounting/compute_time.h"
#include "lib/accounting/derived_figures.h"
#include "lib/base/monotonic.h"
#include "lib/base/mutex.h"

namespace kvledger {

// A rate and the evidence behind it.
struct RateEvidence {
  double rate = 0;     // numerator units per second (bytes/s, FLOP/s)
  uint64_t samples = 0;  // records that contributed, ever
  double weight = 0;   // their decayed weight now: 1 for a sample this instant, 0.5 one half-life ago
};

// The names of DecayedRate::Parts(), as exported (the `term` label).
inline constexpr std::array<const char*, 4> kReloadParts = {"bytes", "seconds", "weight", "samples"};

// Decayed sums of one rate. Plain value; the caller serializes access.
class DecayedRate {
 public:
  // Adds a sample of `amount` over `seconds` (> 0) observed at `now` (seconds on any monotonic clock).
  void Observe(double amount, double seconds, double now, double half_life) {
    sums_.Observe({amount, seconds}, now, half_life);
  }
  // The sums decayed to `now` and added into `into` (which must be at `now` too).
  void AddDecayedTo(DecayedRate& into, double now, double half_life) const {
    sums_.AddDecayedTo(into.sums_, now, half_life);
  }
  // Empty when no sample was ever seen, or when the rate is not finite (seconds too small to be a
  // measurement, e.g. 5e-324): never an infinite rate.
  std::optional<RateEvidence> Evidence() const;

  // Named by kReloadParts.
  std::array<double, 4> Parts() const { return sums_.Parts(); }
  static DecayedRate FromParts(const std::array<double, 4>& parts) {
    DecayedRate rate;
    rate.sums_ = DecayedSums<2>::FromParts(parts);
    return rate;
  }

 private:
  DecayedSums<2> sums_;  // amount, seconds
};

class LiveRates final : public RecordObserver {
 public:
  using Clock = std::function<double()>;
  // Slots 0..slot_count-1, like Aggregator; `half_life_seconds` > 0. `clock` is read for records
  // that carry a rate, and for queries. A model's compute fit is refitted from the shards at most
  // once per `refit_seconds` (0: at every query) and every surface reads that one fit; without
  // `compute_model` there is none (ComputeModel is always empty).
  static constexpr double kDefaultRefitSeconds = 1;
  LiveRates(uint32_t slot_count, double half_life_seconds, Clock clock = MonotonicSeconds,
            double refit_seconds = kDefaultRefitSeconds, bool compute_model = true);

  // Feeds a derived record: its reload (when reload_seconds > 0 and bytes were reused, from one
  // source tier) and its suffix prefill pass (when suffix_prefill_seconds > 0 and FLOPs remained).
  // With `model` (the fit the record was estimated with), the pass's seconds are first held within
  // kComputeFitOutlierFactor of the model's: one stalled or preempted pass moves the fit a bounded step.
  void Observe(uint32_t model_slot, const RecordFigures& figures, const std::optional<ComputeTime>& model = {});
  // The same, as the Ledger hands it a record (RecordObserver).
  void Observe(uint32_t slot, const RecordFacts&, const RecordFigures& figures, const EstimateSource& source) override {
    Observe(slot, figures, source.live);
  }
  // Feeds an aggregate transfer observation (bytes moved from `tier` in `seconds`, no request) to
  // the reload bandwidth of (model_slot, tier): one sample, like one record's reload. Ignored for a
  // tier that is not a source tier or for seconds <= 0.
  void ObserveTransfer(uint32_t model_slot, Tier tier, double bytes, double seconds);

  std::optional<RateEvidence> ReloadBandwidth(uint32_t model_slot, Tier tier) const;
  // The model's compute-time fit, when it is ready (compute_time.h), else nothing. The record path
  // reads a fit at most refit_seconds old; with `current` (a question: Advise), the fit also
  // reflects every record observed before the call (refitted when one came since the last fit).
  std::optional<ComputeTime> ComputeModel(uint32_t model_slot, bool current = false) const;

  // Every rate with evidence, by slot then tier; `tier` is absent for a compute model, whose
  // evidence.rate is its FLOP/s and `fixed_seconds` its cost per pass (the affine summary), and
  // `compute` the whole model.
  struct Entry {
    uint32_t model_slot;
    std::optional<Tier> tier;
    RateEvidence evidence;
    double fixed_seconds = 0;
    std::optional<ComputeTime> compute;
  };
  std::vector<Entry> Snapshot() const;

  // The undecayed sums of every sample observed since start (the same terms as the decayed ones
  // behind the rates, weight = samples), merged over the shards: exported as counters, whose increase
  // over a window the fleet's rules add up over the replicas (fleet_rates.h), so that a replica's
  // restart or a missed scrape moves the fleet's answer little. Compute sums only with the compute
  // model on.
  struct Sums {
    struct Reload {
      uint32_t model_slot;
      Tier tier;
      std::array<double, 4> parts;  // kReloadParts
    };
    struct Compute {
      uint32_t model_slot;
      std::array<double, kComputeFitPartCount> parts;  // ComputeFitParts()
    };
    std::vector<Reload> reload;
    std::vector<Compute> compute;
  };
  Sums TotalsNow() const;

  double half_life_seconds() const { return half_life_; }
  uint32_t slot_count() const { return slot_count_; }

 private:
  static constexpr int kShards = 16;
  struct Cells {
    std::vector<DecayedRate> reload;        // slot * kTierCount + tier
    std::vector<DecayedComputeFit> compute;  // slot
    // The same samples never decayed (half-life infinite): TotalsNow.
    std::vector<DecayedRate> reload_total;
    std::vector<DecayedComputeFit> compute_total;
  };
  struct alignas(64) Shard {
    mutable Mutex mu;
    Cells cells ABSL_GUARDED_BY(mu);
  };
  // Every shard's cells added, decayed to `now`: the reload rates, and the compute fits when asked
  // for (and kept); with `totals`, the undecayed cells instead. The one merge Snapshot and TotalsNow
  // read.
  Cells Merged(double now, bool with_compute, bool totals = false) const;
  // The last fit of one slot's compute model and when it was made, read without a lock on the
  // record path: a sequence lock (odd while a refit writes it; a reader retries on a change).
  struct alignas(64) Fitted {
    std::atomic<uint32_t> seq{0};
    std::atomic<bool> made{false};
    std::atomic<double> at{0};
    std::atomic<bool> ready{false};
    std::atomic<double> fixed_seconds{0};
    std::atomic<double> seconds_per_flop{0};
    std::atomic<double> weight{0};
    std::atomic<uint64_t> samples{0};
    std::atomic<bool> has_curve{false};
    std::array<std::atomic<double>, kPassKnots> knot_seconds{};
    std::array<std::atomic<double>, kPassKnots> attention_seconds_per_flop{};
    std::array<std::atomic<double>, kPassSegments> tile_seconds_per_token{};
    std::atomic<uint64_t> fitted_observed{0};  // Observed() when the fit was made
    Mutex refit_mu;  // one refit at a time
  };
  struct FitRead {
    uint32_t seq = 1;  // the sequence number it was read at (odd: none)
    bool made = false;
    double at = 0;
    uint64_t observed = 0;
    std::optional<ComputeTime> fit;
  };
  static FitRead Read(const Fitted& fitted);
  // Read(fitted_[model_slot]) through this thread's copy, read again only when the sequence moved.
  const FitRead& ReadOnThisThread(uint32_t model_slot) const;
  static uint64_t NextId();
  static void Write(Fitted& fitted, double at, uint64_t observed, const std::optional<ComputeTime>& fit);
  Shard& ShardForThisThread();
  // One cell (`cells`[index]) added over the shards, decayed to `now`.
  template <typename Cell>
  Cell MergeCell(std::vector<Cell> Cells::*cells, size_t index, double now) const {
    Cell merged;
    for (const auto& shard : shards_) {
      MutexLock lock(&shard.mu);
      (shard.cells.*cells)[index].AddDecayedTo(merged, now, half_life_);
    }
    return merged;
  }
  std::optional<ComputeTime> Refit(uint32_t model_slot, double now) const;
  // The slot's compute samples observed ever, over the shards.
  uint64_t Observed(uint32_t model_slot) const;

  const uint64_t id_;  // this instance among every LiveRates made (the per-thread copies' key)
  const uint32_t slot_count_;
  const double half_life_;
  const Clock clock_;
  const double refit_seconds_;
  const bool compute_model_;
  std::array<Shard, kShards> shards_;
  std::unique_ptr<Fitted[]> fitted_;  // per slot
};

}  // namespace kvledger

#endif  // KVLEDGER_LIB_ACCOUNTING_LIVE_RATES_H_
