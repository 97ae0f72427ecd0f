#include "lib/capacity/second_tier.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/base/quote.h"
#include "lib/cost_model/number_format.h"

namespace kvledger {
namespace {

absl::Status Bad(absl::string_view flag, absl::string_view value, absl::string_view rule) {
  return absl::InvalidArgumentError(absl::StrCat(flag, " = ", Quoted(value), ": ", rule));
}

constexpr std::array<std::pair<const char*, double>, 8> kByteUnits = {{{"KiB", 1024.0},
                                                                      {"MiB", 1048576.0},
                                                                      {"GiB", 1073741824.0},
                                                                      {"TiB", 1099511627776.0},
                                                                      {"KB", 1e3},
                                                                      {"MB", 1e6},
                                                                      {"GB", 1e9},
                                                                      {"TB", 1e12}}};

// 2^60 bytes (an exbibyte): far past any tier, and far from overflow in a product with a block count.
constexpr double kMaxTierBytes = 1152921504606846976.0;

absl::StatusOr<double> ParsePositive(absl::string_view text, absl::string_view flag, absl::string_view item,
                                     absl::string_view what, bool zero_ok) {
  double value = 0;
  if (!absl::SimpleAtod(text, &value) || !std::isfinite(value) || value < 0 || (!zero_ok && value == 0)) {
    return Bad(flag, item, absl::StrCat(what, " must be a ", zero_ok ? "non-negative" : "positive", " number"));
  }
  return value;
}

absl::StatusOr<TierSize> ParseTierSize(absl::string_view item, absl::string_view flag) {
  const std::vector<absl::string_view> parts = absl::StrSplit(item, ':');
  const std::optional<Tier> kind = ValueOf(kTierLabels, absl::StripAsciiWhitespace(parts[0]));
  if (parts.size() < 2 || parts.size() > 4 || !kind ||
      (*kind != Tier::kHost && *kind != Tier::kDisk && *kind != Tier::kRemote)) {
    return Bad(flag, item, "a tier is KIND:SIZE[:BYTES_PER_SECOND[:WAIT_SECONDS]] with KIND host, disk or remote");
  }
  TierSize size;
  size.kind = *kind;
  auto bytes = ParseByteSize(parts[1], flag);
  if (!bytes.ok()) return bytes.status();
  if (*bytes == 0) return Bad(flag, item, "a tier of 0 bytes holds nothing");
  size.bytes = *bytes;
  if (parts.size() >= 3) {
    auto bandwidth = ParsePositive(parts[2], flag, item, "BYTES_PER_SECOND", false);
    if (!bandwidth.ok()) return bandwidth.status();
    size.stated_bytes_per_second = *bandwidth;
  }
  if (parts.size() == 4) {
    auto wait = ParsePositive(parts[3], flag, item, "WAIT_SECONDS", true);
    if (!wait.ok()) return wait.status();
    size.wait_seconds = *wait;
  }
  return size;
}

}  // namespace

double StatedTierBandwidth(Tier kind) {
  switch (kind) {
    case Tier::kHost:
      return 25e9;
    case Tier::kDisk:
      return 6e9;
    case Tier::kRemote:
      return 12.5e9;
    default:
      return 0;
  }
}

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text, absl::string_view flag) {
  absl::string_view number = absl::StripAsciiWhitespace(text);
  double unit = 1;
  for (const auto& [suffix, factor] : kByteUnits) {
    if (absl::EndsWith(number, suffix)) {
      number.remove_suffix(absl::string_view(suffix).size());
      unit = factor;
      break;
    }
  }
  double value = 0;
  if (!absl::SimpleAtod(number, &value) || !std::isfinite(value) || value < 0 || value * unit > kMaxTierBytes) {
    return Bad(flag, text, "must be a size in bytes up to 2^60, e.g. 1099511627776, 1TiB, 512GB or 2.5e11");
  }
  const double bytes = value * unit;
  if (bytes != std::floor(bytes)) return Bad(flag, text, "must be a whole number of bytes");
  return static_cast<uint64_t>(bytes);
}

absl::StatusOr<std::vector<TierSize>> ParseTierLadder(absl::string_view text, absl::string_view flag) {
  std::vector<TierSize> out;
  if (absl::StripAsciiWhitespace(text).empty()) return out;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    auto size = ParseTierSize(item, flag);
    if (!size.ok()) return size.status();
    for (const TierSize& other : out) {
      if (other.kind == size->kind && other.bytes == size->bytes) {
        return Bad(flag, text, absl::StrCat("the ", TierLabel(size->kind), " tier of ", size->bytes,
                                            " bytes is listed twice"));
      }
    }
    out.push_back(*size);
  }
  if (out.size() > kMaxTierSizes) {
    return Bad(flag, text, absl::StrCat(out.size(), " tier sizes: must be at most ", kMaxTierSizes));
  }
  return out;
}

std::string TierBytesLabel(uint64_t bytes) { return absl::StrCat(bytes); }

TierReload ChooseTierReload(double bytes, double recompute_seconds, double bytes_per_second, double wait_seconds) {
  TierReload r;
  r.reload_seconds = wait_seconds + bytes / bytes_per_second;
  r.recompute_seconds = recompute_seconds;
  r.slower = !(r.reload_seconds < r.recompute_seconds);
  return r;
}

}  // namespace kvledger
