#include "lib/cost_model/number_format.h"

#include <cstdio>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvledger {
namespace {

constexpr Uint128 kMax128 = ~Uint128{0};

// Proves: a double prints as the shortest text that reads back as itself, never rounded to 6 digits.
TEST(FormatDoubleTest, ShortestRoundTrip) {
  EXPECT_EQ(FormatDouble(1.0000001), "1.0000001");
  EXPECT_EQ(FormatDouble(86400.0001), "86400.0001");
  EXPECT_EQ(FormatDouble(0.1), "0.1");
  EXPECT_EQ(FormatDouble(-0.5), "-0.5");
  EXPECT_EQ(FormatDouble(2), "2");
  EXPECT_EQ(FormatDouble(std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(FormatDouble(-std::numeric_limits<double>::infinity()), "-inf");
}

// Proves: floor(ratio x N) of a double is exact: checked against integer arithmetic on k/2^m
// ratios (exactly representable) for every k and many N, and at the edges.
TEST(FloorRatioTimesTest, ExactAgainstDyadicBruteForce) {
  for (uint64_t k = 0; k <= 1024; ++k) {
    const double ratio = static_cast<double>(k) / 1024;
    for (uint64_t n : {1ull, 3ull, 999ull, 1000ull, 4097ull, 2147483648ull}) {
      EXPECT_EQ(*FloorRatioTimes(ratio, n), k * n / 1024) << k << "/1024 x " << n;
    }
  }
  EXPECT_EQ(*FloorRatioTimes(0.999999999999, 1000), 999u);  // no tolerance rounds it up
  EXPECT_EQ(*FloorRatioTimes(0.3, 1000), 299u);             // the double nearest 0.3 is below it
  EXPECT_EQ(*FloorRatioTimes(1, 18446744073709551615u), 18446744073709551615u);
  EXPECT_EQ(*FloorRatioTimes(std::numeric_limits<double>::denorm_min(), 2147483648u), 0u);
  EXPECT_FALSE(FloorRatioTimes(1.0000001, 10).has_value());
  EXPECT_FALSE(FloorRatioTimes(-0.1, 10).has_value());
  EXPECT_FALSE(FloorRatioTimes(std::numeric_limits<double>::quiet_NaN(), 10).has_value());
}

// Proves: a decimal as typed is multiplied exactly: brute force over every 3-place decimal.
TEST(FloorDecimalTimesTest, ExactAgainstBruteForce) {
  char text[16];
  for (uint64_t i = 0; i <= 1000; ++i) {
    std::snprintf(text, sizeof text, "%llu.%03llu", static_cast<unsigned long long>(i / 1000),
                  static_cast<unsigned long long>(i % 1000));
    for (uint64_t n : {1ull, 7ull, 1000ull, 4096ull, 2147483648ull}) {
      EXPECT_EQ(*FloorDecimalTimes(text, n), Uint128{i} * n / 1000) << text << " x " << n;
    }
  }
  EXPECT_EQ(*FloorDecimalTimes("0.3", 1000), 300u);
  EXPECT_EQ(*FloorDecimalTimes("0.999999999999", 1000), 999u);
  EXPECT_EQ(*FloorDecimalTimes("1.0000001", 10000000), 10000001u);
  EXPECT_EQ(*FloorDecimalTimes(".5", 3), 1u);
  EXPECT_EQ(*FloorDecimalTimes("1.", 3), 3u);
  EXPECT_EQ(*FloorDecimalTimes("0.000000000000000000000000001", 2147483648u), 0u);  // 27 places
  EXPECT_FALSE(FloorDecimalTimes("0.0000000000000000000000000001", 1).has_value());  // 28 places
  EXPECT_FALSE(FloorDecimalTimes("5e-1", 10).has_value());
  EXPECT_FALSE(FloorDecimalTimes("-0.5", 10).has_value());
  EXPECT_FALSE(FloorDecimalTimes("", 10).has_value());
  EXPECT_FALSE(FloorDecimalTimes(".", 10).has_value());
  EXPECT_FALSE(FloorDecimalTimes("0.5.5", 10).has_value());
}

// Proves: products and sums past 2^128 are refused, never wrapped.
TEST(CheckedArithmeticTest, OverflowIsDetected) {
  const Uint128 two32 = Uint128{1} << 32;
  EXPECT_FALSE(CheckedProduct({2, two32, two32, two32, two32, 1}).has_value());  // 2^129: used to print 0
  EXPECT_EQ(*CheckedProduct({two32, two32, two32, two32 - 1}), (Uint128{1} << 96) * (two32 - 1));
  const Uint128 max64 = 18446744073709551615u;
  EXPECT_EQ(*CheckedProduct({max64, max64}), max64 * max64);
  EXPECT_FALSE(CheckedProduct({max64, max64, 2}).has_value());
  EXPECT_EQ(*CheckedProduct({kMax128, kMax128, 0}), 0u);  // a zero factor is zero, whatever the order
  EXPECT_EQ(*CheckedProduct({}), 1u);
  EXPECT_EQ(*CheckedSum(kMax128 - 1, 1), kMax128);
  EXPECT_FALSE(CheckedSum(kMax128, 1).has_value());
}

}  // namespace
}  // namespace kvledger

namespace kvledger {
namespace {

// One grammar for every count: digits, or a decimal with an exponent whose value is whole, read
// exactly (2^53 + 1 survives, which a double would round); what is not whole or not in range is
// named by its rule.
TEST(ParseWholeNumberTest, DigitsOrAnExactExponent) {
  uint64_t u = 0;
  int64_t i = 0;
  EXPECT_FALSE(ParseWholeNumber("8000", &u));
  EXPECT_EQ(u, 8000u);
  EXPECT_FALSE(ParseWholeNumber("8e3", &u));
  EXPECT_EQ(u, 8000u);
  EXPECT_FALSE(ParseWholeNumber("1.5e6", &u));
  EXPECT_EQ(u, 1500000u);
  EXPECT_FALSE(ParseWholeNumber("80E9", &u));
  EXPECT_EQ(u, 80000000000u);
  EXPECT_FALSE(ParseWholeNumber("9007199254740993e0", &u));
  EXPECT_EQ(u, 9007199254740993u);
  EXPECT_FALSE(ParseWholeNumber("1200e-2", &u));
  EXPECT_EQ(u, 12u);
  EXPECT_FALSE(ParseWholeNumber("-4e2", &i));
  EXPECT_EQ(i, -400);
  EXPECT_EQ(ParseWholeNumber("1.5", &u), std::string("must be a whole number >= 0"));
  EXPECT_EQ(ParseWholeNumber("1234e-2", &u), std::string("must be a whole number >= 0"));
  EXPECT_EQ(ParseWholeNumber("-4e2", &u), std::string("must be a whole number >= 0"));
  EXPECT_EQ(ParseWholeNumber("x", &i), std::string("must be a whole number"));
  EXPECT_EQ(ParseWholeNumber("1e", &u), std::string("must be a whole number >= 0"));
  EXPECT_EQ(ParseWholeNumber("2e19", &u), std::string("must be at most 18446744073709551615"));
  EXPECT_EQ(ParseWholeNumber("1e40", &u), std::string("must be a whole number >= 0"));
  EXPECT_EQ(ParseWholeNumber("-1e19", &i), std::string("must be at least -9223372036854775808"));
  EXPECT_FALSE(ParseWholeNumber("-9.223372036854775808e18", &i));
  EXPECT_EQ(i, std::numeric_limits<int64_t>::min());
}

}  // namespace
}  // namespace kvledger
