#include "lib/accounting/compute_time.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace kvledger {

namespace {

constexpr double kTera = 1e12;  // FLOPs are summed in units of 1e12, to keep squares well inside a double
constexpr size_t kK = kPassKnots;
// How strongly the curve is pulled towards straight lines where the records say nothing (between and
// beyond the suffix sizes seen): the second differences of h, the first differences of b, and each
// segment's tile term against h's slope there, all scaled to seconds, weigh this much against the
// records' squared residuals (per unit of weight). Small enough that where records are, they decide.
constexpr double kCurveSmoothing = 1e-6;

// The knots double from 16 to 2^20 tokens: a pass's segment is its token count's bit width; and
// from the tile up each is a multiple of the tile.
constexpr bool KnotsDouble() {
  for (size_t j = 1; j + 1 < kK; ++j) {
    if (kPassKnotTokens[j] != uint64_t{16} << (j - 1)) return false;
    if (kPassKnotTokens[j] >= kPassTileTokens && kPassKnotTokens[j] % kPassTileTokens != 0) return false;
  }
  return kPassKnotTokens[0] == 0 && kPassKnotTokens[kK - 1] == kMaxTokens && kMaxTokens % kPassTileTokens == 0;
}
static_assert(KnotsDouble());

// The curve's unknowns, in one vector, knot by knot: h at the knot, b at the knot (seconds per TFLOP),
// c of the segment from it (seconds per token of padding; none after the last knot). A sample's
// features and every penalty then lie within a few places of each other, so the solve's elimination
// stays in a narrow band.
constexpr size_t kUnknowns = 2 * kK + kPassSegments;
constexpr size_t H(size_t j) { return 3 * j; }
constexpr size_t B(size_t j) { return 3 * j + 1; }
constexpr size_t C(size_t i) { return 3 * i + 2; }
static_assert(H(kK - 1) + 2 == kUnknowns);

// The segment [k_i, k_i+1] holding `tokens` (<= kMaxTokens).
size_t Segment(uint64_t tokens) {
  return tokens < 16 ? 0 : std::min<size_t>(static_cast<size_t>(64 - __builtin_clzll(tokens)) - 4, kK - 2);
}
double Weight(size_t i, uint64_t tokens) {  // of the segment's upper knot, in [0, 1]
  const double lo = static_cast<double>(kPassKnotTokens[i]), hi = static_cast<double>(kPassKnotTokens[i + 1]);
  return (static_cast<double>(tokens) - lo) / (hi - lo);
}

// A sample's five non-zero features: h at the segment's two knots (hats at the padded tokens), b at
// the two (hats at the tokens, times the attention TFLOPs), and the segment's c (the padding).
constexpr size_t kFeatures = 5;
struct Features {
  size_t segment;
  std::array<double, kFeatures> value;
};
Features FeaturesOf(uint64_t tokens, double attention_tflops) {
  const size_t i = Segment(tokens);
  const uint64_t padded = TilePadded(tokens);
  const double wp = Weight(i, padded), wn = Weight(i, tokens);
  return {i, {1 - wp, wp, (1 - wn) * attention_tflops, wn * attention_tflops, static_cast<double>(padded - tokens)}};
}
constexpr size_t Unknown(size_t segment, size_t feature) {
  const std::array<size_t, kFeatures> at = {H(segment), H(segment + 1), B(segment), B(segment + 1), C(segment)};
  return at[feature];
}
constexpr size_t kPairs = kFeatures * (kFeatures + 1) / 2;

// Where each sum of the curve sits: the products of two unknowns' features that some segment's
// samples make (shared between the two segments of a knot), then each unknown's feature times y.
struct Layout {
  std::array<std::array<uint16_t, kPairs>, kPassSegments> pair{};  // per segment, (f, g) with f <= g
  std::array<uint16_t, kUnknowns> times_y{};
  std::array<std::array<uint16_t, 2>, kCurveSums> unknowns{};  // each sum's two unknowns (kUnknowns: y)
  size_t count = 0;
};
constexpr Layout MakeLayout() {
  Layout l;
  for (size_t i = 0; i < kPassSegments; ++i) {
    size_t p = 0;
    for (size_t f = 0; f < kFeatures; ++f) {
      for (size_t g = f; g < kFeatures; ++g, ++p) {
        const size_t u = std::min(Unknown(i, f), Unknown(i, g)), v = std::max(Unknown(i, f), Unknown(i, g));
        size_t at = 0;
        while (at < l.count && !(l.unknowns[at][0] == u && l.unknowns[at][1] == v)) ++at;
        if (at == l.count) l.unknowns[l.count++] = {static_cast<uint16_t>(u), static_cast<uint16_t>(v)};
        l.pair[i][p] = static_cast<uint16_t>(kAffineSums + at);
      }
    }
  }
  for (size_t u = 0; u < kUnknowns; ++u) {
    l.unknowns[l.count] = {static_cast<uint16_t>(u), static_cast<uint16_t>(kUnknowns)};
    l.times_y[u] = static_cast<uint16_t>(kAffineSums + l.count++);
  }
  return l;
}
constexpr Layout kLayout = MakeLayout();
static_assert(kLayout.count == kCurveSums);

std::string UnknownName(size_t u) {
  if (u == kUnknowns) return "seconds";
  return "hbc"[u % 3] + std::to_string(kPassKnotTokens[u / 3]);
}

// Solves a x = b in place by Gaussian elimination with partial pivoting, after scaling each unknown
// by its diagonal; false when singular.
template <size_t M>
bool Solve(std::array<std::array<double, M>, M>& a, std::array<double, M>& b) {
  std::array<double, M> scale{};
  for (size_t i = 0; i < M; ++i) scale[i] = a[i][i] > 0 ? 1 / std::sqrt(a[i][i]) : 1;
  for (size_t i = 0; i < M; ++i) {
    b[i] *= scale[i];
    for (size_t j = 0; j < M; ++j) a[i][j] *= scale[i] * scale[j];
  }
  for (size_t c = 0; c < M; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < M; ++r) {
      if (std::fabs(a[r][c]) > std::fabs(a[p][c])) p = r;
    }
    if (!(std::fabs(a[p][c]) > 1e-12)) return false;
    std::swap(a[p], a[c]);
    std::swap(b[p], b[c]);
    size_t end = M;  // past the pivot row's last non-zero: a banded system stays banded
    while (end > c + 1 && a[c][end - 1] == 0) --end;
    for (size_t r = 0; r < M; ++r) {
      if (r == c || a[r][c] == 0) continue;
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k < end; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (size_t i = 0; i < M; ++i) b[i] = b[i] / a[i][i] * scale[i];
  return std::all_of(b.begin(), b.end(), [](double v) { return std::isfinite(v); });
}

using Matrix = std::array<std::array<double, kUnknowns>, kUnknowns>;

// Adds weight * (c . x)^2 to the objective: the penalty's normal-equation terms.
template <size_t N>
void AddPenalty(Matrix& m, double weight, const std::array<size_t, N>& at, const std::array<double, N>& c) {
  for (size_t p = 0; p < N; ++p) {
    for (size_t q = 0; q < N; ++q) m[at[p]][at[q]] += weight * c[p] * c[q];
  }
}

// The smoothing (see kCurveSmoothing): h's change of slope at each inner knot k_j, as
// k_j (slope_j - slope_j-1), so that h runs straight beyond the passes seen; b's change from knot
// to knot, scaled by the root mean square attention TFLOPs, so that a rate runs flat beyond them
// (an attention kernel's rate saturates; it does not keep falling with the pass's size); and each
// segment's c against h's slope there, over one tile.
void AddSmoothing(Matrix& m, double weight, double attention_rms) {
  for (size_t j = 1; j < kK; ++j) {
    AddPenalty<2>(m, weight * attention_rms * attention_rms, {B(j - 1), B(j)}, {-1.0, 1.0});
    if (j + 1 == kK) break;
    const double k = static_cast<double>(kPassKnotTokens[j]);
    const double d0 = k - static_cast<double>(kPassKnotTokens[j - 1]);
    const double d1 = static_cast<double>(kPassKnotTokens[j + 1]) - k;
    AddPenalty<3>(m, weight, {H(j - 1), H(j), H(j + 1)}, {k / d0, -k / d0 - k / d1, k / d1});
  }
  constexpr double kTile = static_cast<double>(kPassTileTokens);
  for (size_t i = 0; i < kPassSegments; ++i) {
    const double slope = kTile / static_cast<double>(kPassKnotTokens[i + 1] - kPassKnotTokens[i]);
    AddPenalty<3>(m, weight, {C(i), H(i + 1), H(i)}, {kTile, slope, -slope});
  }
}

// The solution made a model: h non-decreasing and >= 0 (each knot at least the one before), b >= 0,
// each c between h's slope in its segment (a straight h) and 0 (a staircase).
PassCurve Constrained(const std::array<double, kUnknowns>& x) {
  PassCurve curve;
  double floor = 0;
  for (size_t j = 0; j < kK; ++j) floor = curve.knot_seconds[j] = std::max(x[H(j)], floor);
  for (size_t j = 0; j < kK; ++j) curve.attention_seconds_per_flop[j] = std::max(x[B(j)], 0.0) / kTera;
  for (size_t i = 0; i < kPassSegments; ++i) {
    const double slope = (curve.knot_seconds[i + 1] - curve.knot_seconds[i]) /
                         static_cast<double>(kPassKnotTokens[i + 1] - kPassKnotTokens[i]);
    curve.tile_seconds_per_token[i] = std::clamp(x[C(i)], -slope, 0.0);
  }
  return curve;
}

}  // namespace

const std::array<const char*, kComputeFitPartCount>& ComputeFitParts() {
  static const auto* names = [] {
    static std::array<std::string, kComputeFitPartCount> owned;
    owned[0] = "tflops";
    owned[1] = "seconds";
    owned[2] = "tflops_squared";
    owned[3] = "tflops_seconds";
    for (size_t s = 0; s < kCurveSums; ++s) {
      owned[kAffineSums + s] = UnknownName(kLayout.unknowns[s][0]) + "_" + UnknownName(kLayout.unknowns[s][1]);
    }
    owned[kComputeFitSums] = "weight";
    owned[kComputeFitSums + 1] = "samples";
    auto* view = new std::array<const char*, kComputeFitPartCount>;
    for (size_t i = 0; i < kComputeFitPartCount; ++i) (*view)[i] = owned[i].c_str();
    return view;
  }();
  return *names;
}

double PassCurve::Seconds(const PassFlops& pass) const {
  const size_t i = Segment(pass.tokens);
  const uint64_t padded = TilePadded(pass.tokens);
  const double wp = Weight(i, padded), wn = Weight(i, pass.tokens);
  const double h = (1 - wp) * knot_seconds[i] + wp * knot_seconds[i + 1];
  const double b = (1 - wn) * attention_seconds_per_flop[i] + wn * attention_seconds_per_flop[i + 1];
  return h + tile_seconds_per_token[i] * static_cast<double>(padded - pass.tokens) + b * pass.attention_flops;
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
  const double x = pass.flops / kTera, y = seconds;
  const Features f = FeaturesOf(pass.tokens, pass.attention_flops / kTera);
  // The sums a sample touches: the affine summary's 4, its segment's 15 products and 5 times y.
  constexpr size_t kTouched = kAffineSums + kPairs + kFeatures;
  std::array<size_t, kTouched> at;  // every entry set below (no zero fill: this is the record path)
  std::array<double, kTouched> values;
  at[0] = 0, at[1] = 1, at[2] = 2, at[3] = 3;
  values[0] = x, values[1] = y, values[2] = x * x, values[3] = x * y;
  size_t n = kAffineSums, p = 0;
  for (size_t a = 0; a < kFeatures; ++a) {
    for (size_t b = a; b < kFeatures; ++b, ++p, ++n) {
      at[n] = kLayout.pair[f.segment][p];
      values[n] = f.value[a] * f.value[b];
    }
  }
  for (size_t a = 0; a < kFeatures; ++a, ++n) {
    at[n] = kLayout.times_y[Unknown(f.segment, a)];
    values[n] = f.value[a] * y;
  }
  sums_.ObserveAt<kTouched>(at, values, now, half_life);
}

// The curve's least squares over kUnknowns unknowns with the smoothing, b >= 0 held by an active
// set: a b that comes out negative (attention is never free work that saves time) is fixed at 0 and
// the rest solved again, until none is; all of b is 0 when the records carry no attention. The
// solution is then constrained (Constrained; docs/cost-model.md §8).
std::optional<PassCurve> DecayedComputeFit::FitCurve() const {
  Matrix m{};
  std::array<double, kUnknowns> r{};
  double attention_squared = 0;  // Σ w·A²: b's products added (the hats at a sample add up to 1)
  for (size_t s = 0; s < kCurveSums; ++s) {
    const auto [u, v] = kLayout.unknowns[s];
    const double sum = sums_.sum(static_cast<int>(kAffineSums + s));
    if (v == kUnknowns) {
      r[u] = sum;
      continue;
    }
    m[u][v] = m[v][u] = sum;
    if (u % 3 == 1 && v % 3 == 1) attention_squared += (u == v ? 1 : 2) * sum;
  }
  const double w = sums_.weight();
  AddSmoothing(m, kCurveSmoothing * w, w > 0 ? std::sqrt(std::max(attention_squared, 0.0) / w) : 0);
  std::array<bool, kK> fixed{};
  fixed.fill(!(attention_squared > 0));
  for (size_t round = 0; round <= kK; ++round) {
    Matrix a = m;
    std::array<double, kUnknowns> x = r;
    for (size_t j = 0; j < kK; ++j) {
      if (!fixed[j]) continue;
      for (size_t v = 0; v < kUnknowns; ++v) a[B(j)][v] = a[v][B(j)] = 0;
      a[B(j)][B(j)] = 1;
      x[B(j)] = 0;
    }
    if (!Solve(a, x)) return std::nullopt;
    bool negative = false;
    for (size_t j = 0; j < kK; ++j) {
      if (x[B(j)] < 0) fixed[j] = negative = true;
    }
    if (!negative) return Constrained(x);
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
