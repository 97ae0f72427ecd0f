#include "lib/accounting/live_rates.h"

#include <atomic>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvledger {
namespace {

// The half-life of the undecayed totals: a sample keeps weight 1 for ever.
constexpr double kNoDecay = std::numeric_limits<double>::infinity();

template <size_t N>
void LoadAll(const std::array<std::atomic<double>, N>& from, std::array<double, N>& to) {
  for (size_t i = 0; i < N; ++i) to[i] = from[i].load(std::memory_order_acquire);
}
template <size_t N>
void StoreAll(const std::array<double, N>& from, std::array<std::atomic<double>, N>& to) {
  for (size_t i = 0; i < N; ++i) to[i].store(from[i], std::memory_order_release);
}

}  // namespace

std::optional<RateEvidence> DecayedRate::Evidence() const {
  if (sums_.samples() == 0 || sums_.sum(1) <= 0) return std::nullopt;
  const double rate = sums_.sum(0) / sums_.sum(1);
  if (!std::isfinite(rate)) return std::nullopt;  // seconds too small to be a measurement: no rate
  return RateEvidence{rate, sums_.samples(), sums_.weight()};
}

LiveRates::LiveRates(uint32_t slot_count, double half_life_seconds, Clock clock, double refit_seconds,
                     bool compute_model)
    : id_(NextId()),
      slot_count_(slot_count),
      half_life_(half_life_seconds),
      clock_(std::move(clock)),
      refit_seconds_(refit_seconds),
      compute_model_(compute_model),
      fitted_(std::make_unique<Fitted[]>(slot_count)) {
  for (auto& shard : shards_) {
    MutexLock lock(&shard.mu);
    shard.cells.reload.resize(static_cast<size_t>(slot_count) * kTierCount);
    shard.cells.compute.resize(slot_count);
    shard.cells.reload_total.resize(static_cast<size_t>(slot_count) * kTierCount);
    shard.cells.compute_total.resize(slot_count);
  }
}

uint64_t LiveRates::NextId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

LiveRates::Shard& LiveRates::ShardForThisThread() {
  static std::atomic<uint32_t> next{0};
  thread_local const uint32_t index = next.fetch_add(1, std::memory_order_relaxed) % kShards;
  return shards_[index];
}

void LiveRates::Observe(uint32_t model_slot, const RecordFigures& d, const std::optional<ComputeTime>& model) {
  if (model_slot >= slot_count_) return;
  // A reload from a mixed or unknown source would blend tiers' bandwidths: it feeds none.
  const bool reload = IsSourceTier(d.tier) && d.reused_bytes > 0 && d.reload_seconds && *d.reload_seconds > 0;
  const PassFlops pass = d.SuffixPass();
  const bool compute = pass.flops > 0 && d.suffix_prefill_seconds && *d.suffix_prefill_seconds > 0;
  if (!reload && !compute) return;
  double seconds = compute ? *d.suffix_prefill_seconds : 0;
  if (compute && model && model->basis == Basis::kLive) {
    const double expected = model->PassSeconds(pass);
    if (expected > 0) {
      seconds = std::clamp(seconds, expected / kComputeFitOutlierFactor, expected * kComputeFitOutlierFactor);
    }
  }
  const double now = clock_();
  Shard& shard = ShardForThisThread();
  MutexLock lock(&shard.mu);
  if (reload) {
    const size_t cell = static_cast<size_t>(model_slot) * kTierCount + static_cast<size_t>(d.tier);
    shard.cells.reload[cell].Observe(Uint128ToDouble(d.reused_bytes), *d.reload_seconds, now, half_life_);
    shard.cells.reload_total[cell].Observe(Uint128ToDouble(d.reused_bytes), *d.reload_seconds, now, kNoDecay);
  }
  if (compute) {
    shard.cells.compute[model_slot].Observe(pass, seconds, now, half_life_);
    // Its samples() count the slot's samples ever, with the sample, under the same lock (Observed).
    shard.cells.compute_total[model_slot].Observe(pass, seconds, now, kNoDecay);
  }
}

