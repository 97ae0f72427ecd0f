#include "lib/capacity/ladder.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/base/quote.h"
#include "lib/cost_model/number_format.h"

namespace kvledger {
namespace {

// 2^63: every capacity stays far from overflow when multiplied by a block or a byte count.
constexpr double kMaxCapacity = 9223372036854775808.0;

absl::Status Bad(absl::string_view flag, absl::string_view value, absl::string_view rule) {
  return absl::InvalidArgumentError(absl::StrCat(flag, " = ", Quoted(value), ": ", rule));
}

}  // namespace

absl::StatusOr<uint64_t> ParseCapacity(absl::string_view text, absl::string_view flag) {
  const absl::string_view value = absl::StripAsciiWhitespace(text);
  if (value == "inf" || value == "unlimited") return kUnlimited;
  // The one grammar of whole numbers (lib/cost_model/number_format.h): digits, or exactly 1e6.
  uint64_t whole = 0;
  if (!ParseWholeNumber(value, &whole) && static_cast<double>(whole) < kMaxCapacity) return whole;
  double number = 0;
  if (!absl::SimpleAtod(value, &number) || !std::isfinite(number)) {
    return Bad(flag, text, "must be a number of tokens (e.g. 1000000 or 1e6) or inf");
  }
  return Bad(flag, text, "must be a whole number of tokens from 0 to 2^63");
}

absl::StatusOr<std::vector<uint64_t>> ParseCapacityList(absl::string_view text, absl::string_view flag) {
  std::vector<uint64_t> out;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    const std::vector<absl::string_view> parts = absl::StrSplit(item, ':');
    if (parts.size() == 1) {
      auto capacity = ParseCapacity(item, flag);
      if (!capacity.ok()) return capacity.status();
      out.push_back(*capacity);
      continue;
    }
    uint64_t points = 0;
    if (parts.size() != 3 || !absl::SimpleAtoi(parts[2], &points) || points < 2 || points > kMaxCapacities) {
      return Bad(flag, item, absl::StrCat("a range is FROM:TO:POINTS with 2 to ", kMaxCapacities, " points"));
    }
    auto from = ParseCapacity(parts[0], flag);
    if (!from.ok()) return from.status();
    auto to = ParseCapacity(parts[1], flag);
    if (!to.ok()) return to.status();
    if (*from == 0 || *to == kUnlimited || *from >= *to) {
      return Bad(flag, item, "a range needs 0 < FROM < TO < inf (log-spaced)");
    }
    const double step = std::log(static_cast<double>(*to) / static_cast<double>(*from)) / static_cast<double>(points - 1);
    for (uint64_t i = 0; i < points; ++i) {
      const double value = static_cast<double>(*from) * std::exp(step * static_cast<double>(i));
      out.push_back(i + 1 == points ? *to : static_cast<uint64_t>(std::llround(value)));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (out.size() > kMaxCapacities) {
    return Bad(flag, text, absl::StrCat("at most ", kMaxCapacities, " capacities in one run"));
  }
  return out;
}

std::string LadderRule(absl::Span<const uint64_t> finite) {
  if (finite.size() > kMaxLadderCapacities) {
    return absl::StrCat(finite.size(), " finite capacities: must be at most ", kMaxLadderCapacities,
                        " (the unlimited one is always on the ladder)");
  }
  if (!finite.empty() && finite.front() == 0) return "a capacity of 0 holds nothing";
  for (size_t i = 1; i < finite.size(); ++i) {
    if (finite[i] <= finite[i - 1]) return "capacities must be ascending and distinct";
  }
  return "";
}

absl::StatusOr<std::vector<uint64_t>> ParseCapacityLadder(absl::string_view text, absl::string_view flag) {
  if (text.empty()) return std::vector<uint64_t>{};
  auto ladder = ParseCapacityList(text, flag);
  if (!ladder.ok()) return ladder.status();
  ladder->erase(std::remove(ladder->begin(), ladder->end(), kUnlimited), ladder->end());
  if (const std::string rule = LadderRule(*ladder); !rule.empty()) return Bad(flag, text, rule);
  return ladder;
}

std::string CapacityLabel(uint64_t capacity_tokens) {
  return capacity_tokens == kUnlimited ? std::string("+Inf") : absl::StrCat(capacity_tokens);
}

}  // namespace kvledger
