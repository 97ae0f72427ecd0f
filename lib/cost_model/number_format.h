// Numbers as people type and read them: doubles printed exactly as given (shortest round trip),
// exact products of a decimal ratio and a token count, and overflow-checked 128-bit products.
// Pure and thread-safe.
#ifndef KVLEDGER_LIB_COST_MODEL_NUMBER_FORMAT_H_
#define KVLEDGER_LIB_COST_MODEL_NUMBER_FORMAT_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "lib/cost_model/exact_int.h"

namespace kvledger {

// The shortest text that reads back as the same double: 1.0000001 prints "1.0000001", not "1";
// "nan", "inf" and "-inf" for the non-finite values.
std::string FormatDouble(double value);

// floor(ratio · tokens) computed exactly for the double `ratio` in [0, 1] (every double is a
// binary fraction, so this needs no tolerance). nullopt when ratio is outside [0, 1] or not finite.
std::optional<uint64_t> FloorRatioTimes(double ratio, uint64_t tokens);

// floor(d · tokens) for a plain decimal text `d` ("0.3", "1", ".25", "1.000") with at most
// kMaxExactDecimalPlaces places, computed exactly from the digits: "0.3" times 1000 is 300, although
// the double nearest 0.3 is below it. nullopt when the text is not such a decimal (an exponent,
// more places, a sign) — then the caller falls back to FloorRatioTimes on the parsed double.
inline constexpr int kMaxExactDecimalPlaces = 27;
std::optional<Uint128> FloorDecimalTimes(absl::string_view decimal, uint64_t tokens);

// A whole number as typed: decimal digits, or a decimal with an exponent whose value is whole
// ("8e3", "1.5e6", "80e9"; read exactly, never through a double), with a leading '-' for the signed
// form. On failure, the rule it broke, for a message that names the input first: "must be a whole
// number" for "1.5", "must be at most 18446744073709551615" past the type.
std::optional<std::string> ParseWholeNumber(absl::string_view text, uint64_t* out);
std::optional<std::string> ParseWholeNumber(absl::string_view text, int64_t* out);

// The product of the factors, or nullopt if it does not fit 128 bits (never a wrapped value).
std::optional<Uint128> CheckedProduct(std::initializer_list<Uint128> factors);
// a + b, or nullopt on overflow.
std::optional<Uint128> CheckedSum(Uint128 a, Uint128 b);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_COST_MODEL_NUMBER_FORMAT_H_
