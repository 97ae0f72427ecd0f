#include "lib/accounting/aggregator.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <utility>

namespace kvledger {
namespace {

// Bucket bounds in nanoseconds, rounded once.
const std::array<Uint128, kLatencyBucketsSeconds.size()>& LatencyBoundsNanos() {
  static const auto bounds = [] {
    std::array<Uint128, kLatencyBucketsSeconds.size()> out{};
    for (size_t i = 0; i < out.size(); ++i) out[i] = ToNanoUnits(kLatencyBucketsSeconds[i]);
    return out;
  }();
  return bounds;
}

void ObserveLatency(LatencyHistogram& h, double seconds) {
  const Uint128 nanos = ToNanoUnits(seconds);
  // First bucket whose bound is >= the value ("le" semantics); past the last bound: +Inf.
  const auto& bounds = LatencyBoundsNanos();
  const size_t i = static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), nanos) - bounds.begin());
  ++h.counts[i];
  h.sum_nanounits += nanos;
  ++h.count;
}

// alpha = part / whole falls in bucket k (upper bound k/20), the smallest k >= 1 with
// 20 part <= k whole; exact in integers.
void ObserveRatio(RatioHistogram& h, uint64_t part, uint64_t whole) {
  const Uint128 scaled = Uint128{kRatioBuckets} * part;
  uint64_t k = static_cast<uint64_t>((scaled + whole - 1) / whole);
  k = std::max<uint64_t>(k, 1);
  ++h.counts[k - 1];
  h.sum_nanounits += ToNanoUnits(static_cast<double>(part) / static_cast<double>(whole));
  ++h.count;
}

// Adds row I of kCounters; unrolled at compile time so every contribution is inlined.
template <size_t I>
void AddCounter(const DerivedFigures& d, Uint128* counters) {
  constexpr CounterSpec spec = kCounters[I];
  for (int i = 0; i < Width(spec.dimension); ++i) counters[kCounterOffsets[I] + i] += spec.contribution(d, i);
}

template <size_t... I>
void AddCounters(const DerivedFigures& d, Uint128* counters, std::index_sequence<I...>) {
  (AddCounter<I>(d, counters), ...);
}

}  // namespace

void Totals::Add(const DerivedFigures& d) {
  AddCounters(d, counters.data(), std::make_index_sequence<kCounters.size()>());
  for (size_t i = 0; i < kLatencies.size(); ++i) {
    if (const auto& seconds = d.*kLatencies[i].seconds) ObserveLatency(latencies[i], *seconds);
  }
  for (size_t i = 0; i < kRatios.size(); ++i) ObserveRatio(ratios[i], d.*kRatios[i].part, d.prompt_tokens);
}

void Totals::Merge(const Totals& o) {
  for (size_t i = 0; i < counters.size(); ++i) counters[i] += o.counters[i];
  for (size_t i = 0; i < latencies.size(); ++i) latencies[i].Merge(o.latencies[i]);
  for (size_t i = 0; i < ratios.size(); ++i) ratios[i].Merge(o.ratios[i]);
}

Aggregator::Aggregator(uint32_t label_slots) : label_slots_(label_slots) {
  for (auto& shard : shards_) {
    MutexLock lock(&shard.mu);
    shard.cells.resize(static_cast<size_t>(label_slots_) * kTierCount);
  }
}

Aggregator::Shard& Aggregator::ShardForThisThread() {
  static std::atomic<uint32_t> next{0};
  thread_local const uint32_t index = next.fetch_add(1, std::memory_order_relaxed) % kShards;
  return shards_[index];
}

void Aggregator::Add(uint32_t model_slot, const DerivedFigures& figures, bool folded) {
  Shard& shard = ShardForThisThread();
  const size_t cell = static_cast<size_t>(std::min(model_slot, label_slots_ - 1)) * kTierCount +
                      static_cast<size_t>(figures.tier);
  MutexLock lock(&shard.mu);
  auto& totals = shard.cells[cell];
  if (!totals) totals = std::make_unique<Totals>();
  totals->Add(figures);
  if (folded) ++shard.folded;
}

void Aggregator::AddRejection(RejectReason reason) {
  Shard& shard = ShardForThisThread();
  MutexLock lock(&shard.mu);
  ++shard.rejected[static_cast<size_t>(reason)];
}

AggregateSnapshot Aggregator::Snapshot() const {
  std::vector<std::unique_ptr<Totals>> merged(static_cast<size_t>(label_slots_) * kTierCount);
  AggregateSnapshot snapshot;
  for (const auto& shard : shards_) {
    MutexLock lock(&shard.mu);
    for (size_t i = 0; i < shard.cells.size(); ++i) {
      if (!shard.cells[i]) continue;
      if (!merged[i]) merged[i] = std::make_unique<Totals>();
      merged[i]->Merge(*shard.cells[i]);
    }
    for (int r = 0; r < kRejectReasonCount; ++r) snapshot.rejected[r] += shard.rejected[r];
    snapshot.folded_records += shard.folded;
  }
  for (size_t i = 0; i < merged.size(); ++i) {
    if (!merged[i]) continue;
    snapshot.cells.push_back(AggregateSnapshot::Cell{static_cast<uint32_t>(i / kTierCount),
                                                     static_cast<Tier>(i % kTierCount),
                                                     std::move(*merged[i])});
  }
  return snapshot;
}

}  // namespace kvledger