void LiveRates::ObserveTransfer(uint32_t model_slot, Tier tier, double bytes, double seconds) {
  if (model_slot >= slot_count_ || !IsSourceTier(tier) || !(seconds > 0) || !(bytes >= 0)) return;
  const double now = clock_();
  Shard& shard = ShardForThisThread();
  MutexLock lock(&shard.mu);
  const size_t cell = static_cast<size_t>(model_slot) * kTierCount + static_cast<size_t>(tier);
  shard.cells.reload[cell].Observe(bytes, seconds, now, half_life_);
  shard.cells.reload_total[cell].Observe(bytes, seconds, now, kNoDecay);
}

std::optional<RateEvidence> LiveRates::ReloadBandwidth(uint32_t model_slot, Tier tier) const {
  if (model_slot >= slot_count_) return std::nullopt;
  const size_t index = static_cast<size_t>(model_slot) * kTierCount + static_cast<size_t>(tier);
  return MergeCell(&Cells::reload, index, clock_()).Evidence();
}

std::optional<ComputeTime> LiveRates::Refit(uint32_t model_slot, double now) const {
  return MergeCell(&Cells::compute, model_slot, now).Fit();
}

// The sequence lock without fences: the writer's first increment is an acquire-release RMW and every
// field a release store; the reader's field loads are acquire loads, so none moves past the second
// read of the sequence.
LiveRates::FitRead LiveRates::Read(const Fitted& f) {
  constexpr auto kAcquire = std::memory_order_acquire;
  for (;;) {
    const uint32_t before = f.seq.load(kAcquire);
    if (before & 1) continue;  // a refit is writing
    FitRead r;
    r.made = f.made.load(kAcquire);
    r.at = f.at.load(kAcquire);
    r.observed = f.fitted_observed.load(kAcquire);
    if (f.ready.load(kAcquire)) {
      r.fit = ComputeTime{Basis::kLive, f.fixed_seconds.load(kAcquire), f.seconds_per_flop.load(kAcquire),
                          f.samples.load(kAcquire), f.weight.load(kAcquire), std::nullopt};
      if (f.has_curve.load(kAcquire)) {
        PassCurve& curve = r.fit->curve.emplace();
        LoadAll(f.knot_seconds, curve.knot_seconds);
        LoadAll(f.attention_seconds_per_flop, curve.attention_seconds_per_flop);
        LoadAll(f.tile_seconds_per_token, curve.tile_seconds_per_token);
      }
    }
    r.seq = before;
    if (f.seq.load(kAcquire) == before) return r;
  }
}

const LiveRates::FitRead& LiveRates::ReadOnThisThread(uint32_t model_slot) const {
  // Per thread, the last read of a few slots: a slot's fit changes at most once per refit, so most
  // records find their copy current with one load of the sequence instead of copying every field.
  struct Copy {
    uint64_t rates_id = 0;  // 0: none (ids start at 1)
    uint32_t model_slot = 0;
    FitRead read;
  };
  thread_local std::array<Copy, 16> copies;
  Copy& copy = copies[model_slot % copies.size()];
  const uint32_t seq = fitted_[model_slot].seq.load(std::memory_order_acquire);
  if (copy.rates_id != id_ || copy.model_slot != model_slot || copy.read.seq != seq) {
    copy = Copy{id_, model_slot, Read(fitted_[model_slot])};
  }
  return copy.read;
}

void LiveRates::Write(Fitted& f, double at, uint64_t observed, const std::optional<ComputeTime>& fit) {
  constexpr auto kRelease = std::memory_order_release;
  f.seq.fetch_add(1, std::memory_order_acq_rel);
  f.made.store(true, kRelease);
  f.at.store(at, kRelease);
  f.fitted_observed.store(observed, kRelease);
  f.ready.store(fit.has_value(), kRelease);
  if (fit) {
    f.fixed_seconds.store(fit->fixed_seconds, kRelease);
    f.seconds_per_flop.store(fit->seconds_per_flop, kRelease);
    f.weight.store(fit->weight, kRelease);
    f.samples.store(fit->samples, kRelease);
    f.has_curve.store(fit->curve.has_value(), kRelease);
    if (fit->curve) {
      StoreAll(fit->curve->knot_seconds, f.knot_seconds);
      StoreAll(fit->curve->attention_seconds_per_flop, f.attention_seconds_per_flop);
      StoreAll(fit->curve->tile_seconds_per_token, f.tile_seconds_per_token);
    }
  }
  f.seq.fetch_add(1, kRelease);
}

