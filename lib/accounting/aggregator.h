// The in-memory totals behind every exported series: sums of accepted records' figures per
// (model label slot, tier), latency and hit-ratio histograms, rejections by reason.
//
// Exactness: every sum is an integer (token, FLOP and byte counts as 128-bit integers; seconds and
// ratios as fixed-point nanounits, each record's value rounded once), so a snapshot is a pure
// function of the set of accepted records, whatever their order or thread.
//
// Thread-safe. Writers go to one of a fixed set of shards chosen per thread, so concurrent writers
// rarely share a lock; Snapshot() merges the shards.
#ifndef KVLEDGER_LIB_ACCOUNTING_AGGREGATOR_H_
#define KVLEDGER_LIB_ACCOUNTING_AGGREGATOR_H_

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "lib/base/mutex.h"
#include "lib/accounting/derived_figures.h"
#include "lib/accounting/figure_schema.h"
#include "lib/accounting/rejection.h"
#include "lib/cost_model/exact_int.h"

namespace kvledger {

// Hit-ratio buckets: upper bounds k/10 for k = 1..10.
inline constexpr int kRatioBuckets = 10;

template <size_t kBuckets>
struct FixedHistogram {
  std::array<uint64_t, kBuckets + 1> counts{};  // per bucket (not cumulative); last = +Inf
  Uint128 sum_nanounits = 0;
  uint64_t count = 0;
  void Merge(const FixedHistogram& other) {
    for (size_t i = 0; i < counts.size(); ++i) counts[i] += other.counts[i];
    sum_nanounits += other.sum_nanounits;
    count += other.count;
  }
};
using LatencyHistogram = FixedHistogram<kLatencyBuckets>;  // bounds per LatencySpec
using RatioHistogram = FixedHistogram<kRatioBuckets>;

// Sums for one (model slot, tier): every figure of figure_schema.h.
struct Totals {
  std::array<Uint128, kCounterSlots> counters{};
  std::array<LatencyHistogram, kLatencies.size()> latencies;
  std::array<RatioHistogram, kRatios.size()> ratios;

  // The sum of a counter, at index `i` of its dimension.
  Uint128 counter(Counter c, int i = 0) const { return counters[kCounterOffsets[static_cast<size_t>(c)] + i]; }
  Uint128 counter(Counter c, Cause cause) const { return counter(c, static_cast<int>(cause)); }
  Uint128 counter(Counter c, Boundary b) const { return counter(c, static_cast<int>(b)); }
  uint64_t requests() const { return static_cast<uint64_t>(counter(Counter::kRequests)); }
  const LatencyHistogram& latency(Latency l) const { return latencies[static_cast<size_t>(l)]; }
  const RatioHistogram& ratio(Ratio r) const { return ratios[static_cast<size_t>(r)]; }

  void Add(const RecordFigures& figures);
  void Merge(const Totals& other);
};

struct AggregateSnapshot {
  struct Cell {
    uint32_t model_slot;
    Tier tier;
    Totals totals;
  };
  std::vector<Cell> cells;  // only cells with a record or declared, ordered by (slot, tier)
  std::array<uint64_t, kRejectReasonCount> rejected{};
  uint64_t folded_records = 0;  // records whose model label was folded into "other"
};

class Aggregator {
 public:
  // Slots 0..slot_count-1 are valid for Add: LabelSlots::slot_count(), one per catalog profile, one
  // per name a client may claim (--max_models) and one for "other".
  explicit Aggregator(uint32_t slot_count);

  void Add(uint32_t model_slot, const RecordFigures& figures, bool folded);
  // Makes the cell (model_slot, tier) exist with zero totals, so its series are exported at 0
  // before its first record (rate() and increase() then see the first record's increase).
  void Declare(uint32_t model_slot, Tier tier);
  void AddRejection(RejectReason reason);
  AggregateSnapshot Snapshot() const;

 private:
  static constexpr int kShards = 16;
  struct alignas(64) Shard {  // one cache line apart: no false sharing between writers
    mutable Mutex mu;
    std::vector<std::unique_ptr<Totals>> cells ABSL_GUARDED_BY(mu);  // slot * kTierCount + tier
    std::array<uint64_t, kRejectReasonCount> rejected ABSL_GUARDED_BY(mu){};
    uint64_t folded ABSL_GUARDED_BY(mu) = 0;
  };
  Shard& ShardForThisThread();

  const uint32_t slot_count_;
  std::array<Shard, kShards> shards_;
};

}  // namespace kvledger

#endif  // KVLEDGER_LIB_ACCOUNTING_AGGREGATOR_H_
