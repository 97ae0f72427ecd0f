#include "lib/accounting/record_facts.h"

#include <array>
#include <string>

namespace kvledger {

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

}  // namespace

const char* SourceTierList() {
  static const std::string list = LabelList(kSourceTiers);
  return list.c_str();
}

std::optional<Tier> TierFromLabel(absl::string_view label) { return ValueOf(kTierLabels, label); }

const char* TierLabelList() {
  static const std::string list = LabelList(ValuesOf(kTierLabels));
  return list.c_str();
}

}  // namespace kvledger