uint64_t LiveRates::Observed(uint32_t model_slot) const {
  uint64_t observed = 0;
  for (const auto& shard : shards_) {
    MutexLock lock(&shard.mu);
    observed += shard.cells.compute_total[model_slot].samples();
  }
  return observed;
}

std::optional<ComputeTime> LiveRates::ComputeModel(uint32_t model_slot, bool current) const {
  if (model_slot >= slot_count_ || !compute_model_) return std::nullopt;
  const double now = clock_();
  Fitted& fitted = fitted_[model_slot];
  // The record path reads the last fit and touches nothing another thread writes per record; a
  // question first counts the samples observed so far (each counted in its shard with the sample).
  const uint64_t observed = current ? Observed(model_slot) : 0;
  auto fresh = [&](const FitRead& r) {
    return r.made && now >= r.at && now - r.at < refit_seconds_ && r.observed >= observed;
  };
  if (const FitRead& r = ReadOnThisThread(model_slot); fresh(r)) return r.fit;  // the record path: no lock
  MutexLock lock(&fitted.refit_mu);
  if (FitRead r = Read(fitted); fresh(r)) return r.fit;  // another thread refitted meanwhile
  // Counted before the merge: every sample counted is in it (one observed in between only makes a
  // later question refit once more).
  const uint64_t merged = current ? observed : Observed(model_slot);
  std::optional<ComputeTime> fit = Refit(model_slot, now);
  Write(fitted, now, merged, fit);
  return fit;
}

LiveRates::Cells LiveRates::Merged(double now, bool with_compute, bool totals) const {
  Cells merged;
  merged.reload.resize(static_cast<size_t>(slot_count_) * kTierCount);
  merged.compute.resize(with_compute && compute_model_ ? slot_count_ : 0);
  const auto reload = totals ? &Cells::reload_total : &Cells::reload;
  const auto compute = totals ? &Cells::compute_total : &Cells::compute;
  const double half_life = totals ? kNoDecay : half_life_;
  for (const auto& shard : shards_) {
    MutexLock lock(&shard.mu);
    for (size_t i = 0; i < merged.reload.size(); ++i) {
      (shard.cells.*reload)[i].AddDecayedTo(merged.reload[i], now, half_life);
    }
    for (size_t i = 0; i < merged.compute.size(); ++i) {
      (shard.cells.*compute)[i].AddDecayedTo(merged.compute[i], now, half_life);
    }
  }
  return merged;
}

std::vector<LiveRates::Entry> LiveRates::Snapshot() const {
  const std::vector<DecayedRate> reload = Merged(clock_(), /*with_compute=*/false).reload;
  std::vector<Entry> entries;
  for (uint32_t slot = 0; slot < slot_count_; ++slot) {
    if (auto fit = ComputeModel(slot)) {
      entries.push_back({slot, std::nullopt, RateEvidence{fit->FlopsPerSecond(), fit->samples, fit->weight},
                         fit->fixed_seconds, fit});
    }
    for (int t = 0; t < kTierCount; ++t) {
      if (auto e = reload[static_cast<size_t>(slot) * kTierCount + t].Evidence()) {
        entries.push_back({slot, static_cast<Tier>(t), *e, 0, std::nullopt});
      }
    }
  }
  return entries;
}

LiveRates::Sums LiveRates::TotalsNow() const {
  const Cells merged = Merged(clock_(), /*with_compute=*/true, /*totals=*/true);
  const std::vector<DecayedRate>& reload = merged.reload;
  const std::vector<DecayedComputeFit>& compute = merged.compute;
  Sums sums;
  for (size_t i = 0; i < reload.size(); ++i) {
    const auto parts = reload[i].Parts();
    if (parts.back() == 0) continue;  // no sample
    sums.reload.push_back({static_cast<uint32_t>(i / kTierCount), static_cast<Tier>(i % kTierCount), parts});
  }
  for (size_t slot = 0; slot < compute.size(); ++slot) {
    if (compute[slot].samples() > 0) sums.compute.push_back({static_cast<uint32_t>(slot), compute[slot].Parts()});
  }
  return sums;
}

}  // namespace kvledger
