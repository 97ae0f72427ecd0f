#include "lib/accounting/aggregator.h"

#include <algorithm>
#include <atomic>
#include <cmath>

namespace kvledger {
namespace {

// `value` is finite and >= 0 (validated latencies, ratios, recompute estimates); estimates can
// pass 2^64 nanoseconds for absurd records, so the result is 128-bit.
Uint128 ToNanoUnits(double value) {
  const double scaled = value * kNanoUnitsPerUnit;
  if (scaled < 9.0e18) return static_cast<Uint128>(std::llround(scaled));
  return static_cast<Uint128>(scaled);  // already an integer at this magnitude
}

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

}  // namespace

void Totals::Add(const DerivedFigures& d) {
  ++requests;
  prompt_tokens += d.prompt_tokens;
  logical_match_tokens += d.logical_match_tokens;
  recoverable_tokens += d.recoverable_tokens;
  reused_tokens += d.reused_tokens;
  recompute_alignment_tokens += d.recompute_alignment_tokens;
  recompute_restore_tokens += d.recompute_restore_tokens;
  attention_baseline_flops += d.attention_baseline_flops;
  prefill_baseline_flops += d.prefill_baseline_flops;
  for (int b = 0; b < kBoundaryCount; ++b) {
    attention_avoided_flops[b] += d.attention_avoided_flops[b];
    prefill_avoided_flops[b] += d.prefill_avoided_flops[b];
  }
  reused_bytes += d.reused_bytes;
  if (d.reload_compared) {
    ++reload_compared_requests;
    estimated_recompute_nanoseconds += ToNanoUnits(*d.estimated_recompute_seconds);
    compared_reload_nanoseconds += ToNanoUnits(*d.reload_seconds);
    compared_suffix_prefill_nanoseconds += ToNanoUnits(d.suffix_prefill_seconds_used);
    compared_reused_bytes += d.reused_bytes;
    reload_slower_than_recompute += d.reload_slower_than_recompute ? 1 : 0;
  }
  recoverable_model_disagreements += d.model_disagrees ? 1 : 0;
  if (d.reload_seconds) ObserveLatency(reload_seconds, *d.reload_seconds);
  if (d.suffix_prefill_seconds) ObserveLatency(suffix_prefill_seconds, *d.suffix_prefill_seconds);
  if (d.ttft_seconds) ObserveLatency(ttft_seconds, *d.ttft_seconds);
  ObserveRatio(logical_hit_ratio, d.logical_match_tokens, d.prompt_tokens);
  ObserveRatio(reused_hit_ratio, d.reused_tokens, d.prompt_tokens);
}

void Totals::Merge(const Totals& o) {
  requests += o.requests;
  prompt_tokens += o.prompt_tokens;
  logical_match_tokens += o.logical_match_tokens;
  recoverable_tokens += o.recoverable_tokens;
  reused_tokens += o.reused_tokens;
  recompute_alignment_tokens += o.recompute_alignment_tokens;
  recompute_restore_tokens += o.recompute_restore_tokens;
  attention_baseline_flops += o.attention_baseline_flops;
  prefill_baseline_flops += o.prefill_baseline_flops;
  for (int b = 0; b < kBoundaryCount; ++b) {
    attention_avoided_flops[b] += o.attention_avoided_flops[b];
    prefill_avoided_flops[b] += o.prefill_avoided_flops[b];
  }
  reused_bytes += o.reused_bytes;
  reload_compared_requests += o.reload_compared_requests;
  estimated_recompute_nanoseconds += o.estimated_recompute_nanoseconds;
  compared_reload_nanoseconds += o.compared_reload_nanoseconds;
  compared_suffix_prefill_nanoseconds += o.compared_suffix_prefill_nanoseconds;
  compared_reused_bytes += o.compared_reused_bytes;
  reload_slower_than_recompute += o.reload_slower_than_recompute;
  recoverable_model_disagreements += o.recoverable_model_disagreements;
  reload_seconds.Merge(o.reload_seconds);
  suffix_prefill_seconds.Merge(o.suffix_prefill_seconds);
  ttft_seconds.Merge(o.ttft_seconds);
  logical_hit_ratio.Merge(o.logical_hit_ratio);
  reused_hit_ratio.Merge(o.reused_hit_ratio);
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
