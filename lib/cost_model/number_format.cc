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

// A whole number written as digits with an optional decimal point and exponent ("8e3", "1.5e6",
// "80e9"), read exactly (never through a double): its sign and magnitude, or nothing when the text is
// not such a number or its value is not whole or passes 2^127.
std::optional<std::pair<bool, Uint128>> ExactWhole(absl::string_view text) {
  const bool negative = !text.empty() && text[0] == '-';
  if (negative || (!text.empty() && text[0] == '+')) text.remove_prefix(1);
  const size_t e = text.find_first_of("eE");
  absl::string_view mantissa = text.substr(0, e);
  int64_t exponent = 0;
  if (e != absl::string_view::npos) {
    absl::string_view exp_text = text.substr(e + 1);
    if (!exp_text.empty() && exp_text[0] == '+') exp_text.remove_prefix(1);
    if (exp_text.empty() || exp_text.size() > 3 || !absl::SimpleAtoi(exp_text, &exponent)) return std::nullopt;
  }
  const size_t dot = mantissa.find('.');
  std::string digits(mantissa.substr(0, dot));
  if (dot != absl::string_view::npos) {
    const absl::string_view fraction = mantissa.substr(dot + 1);
    digits.append(fraction.data(), fraction.size());
    exponent -= static_cast<int64_t>(fraction.size());
  }
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  while (exponent < 0) {  // digits shifted right: only zeros may drop off
    if (digits.back() != '0') return std::nullopt;
    digits.pop_back();
    ++exponent;
    if (digits.empty()) digits = "0";
  }
  Uint128 value = 0;
  for (char c : digits) {
    auto next = CheckedProduct({value, 10});
    if (!next) return std::nullopt;
    auto sum = CheckedSum(*next, static_cast<Uint128>(c - '0'));
    if (!sum) return std::nullopt;
    value = *sum;
  }
  for (; exponent > 0; --exponent) {
    auto next = CheckedProduct({value, 10});
    if (!next) return std::nullopt;
    value = *next;
  }
  return std::make_pair(negative, value);
}

template <typename T>
std::optional<std::string> ParseWhole(absl::string_view text, T* out) {
  if (absl::SimpleAtoi(text, out)) return std::nullopt;
  const auto exact = ExactWhole(text);
  if (!exact) return std::is_signed_v<T> ? "must be a whole number" : "must be a whole number >= 0";
  const auto [negative, magnitude] = *exact;
  if (negative && magnitude != 0) {
    if (!std::is_signed_v<T>) return "must be a whole number >= 0";
    const Uint128 limit = static_cast<Uint128>(std::numeric_limits<T>::max()) + 1;
    if (magnitude > limit) return absl::StrCat("must be at least ", std::numeric_limits<T>::min());
    *out = static_cast<T>(-static_cast<__int128>(magnitude));
    return std::nullopt;
  }
  if (magnitude > static_cast<Uint128>(std::numeric_limits<T>::max())) {
    return absl::StrCat("must be at most ", std::numeric_limits<T>::max());
  }
  *out = static_cast<T>(magnitude);
  return std::nullopt;
}

}  // namespace

std::optional<std::string> ParseWholeNumber(absl::string_view text, uint64_t* out) { return ParseWhole(text, out); }
std::optional<std::string> ParseWholeNumber(absl::string_view text, int64_t* out) { return ParseWhole(text, out); }

}  // namespace kvledger
