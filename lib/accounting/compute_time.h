// The prefill compute-time model (docs/cost-model.md §8): the seconds of one forward pass.
//
// Two forms. The affine summary, seconds = fixed_seconds + F * seconds_per_flop, is what a profile
// states (its throughput, no fixed cost), what `plan` is given, and what the gauges show for a live
// fit. A live fit also carries a pass curve, which is what its estimates use: measured GPUs are not
// affine. A short pass runs far below the peak rate (the weights are read whatever the token count),
// so extending it is nearly free; the matrix multiplies run on whole tiles of rows, so a pass's time
// steps at each multiple of the tile; and attention runs at a rate of its own, which grows with the
// pass's size. The curve (PassCurve) is
//   seconds(pass) = h(new tokens padded to the tile) + c * (padding) + b(new tokens) * attention FLOPs
// with h and b piecewise linear between fixed knots (kPassKnotTokens), h non-decreasing and >= 0,
// b >= 0, and c per segment between the staircase (0) and h's own slope (a straight line). The
// reused prefix recomputed inside the same pass costs seconds(full pass) - seconds(suffix pass).
//
// DecayedComputeFit learns both per model from the records that measured a suffix prefill, by least
// squares weighted by age (a half-life, like the live rates); it is ready only when the records carry
// enough weight and enough different suffix sizes to tell the fixed cost from the rate. Until then
// an estimate that needs it is unknown, never extrapolated.
#ifndef KVLEDGER_LIB_ACCOUNTING_COMPUTE_TIME_H_
#define KVLEDGER_LIB_ACCOUNTING_COMPUTE_TIME_H_

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>

#include "lib/base/enum_table.h"
#include "lib/cost_model/exact_int.h"

namespace kvledger {

// Where an estimate's rate comes from; the wire enum kvledger.v1.Basis has the same values. Advice
// orders kNone < kProfile < kLive < kFleet by strength (kFleet: every replica's live evidence, read
// back from Prometheus, fleet_rates.h); kRecord is never a rate of Advise.
enum class Basis : uint8_t { kNone = 0, kProfile = 1, kLive = 2, kRecord = 3, kFleet = 4 };
inline constexpr EnumTable<Basis, 5> kBasisLabels = {{{Basis::kNone, "none"},
                                                     {Basis::kProfile, "profile"},
                                                     {Basis::kLive, "live"},
                                                     {Basis::kRecord, "record"},
                                                     {Basis::kFleet, "fleet"}}};
static_assert(IsDense(kBasisLabels));
inline const char* BasisLabel(Basis basis) { return LabelOf(kBasisLabels, basis, "none"); }

// One forward pass: the new tokens it computes, all its prefill FLOPs, and the attention (token-mixing)
// part of them, which runs at a rate of its own.
struct PassFlops {
  uint64_t tokens = 0;
  double flops = 0;
  double attention_flops = 0;
};

// The knots of h and b, in new tokens per pass: dense where short passes bend, sparser beyond, and the
// longest prompt a record may carry last, so that every hat function is in [0, 1] and every sum
// behind the fit only grows (they are exported as counters). Every knot from the tile up is a
// multiple of the tile, so a pass and its tokens padded to the tile lie in one segment.
inline constexpr std::array<uint64_t, 19> kPassKnotTokens = {
    0, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576,
    kMaxTokens};
inline constexpr size_t kPassKnots = kPassKnotTokens.size();
inline constexpr size_t kPassSegments = kPassKnots - 1;
// The GPU's tile in tokens: a pass of more tokens runs its matrix multiplies on whole tiles of this
// many rows, so its time steps at each multiple (docs/cost-model.md §8).
inline constexpr uint64_t kPassTileTokens = 128;

// A pass's tokens padded to the tile (the tokens themselves up to one tile).
inline uint64_t TilePadded(uint64_t tokens) {
  if (tokens <= kPassTileTokens) return tokens;
  return std::min<uint64_t>((tokens + kPassTileTokens - 1) / kPassTileTokens * kPassTileTokens, kMaxTokens);
}

// The learned pass curve (docs/cost-model.md §8): with S the pass's new tokens, S' = TilePadded(S),
// j the segment [k_j, k_j+1] holding S (and S'), and A the attention FLOPs,
//   seconds = h(S') + c_j * (S' - S) + b(S) * A
// h and b piecewise linear between the knots, c constant per segment.
struct PassCurve {
  std::array<double, kPassKnots> knot_seconds{};                // h: non-decreasing, >= 0
  std::array<double, kPassKnots> attention_seconds_per_flop{};  // b: >= 0
  std::array<double, kPassSegments> tile_seconds_per_token{};   // c: in [-slope of h in the segment, 0]
  double Seconds(const PassFlops& pass) const;
};

// A fitted or stated compute-time model.
struct ComputeTime {
  Basis basis = Basis::kNone;
  double fixed_seconds = 0;     // per forward pass (the affine summary)
  double seconds_per_flop = 0;  // > 0 (the affine summary)
  uint64_t samples = 0;         // records behind a live fit, ever
  double weight = 0;            // their decayed weight now
  std::optional<PassCurve> curve = std::nullopt;  // a live fit's, when it could be solved: what estimates use

