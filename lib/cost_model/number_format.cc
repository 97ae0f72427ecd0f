#include "lib/cost_model/number_format.h"

#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <type_traits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kvledger {

std::string FormatDouble(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::array<char, 64> buffer;
  const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  return std::string(buffer.data(), result.ptr);
}

std::optional<uint64_t> FloorRatioTimes(double ratio, uint64_t tokens) {
  if (!(std::isfinite(ratio) && ratio >= 0 && ratio <= 1)) return std::nullopt;
  if (ratio == 1) return tokens;
  if (ratio == 0) return 0;
  // ratio = mantissa · 2^(exponent - 53) with an integer mantissa < 2^53, exactly.
  int exponent = 0;
  const double fraction = std::frexp(ratio, &exponent);  // ratio = fraction · 2^exponent, 0.5 <= fraction < 1
  const auto mantissa = static_cast<uint64_t>(std::ldexp(fraction, 53));
  const int shift = 53 - exponent;  // >= 53 because ratio < 1
  const Uint128 product = Uint128{mantissa} * tokens;  // < 2^117
  if (shift >= 128) return 0;
  return static_cast<uint64_t>(product >> shift);
}

std::optional<Uint128> FloorDecimalTimes(absl::string_view text, uint64_t tokens) {
  Uint128 numerator = 0;
  Uint128 denominator = 1;
  bool seen_digit = false, seen_point = false;
  int places = 0;
  for (char c : text) {
    if (c == '.' && !seen_point) {
      seen_point = true;
      continue;
    }
    if (c < '0' || c > '9') return std::nullopt;
    seen_digit = true;
    if (seen_point) {
      if (++places > kMaxExactDecimalPlaces) return std::nullopt;
      denominator *= 10;
    }
    if (numerator > (~Uint128{0} - 9) / 10) return std::nullopt;
    numerator = numerator * 10 + static_cast<unsigned>(c - '0');
  }
  if (!seen_digit) return std::nullopt;
  // numerator / denominator · tokens, split so no intermediate overflows: q·tokens + (r·tokens)/d.
  const Uint128 whole = numerator / denominator;
  const Uint128 rest = numerator % denominator;  // < 10^27 < 2^90
  const auto whole_part = CheckedProduct({whole, tokens});
  const auto rest_part = CheckedProduct({rest, tokens});  // < 2^154 only if tokens >= 2^64: never
  if (!whole_part || !rest_part) return std::nullopt;
  return CheckedSum(*whole_part, *rest_part / denominator);
}

std::optional<Uint128> CheckedProduct(std::initializer_list<Uint128> factors) {
  Uint128 product = 1;
  for (Uint128 f : factors) {
    if (f == 0) return 0;
  }
  for (Uint128 f : factors) {
    if (__builtin_mul_overflow(product, f, &product)) return std::nullopt;
  }
  return product;
}

std::optional<Uint128> CheckedSum(Uint128 a, Uint128 b) {
  Uint128 sum;
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

namespace {

// The rule a text that is not a whole number of type T broke.
template <typename T>
std::string WholeNumberRule(absl::string_view text) {
  const bool digits = !text.empty() && text.find_first_not_of("0123456789", text[0] == '-' ? 1 : 0) ==
                                           absl::string_view::npos && text != "-";
  if (digits) {  // well formed, out of the type's range
    return text[0] == '-' ? absl::StrCat("must be at least ", std::numeric_limits<T>::min())
                          : absl::StrCat("must be at most ", std::numeric_limits<T>::max());
  }
  double value;
  if (absl::SimpleAtod(text, &value) && std::isfinite(value) && value == std::floor(value) &&
      std::fabs(value) < 9007199254740992.0 && (std::is_signed_v<T> || value >= 0)) {
    return absl::StrCat("must be a whole number written in digits (write ", static_cast<int64_t>(value), ")");
  }
  return std::is_signed_v<T> ? "must be a whole number" : "must be a whole number >= 0";
}

template <typename T>
std::optional<std::string> ParseWhole(absl::string_view text, T* out) {
  if (absl::SimpleAtoi(text, out)) return std::nullopt;
  return WholeNumberRule<T>(text);
}

}  // namespace

std::optional<std::string> ParseWholeNumber(absl::string_view text, uint64_t* out) { return ParseWhole(text, out); }
std::optional<std::string> ParseWholeNumber(absl::string_view text, int64_t* out) { return ParseWhole(text, out); }

}  // namespace kvledger
