#include "lib/accounting/compute_time.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace kvledger {

namespace {

constexpr double kTera = 1e12;  // FLOPs are summed in units of 1e12, to keep squares well inside a double
constexpr size_t kK = kPassKnots;
// Where each curve sum sits in the sums (after the affine summary's).
constexpr size_t kDiag = kAffineSums, kOff = kDiag + kK, kHatA = kOff + kK - 1, kHatY = kHatA + kK,
                 kAA = kHatY + kK, kAY = kAA + 1;
static_assert(kAY + 1 == kComputeFitSums);
// How strongly h is pulled towards a straight line where the records say nothing (between and beyond
// the suffix sizes seen): the second differences of h, scaled to seconds at each knot, weigh this
// much against the records' squared residuals (per unit of weight). Small enough that where records
// are, they decide.
constexpr double kCurveSmoothing = 1e-6;

// The knots double from 16 to 2^20 tokens: a pass's segment is its token count's bit width.
constexpr bool KnotsDouble() {
  for (size_t j = 1; j + 1 < kK; ++j) {
    if (kPassKnotTokens[j] != uint64_t{16} << (j - 1)) return false;
  }
  return kPassKnotTokens[0] == 0 && kPassKnotTokens[kK - 1] == kMaxTokens;
}
static_assert(KnotsDouble());

// The hat functions at `tokens` (<= kMaxTokens): the segment [k_i, k_i+1] holding it and the weight
// of its upper knot.
std::pair<size_t, double> Hat(uint64_t tokens) {
  const size_t i =
      tokens < 16 ? 0 : std::min<size_t>(static_cast<size_t>(64 - __builtin_clzll(tokens)) - 4, kK - 2);
  const double lo = static_cast<double>(kPassKnotTokens[i]), hi = static_cast<double>(kPassKnotTokens[i + 1]);
  return {i, (static_cast<double>(tokens) - lo) / (hi - lo)};
}

// Solves a x = b in place (n <= kK + 1) by Gaussian elimination with partial pivoting, after scaling
// each unknown by its diagonal; false when singular.
template <size_t M>
bool Solve(std::array<std::array<double, M>, M>& a, std::array<double, M>& b, size_t n) {
  std::array<double, M> scale{};
  for (size_t i = 0; i < n; ++i) scale[i] = a[i][i] > 0 ? 1 / std::sqrt(a[i][i]) : 1;
  for (size_t i = 0; i < n; ++i) {
    b[i] *= scale[i];
    for (size_t j = 0; j < n; ++j) a[i][j] *= scale[i] * scale[j];
  }
  for (size_t c = 0; c < n; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < n; ++r) {
      if (std::fabs(a[r][c]) > std::fabs(a[p][c])) p = r;
    }
    if (!(std::fabs(a[p][c]) > 1e-12)) return false;
    std::swap(a[p], a[c]);
    std::swap(b[p], b[c]);
    for (size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (size_t i = 0; i < n; ++i) b[i] = b[i] / a[i][i] * scale[i];
  return std::all_of(b.begin(), b.begin() + static_cast<ptrdiff_t>(n), [](double v) { return std::isfinite(v); });
}

}  // namespace

const std::array<const char*, kComputeFitPartCount>& ComputeFitParts() {
  static const auto* names = [] {
    static std::array<std::string, kComputeFitPartCount> owned;
    owned[0] = "tflops";
    owned[1] = "seconds";
    owned[2] = "tflops_squared";
    owned[3] = "tflops_seconds";
    for (size_t j = 0; j < kK; ++j) {
      const std::string k = std::to_string(kPassKnotTokens[j]);
      owned[kDiag + j] = "pass_" + k + "_" + k;
      if (j + 1 < kK) owned[kOff + j] = "pass_" + k + "_" + std::to_string(kPassKnotTokens[j + 1]);
      owned[kHatA + j] = "pass_" + k + "_attention_tflops";
      owned[kHatY + j] = "pass_" + k + "_seconds";
    }
    owned[kAA] = "attention_tflops_squared";
    owned[kAY] = "attention_tflops_seconds";
    owned[kComputeFitSums] = "weight";
    owned[kComputeFitSums + 1] = "samples";
    auto* view = new std::array<const char*, kComputeFitPartCount>;
    for (size_t i = 0; i < kComputeFitPartCount; ++i) (*view)[i] = owned[i].c_str();
    return view;
  }();
  return *names;
}

double PassCurve::Seconds(const PassFlops& pass) const {
  const auto [i, w] = Hat(pass.tokens);
  return (1 - w) * knot_seconds[i] + w * knot_seconds[i + 1] + pass.attention_flops * seconds_per_attention_flop;
}

double ComputeTime::PassSeconds(const PassFlops& pass) const {
  return curve ? curve->Seconds(pass) : fixed_seconds + pass.flops * seconds_per_flop;
}

double ComputeTime::RecomputeSeconds(const PassFlops& full, const PassFlops& suffix) const {
  if (full.tokens <= suffix.tokens) return 0;  // nothing reused
  if (curve) return std::max(0.0, curve->Seconds(full) - curve->Seconds(suffix));
  return (full.flops - suffix.flops) * seconds_per_flop;
}

void DecayedComputeFit::Observe(const PassFlops& pass, double seconds, double now, double half_life) {
  const double x = pass.flops / kTera, a = pass.attention_flops / kTera, y = seconds;
  const auto [i, w] = Hat(pass.tokens);
  const double lo = 1 - w, hi = w;
  // The 13 sums a sample touches (two hat functions are non-zero); the other 66 add 0.
  sums_.ObserveAt<13>({0, 1, 2, 3, kDiag + i, kDiag + i + 1, kOff + i, kHatA + i, kHatA + i + 1, kHatY + i,
                       kHatY + i + 1, kAA, kAY},
                      {x, y, x * x, x * y, lo * lo, hi * hi, lo * hi, lo * a, hi * a, lo * y, hi * y, a * a, a * y},
                      now, half_life);
}

// The curve's least squares: unknowns h at each knot, then the attention seconds per TFLOP (left out
// when the records carry no attention, or when it comes out negative: attention is never free work
// that saves time). h is then made non-decreasing and >= 0 (docs/cost-model.md §8).
std::optional<PassCurve> DecayedComputeFit::FitCurve() const {
  constexpr size_t kN = kK + 1;
  for (bool with_attention : {true, false}) {
    if (with_attention && !(sums_.sum(kAA) > 0)) continue;
    std::array<std::array<double, kN>, kN> m{};
    std::array<double, kN> r{};
    for (size_t j = 0; j < kK; ++j) {
      m[j][j] = sums_.sum(kDiag + j);
      if (j + 1 < kK) m[j][j + 1] = m[j + 1][j] = sums_.sum(kOff + j);
      r[j] = sums_.sum(kHatY + j);
      if (with_attention) m[j][kK] = m[kK][j] = sums_.sum(kHatA + j);
    }
    m[kK][kK] = sums_.sum(kAA);
    r[kK] = sums_.sum(kAY);
    const double penalty = kCurveSmoothing * sums_.weight();
    for (size_t j = 1; j + 1 < kK; ++j) {  // k_j (slope_j - slope_j-1), as a combination of h_j-1, h_j, h_j+1
      const double k = static_cast<double>(kPassKnotTokens[j]);
      const double d0 = k - static_cast<double>(kPassKnotTokens[j - 1]);
      const double d1 = static_cast<double>(kPassKnotTokens[j + 1]) - k;
      const std::array<double, 3> c = {k / d0, -k / d0 - k / d1, k / d1};
      for (size_t p = 0; p < 3; ++p) {
        for (size_t q = 0; q < 3; ++q) m[j - 1 + p][j - 1 + q] += penalty * c[p] * c[q];
      }
    }
    if (!Solve(m, r, with_attention ? kN : kK)) continue;
    if (with_attention && r[kK] < 0) continue;
    PassCurve curve;
    double floor = 0;
    for (size_t j = 0; j < kK; ++j) floor = curve.knot_seconds[j] = std::max(r[j], floor);
    curve.seconds_per_attention_flop = with_attention ? r[kK] / kTera : 0;
    return curve;
  }
  return std::nullopt;
}

std::optional<ComputeTime> DecayedComputeFit::Fit() const {
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
  const double seconds_per_flop = slope / kTera;
  if (!(seconds_per_flop > 0) || !std::isfinite(seconds_per_flop) || !std::isfinite(fixed)) return std::nullopt;
  return ComputeTime{Basis::kLive, fixed, seconds_per_flop, sums_.samples(), w, FitCurve()};
}

std::optional<ComputeTime> RecordAloneComputeTime(Uint128 remaining_flops, Uint128 avoided_flops,
                                                  std::optional<double> suffix_prefill_seconds) {
  if (avoided_flops == 0 || remaining_flops < avoided_flops) return std::nullopt;
  if (!suffix_prefill_seconds || !(*suffix_prefill_seconds > 0)) return std::nullopt;
  const double seconds_per_flop = *suffix_prefill_seconds / Uint128ToDouble(remaining_flops);
  if (!(seconds_per_flop > 0) || !std::isfinite(seconds_per_flop)) return std::nullopt;
  return ComputeTime{Basis::kRecord, 0, seconds_per_flop, 1, 1, std::nullopt};
}

std::optional<ComputeTime> ProfileComputeTime(double flops_per_second) {
  if (!(flops_per_second > 0) || !std::isfinite(flops_per_second)) return std::nullopt;
  return ComputeTime{Basis::kProfile, 0, 1.0 / flops_per_second, 0, 0, std::nullopt};
}

std::optional<ComputeTime> ModelComputeTime(const std::optional<ComputeTime>& live, double profile_flops_per_second) {
  if (live) return live;
  return ProfileComputeTime(profile_flops_per_second);
}

}  // namespace kvledger