  // One pass; and what computing the reused prefix inside the full pass adds to the suffix's pass
  // (0 when nothing was reused).
  double PassSeconds(const PassFlops& pass) const;
  double RecomputeSeconds(const PassFlops& full, const PassFlops& suffix) const;
  double FlopsPerSecond() const { return 1.0 / seconds_per_flop; }
};

// When a live fit is ready: this much decayed weight (8 records of now), and suffix sizes whose
// weighted coefficient of variation (standard deviation / mean of the FLOPs) is at least this.
inline constexpr double kComputeFitMinWeight = 8;
inline constexpr double kComputeFitMinSpread = 0.25;
// The stated error of a recompute estimate under a live pass curve (docs/cost-model.md §8: the median
// error in every prefix bucket on measured A100 timings is below it). Advise calls two choices whose
// estimated seconds differ by no more than this share of the recompute seconds between them a tie.
inline constexpr double kRecomputeEstimateError = 0.10;
// A live pass's seconds are held within this factor of the fitted model's before they are added
// (live_rates.h): robust to a stalled or preempted pass, while a real change still moves the fit.
inline constexpr double kComputeFitOutlierFactor = 2;

// The largest sample count a double holds exactly (2^53): beyond it a count read from outside is garbage.
inline constexpr double kMaxExactCount = 9007199254740992.0;

// N sums of samples, each sample weighing 2^(-age / half_life): the decay behind every live rate and
// fit. `weight` is the decayed count of samples (1 for a sample now). The decay is kept in one scale
// factor (the sums are stored divided by it), so a sample costs the values it adds whatever N is;
// the stored sums are renormalized when the scale falls below kMinScale. Plain value; the caller
// serializes access.
template <size_t N>
class DecayedSums {
 public:
  // Adds a sample's N values observed at `now` (seconds on any monotonic clock).
  void Observe(const std::array<double, N>& values, double now, double half_life) {
    const double keep = Advance(now, half_life) / scale_;
    for (size_t i = 0; i < N; ++i) sums_[i] += keep * values[i];
  }
  // The same for a sample whose values are 0 but at the K indices `at`: the same sums, in K additions.
  template <size_t K>
  void ObserveAt(const std::array<size_t, K>& at, const std::array<double, K>& values, double now, double half_life) {
    const double keep = Advance(now, half_life) / scale_;
    for (size_t k = 0; k < K; ++k) sums_[at[k]] += keep * values[k];
  }
  // The sums decayed to `now` and added into `into` (which must be at `now` too).
  void AddDecayedTo(DecayedSums& into, double now, double half_life) const {
    if (samples_ == 0) return;
    const double keep = std::exp2(-(now - at_) / half_life);  // > 1 only for a clock read before at_
    const double factor = scale_ * keep / into.scale_;
    for (size_t i = 0; i < N; ++i) into.sums_[i] += sums_[i] * factor;
    into.weight_ += weight_ * keep;
    into.samples_ += samples_;
    into.at_ = now;
  }
  double sum(int i) const { return sums_[i] * scale_; }
  double weight() const { return weight_; }
  uint64_t samples() const { return samples_; }

  // The N sums, then the weight and the sample count: what a replica exports so that the fleet's
  // sums are the replicas' added (docs/operations.md, "Advise across replicas").
  std::array<double, N + 2> Parts() const {
    std::array<double, N + 2> parts{};
    for (size_t i = 0; i < N; ++i) parts[i] = sums_[i] * scale_;
    parts[N] = weight_;
    parts[N + 1] = static_cast<double>(samples_);
    return parts;
  }
  // Sums made of Parts() (of one replica or added over several), decayed to one instant.
  static DecayedSums FromParts(const std::array<double, N + 2>& parts) {
    DecayedSums sums;
    for (size_t i = 0; i < N; ++i) sums.sums_[i] = parts[i];
    sums.weight_ = parts[N];
    // A count past 2^53 is no count a replica could have made; saturate rather than convert out of range.
    const double samples = parts[N + 1];
    sums.samples_ = samples > 0 ? static_cast<uint64_t>(std::min(samples, kMaxExactCount)) : 0;
    return sums;
  }

 private:
  // Below it the stored sums are multiplied out: 2^-500, ~150,000 half-lives of decay.
  static constexpr double kMinScale = 0x1p-500;

