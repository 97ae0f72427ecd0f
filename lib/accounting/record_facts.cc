#include "lib/accounting/record_facts.h"

#include <array>
#include <string>

namespace kvledger {

const char* TierLabel(Tier tier) {
  switch (tier) {
    case Tier::kNone: return "none";
    case Tier::kDevice: return "device";
    case Tier::kHost: return "host";
    case Tier::kDisk: return "disk";
    case Tier::kRemote: return "remote";
    case Tier::kMixed: return "mixed";
    case Tier::kUnknown: return "unknown";
  }
  return "none";
}

namespace {

// "a, b, c or d" from the labels of `tiers`, in order.
template <typename Tiers>
std::string LabelList(const Tiers& tiers) {
  std::string out;
  for (size_t i = 0; i < tiers.size(); ++i) {
    if (i > 0) out += i + 1 == tiers.size() ? " or " : ", ";
    out += TierLabel(tiers[i]);
  }
  return out;
}

std::array<Tier, kTierCount> AllTiers() {
  std::array<Tier, kTierCount> all{};
  for (int t = 0; t < kTierCount; ++t) all[static_cast<size_t>(t)] = static_cast<Tier>(t);
  return all;
}

}  // namespace

const char* SourceTierList() {
  static const std::string list = LabelList(kSourceTiers);
  return list.c_str();
}

std::optional<Tier> TierFromLabel(absl::string_view label) {
  for (int t = 0; t < kTierCount; ++t) {
    if (label == TierLabel(static_cast<Tier>(t))) return static_cast<Tier>(t);
  }
  return std::nullopt;
}

const char* TierLabelList() {
  static const std::string list = LabelList(AllTiers());
  return list.c_str();
}

}  // namespace kvledger
