#include "lib/accounting/aggregator.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <utility>

namespace kvledger {
namespace {

void ObserveLatency(LatencyHistogram& h, const LatencyBounds& bounds, double seconds) {
  const Uint128 nanos = ToNanoUnits(seconds);
  // The bucket is the number of bounds below the value ("le" semantics: a value equal to a bound
  // falls in that bound's bucket); past the last bound, +Inf. A branch-free count over 17 integers,
  // not a search.
  const uint64_t v = nanos > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(nanos);
  size_t i = 0;
  for (uint64_t bound : bounds) i += v > bound ? 1 : 0;
  ++h.counts[i];
  h.sum_nanounits += nanos;
  ++h.count;
}

// alpha = part / whole falls in bucket k (upper bound k/10), the smallest k >= 1 with
// 10 part <= k whole; exact in integers.
void ObserveRatio(RatioHistogram& h, uint64_t part, uint64_t whole) {
  // 64-bit division when it cannot overflow (every realistic prompt); 128-bit otherwise.
  const uint64_t k64 = part <= UINT64_MAX / (2 * kRatioBuckets) && whole <= UINT64_MAX / 2
                           ? (kRatioBuckets * part + whole - 1) / whole
                           : static_cast<uint64_t>((Uint128{kRatioBuckets} * part + whole - 1) / whole);
  uint64_t k = k64;
  k = std::max<uint64_t>(k, 1);
  ++h.counts[k - 1];
  h.sum_nanounits += ToNanoUnits(static_cast<double>(part) / static_cast<double>(whole));
  ++h.count;
}

// Adds row I of kCounters; unrolled at compile time so every contribution is inlined.
template <size_t I>
void AddCounter(const RecordFigures& d, Uint128* counters) {
  constexpr CounterSpec spec = kCounters[I];
  for (int i = 0; i < Width(spec.dimension); ++i) counters[kCounterOffsets[I] + i] += spec.contribution(d, i);
}

template <size_t... I>
void AddCounters(const RecordFigures& d, Uint128* counters, std::index_sequence<I...>) {
  (AddCounter<I>(d, counters), ...);
}

}  // namespace

void Totals::Add(const RecordFigures& d) {
  AddCounters(d, counters.data(), std::make_index_sequence<kCounters.size()>());
  for (size_t i = 0; i < kLatencies.size(); ++i) {
    if (const auto seconds = kLatencies[i].seconds(d)) ObserveLatency(latencies[i], *kLatencies[i].bounds, *seconds);
  }
  for (size_t i = 0; i < kRatios.size(); ++i) {
    const uint64_t whole = d.*kRatios[i].whole;
    if (whole > 0) ObserveRatio(ratios[i], d.*kRatios[i].part, whole);
  }
}

void Totals::Merge(const Totals& o) {
  for (size_t i = 0; i < counters.size(); ++i) counters[i] += o.counters[i];
  for (size_t i = 0; i < latencies.size(); ++i) latencies[i].Merge(o.latencies[i]);
  for (size_t i = 0; i < ratios.size(); ++i) ratios[i].Merge(o.ratios[i]);
}

Aggregator::Aggregator(uint32_t slot_count) : slot_count_(slot_count) {
  for (auto& shard : shards_) {
    MutexLock lock(&shard.mu);
    shard.cells.resize(static_cast<size_t>(slot_count_) * kTierCount);
  }
}

Aggregator::Shard& Aggregator::ShardForThisThread() {
  static std::atomic<uint32_t> next{0};
  thread_local const uint32_t index = next.fetch_add(1, std::memory_order_relaxed) % kShards;
  return shards_[index];
}

void Aggregator::Add(uint32_t model_slot, const RecordFigures& figures, bool folded) {
  Shard& shard = ShardForThisThread();
  const size_t cell = static_cast<size_t>(std::min(model_slot, slot_count_ - 1)) * kTierCount +
                      static_cast<size_t>(figures.tier);
  MutexLock lock(&shard.mu);
  auto& totals = shard.cells[cell];
  if (!totals) totals = std::make_unique<Totals>();
  totals->Add(figures);
  if (folded) ++shard.folded;
}

void Aggregator::Declare(uint32_t model_slot, Tier tier) {
  Shard& shard = shards_[0];
  const size_t cell = static_cast<size_t>(std::min(model_slot, slot_count_ - 1)) * kTierCount + static_cast<size_t>(tier);
  MutexLock lock(&shard.mu);
  if (!shard.cells[cell]) shard.cells[cell] = std::make_unique<Totals>();
}

void Aggregator::AddRejection(RejectReason reason) {
  Shard& shard = ShardForThisThread();
  MutexLock lock(&shard.mu);
  ++shard.rejected[static_cast<size_t>(reason)];
}

AggregateSnapshot Aggregator::Snapshot() const {
  // Two passes, so the totals are merged in place, in (slot, tier) order, without a temporary per
  // cell: first which cells exist, then the sums. A cell first written between the passes shows
  // from the next snapshot on.
  const size_t cell_count = static_cast<size_t>(slot_count_) * kTierCount;
  constexpr int32_t kPresent = INT32_MAX;
  std::vector<int32_t> position(cell_count, -1);
  for (const auto& shard : shards_) {
    MutexLock lock(&shard.mu);
    for (size_t i = 0; i < cell_count; ++i) {
      if (shard.cells[i]) position[i] = kPresent;
    }
  }
  AggregateSnapshot snapshot;
  int32_t next = 0;
  for (size_t i = 0; i < cell_count; ++i) {
    if (position[i] == kPresent) position[i] = next++;
  }
  snapshot.cells.resize(static_cast<size_t>(next));
  for (size_t i = 0; i < cell_count; ++i) {
    if (position[i] < 0) continue;
    auto& cell = snapshot.cells[static_cast<size_t>(position[i])];
    cell.model_slot = static_cast<uint32_t>(i / kTierCount);
    cell.tier = static_cast<Tier>(i % kTierCount);
  }
  for (const auto& shard : shards_) {
    MutexLock lock(&shard.mu);
    for (size_t i = 0; i < cell_count; ++i) {
      if (shard.cells[i] && position[i] >= 0) snapshot.cells[static_cast<size_t>(position[i])].totals.Merge(*shard.cells[i]);
    }
    for (int r = 0; r < kRejectReasonCount; ++r) snapshot.rejected[r] += shard.rejected[r];
    snapshot.folded_records += shard.folded;
  }
  return snapshot;
}

}  // namespace kvledger