  // Decays the sums and the weight to a sample observed at `now`, counts the sample in, and returns
  // the weight its values are added with.
  double Advance(double now, double half_life) {
    double keep_sums = 1;
    double keep_sample = 1;
    if (samples_ == 0) {
      sums_.fill(0);
      scale_ = 1;
      keep_sums = 0;
      at_ = now;
    } else if (now > at_) {  // the same clock tick (a coarse clock's few milliseconds) needs no decay step
      keep_sums = std::exp2(-(now - at_) / half_life);
      at_ = now;
    } else if (now < at_) {  // a sample older than the sums (another thread's clock read): decay it instead
      keep_sample = std::exp2(-(at_ - now) / half_life);
    }
    if (keep_sums != 1 && samples_ != 0) {
      scale_ *= keep_sums;
      if (scale_ < kMinScale) {
        for (double& sum : sums_) sum *= scale_;
        scale_ = 1;
      }
    }
    weight_ = weight_ * keep_sums + keep_sample;
    ++samples_;
    return keep_sample;
  }
  std::array<double, N> sums_{};  // the sums divided by scale_
  double scale_ = 1;
  double weight_ = 0;
  double at_ = 0;  // the time the sums are decayed to
  uint64_t samples_ = 0;
};

// The sums behind DecayedComputeFit, in its Parts() order: the affine summary's, then the pass
// curve's (the products of its unknowns' features that one segment's samples make, and each
// feature times the seconds; compute_time.cc), then the weight and the sample count. FLOPs are in
// units of 1e12.
inline constexpr size_t kAffineSums = 4;  // x, y, x², x·y (x = all FLOPs, y = seconds)
// h, b: 2K - 1 products each, h·b 3K - 2, h·c and b·c 2(K - 1) each, c·c K - 1; then 3K - 1 times y.
inline constexpr size_t kCurveSums = 15 * kPassKnots - 10;
inline constexpr size_t kComputeFitSums = kAffineSums + kCurveSums;
inline constexpr size_t kComputeFitPartCount = kComputeFitSums + 2;
// The `term` label of each part as exported (e.g. "tflops", "h64_b128", "c256_seconds", "weight").
const std::array<const char*, kComputeFitPartCount>& ComputeFitParts();

// Decayed sums of (pass, seconds) samples for the weighted least-squares fits. Plain value; the
// caller serializes access.
class DecayedComputeFit {
 public:
  // Adds one pass (flops > 0) that took `seconds` (> 0), observed at `now` (seconds on any monotonic
  // clock).
  void Observe(const PassFlops& pass, double seconds, double now, double half_life);
  // The sums decayed to `now` and added into `into` (which must be at `now` too).
  void AddDecayedTo(DecayedComputeFit& into, double now, double half_life) const {
    sums_.AddDecayedTo(into.sums_, now, half_life);
  }
  // The fitted model when ready (see above). The affine summary is the least-squares line when its
  // slope is positive and its intercept >= 0, a line through the origin (fixed cost 0) when the
  // intercept comes out negative, nothing otherwise; the curve is added when its system solves.
  std::optional<ComputeTime> Fit() const;

  uint64_t samples() const { return sums_.samples(); }
  double weight() const { return sums_.weight(); }

  // Named by ComputeFitParts().
  std::array<double, kComputeFitPartCount> Parts() const { return sums_.Parts(); }
  static DecayedComputeFit FromParts(const std::array<double, kComputeFitPartCount>& parts) {
    DecayedComputeFit fit;
    fit.sums_ = DecayedSums<kComputeFitSums>::FromParts(parts);
    return fit;
  }

 private:
  std::optional<PassCurve> FitCurve() const;
  DecayedSums<kComputeFitSums> sums_;
};

// The record alone (offline explain): the rate its own suffix prefill saw, with no fixed cost.
// Only at or above the floor, where the suffix carries at least as many prefill FLOPs as the reused
// prefix (remaining >= avoided > 0): there, ignoring the fixed cost overstates the recompute by at
// most that fixed cost. Below it, or without a measured suffix time, nothing.
std::optional<ComputeTime> RecordAloneComputeTime(Uint128 remaining_flops, Uint128 avoided_flops,
                                                  std::optional<double> suffix_prefill_seconds);

// The profile's stated prefill throughput (FLOP/s, > 0) as a model with no fixed cost, else nothing.
std::optional<ComputeTime> ProfileComputeTime(double flops_per_second);

// The model estimates are made from, in one order everywhere (records, Explain, Advise, the
// gauges): the live fit when it is ready, else the profile's stated throughput, else nothing.
std::optional<ComputeTime> ModelComputeTime(const std::optional<ComputeTime>& live, double profile_flops_per_second);

// What one record's estimates may use: the live fit of its model (when ready), and whether the record
// alone may stand in when there is no model (offline explain only: a server counts nothing it
// would have to guess).
struct EstimateSource {
  std::optional<ComputeTime> live;
  bool record_alone = false;
};

}  // namespace kvledger

#endif  // KVLEDGER_LIB_ACCOUNTING_COMPUTE_TIME_H_
