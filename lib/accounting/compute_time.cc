#include "lib/accounting/compute_time.h"

#include <cmath>

namespace kvledger {

const char* BasisLabel(Basis basis) {
  switch (basis) {
    case Basis::kLive:
      return "live";
    case Basis::kProfile:
      return "profile";
    case Basis::kRecord:
      return "record";
    case Basis::kNone:
      break;
  }
  return "none";
}

void DecayedAffineFit::Observe(double flops, double seconds, double now, double half_life) {
  const double x = flops / kUnit;
  double keep_sums = 1;
  double keep_sample = 1;
  if (samples_ == 0) {
    keep_sums = 0;
    at_ = now;
  } else if (now > at_) {
    keep_sums = std::exp2(-(now - at_) / half_life);
    at_ = now;
  } else if (now < at_) {  // a sample older than the sums (another thread's clock read): decay it instead
    keep_sample = std::exp2(-(at_ - now) / half_life);
  }
  w_ = w_ * keep_sums + keep_sample;
  x_ = x_ * keep_sums + keep_sample * x;
  y_ = y_ * keep_sums + keep_sample * seconds;
  xx_ = xx_ * keep_sums + keep_sample * x * x;
  xy_ = xy_ * keep_sums + keep_sample * x * seconds;
  ++samples_;
}

void DecayedAffineFit::AddDecayedTo(DecayedAffineFit& into, double now, double half_life) const {
  if (samples_ == 0) return;
  const double keep = std::exp2(-(now - at_) / half_life);  // > 1 only for a clock read before at_
  into.w_ += w_ * keep;
  into.x_ += x_ * keep;
  into.y_ += y_ * keep;
  into.xx_ += xx_ * keep;
  into.xy_ += xy_ * keep;
  into.samples_ += samples_;
  into.at_ = now;
}

std::optional<ComputeTime> DecayedAffineFit::Fit() const {
  if (samples_ == 0 || !(w_ >= kComputeFitMinWeight)) return std::nullopt;
  const double mean_x = x_ / w_;
  const double sxx = xx_ - x_ * mean_x;  // weighted sum of squared deviations of x
  if (!(mean_x > 0) || !(sxx > 0)) return std::nullopt;
  const double spread = std::sqrt(sxx / w_) / mean_x;
  if (!(spread >= kComputeFitMinSpread)) return std::nullopt;
  double slope = (xy_ - x_ * (y_ / w_)) / sxx;  // seconds per unit
  double fixed = (y_ - slope * x_) / w_;
  if (fixed < 0) {  // the data say "no fixed cost": the line through the origin
    fixed = 0;
    slope = xy_ / xx_;
  }
  const double seconds_per_flop = slope / kUnit;
  if (!(seconds_per_flop > 0) || !std::isfinite(seconds_per_flop) || !std::isfinite(fixed)) return std::nullopt;
  return ComputeTime{Basis::kLive, fixed, seconds_per_flop, samples_, w_};
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
