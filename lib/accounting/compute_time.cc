#include "lib/accounting/compute_time.h"

#include <cmath>

namespace kvledger {

std::optional<ComputeTime> DecayedAffineFit::Fit() const {
  const double w = sums_.weight(), sx = sums_.sum(0), sy = sums_.sum(1), sxx2 = sums_.sum(2), sxy = sums_.sum(3);
  if (sums_.samples() == 0 || !(w >= kComputeFitMinWeight)) return std::nullopt;
  const double mean_x = sx / w;
  const double sxx = sxx2 - sx * mean_x;  // weighted sum of squared deviations of x
  if (!(mean_x > 0) || !(sxx > 0)) return std::nullopt;
  const double spread = std::sqrt(sxx / w) / mean_x;
  if (!(spread >= kComputeFitMinSpread)) return std::nullopt;
  double slope = (sxy - sx * (sy / w)) / sxx;  // seconds per unit
  double fixed = (sy - slope * sx) / w;
  if (fixed < 0) {  // the data say "no fixed cost": the line through the origin
    fixed = 0;
    slope = sxy / sxx2;
  }
  const double seconds_per_flop = slope / kUnit;
  if (!(seconds_per_flop > 0) || !std::isfinite(seconds_per_flop) || !std::isfinite(fixed)) return std::nullopt;
  return ComputeTime{Basis::kLive, fixed, seconds_per_flop, sums_.samples(), w};
}

std::optional<ComputeTime> RecordAloneComputeTime(Uint128 remaining_flops, Uint128 avoided_flops,
                                                  std::optional<double> suffix_prefill_seconds) {
  if (avoided_flops == 0 || remaining_flops < avoided_flops) return std::nullopt;
  if (!suffix_prefill_seconds || !(*suffix_prefill_seconds > 0)) return std::nullopt;
  const double seconds_per_flop = *suffix_prefill_seconds / Uint128ToDouble(remaining_flops);
  if (!(seconds_per_flop > 0) || !std::isfinite(seconds_per_flop)) return std::nullopt;
  return ComputeTime{Basis::kRecord, 0, seconds_per_flop, 1, 1};
}

std::optional<ComputeTime> ProfileComputeTime(double flops_per_second) {
  if (!(flops_per_second > 0) || !std::isfinite(flops_per_second)) return std::nullopt;
  return ComputeTime{Basis::kProfile, 0, 1.0 / flops_per_second, 0, 0};
}

std::optional<ComputeTime> ModelComputeTime(const std::optional<ComputeTime>& live, double profile_flops_per_second) {
  if (live) return live;
  return ProfileComputeTime(profile_flops_per_second);
}

}  // namespace kvledger
