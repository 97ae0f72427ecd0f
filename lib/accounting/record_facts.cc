#include "lib/accounting/record_facts.h"

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

const char* SourceTierList() { return "device, host, disk or remote"; }

std::optional<Tier> TierFromLabel(absl::string_view label) {
  for (int t = 0; t < kTierCount; ++t) {
    if (label == TierLabel(static_cast<Tier>(t))) return static_cast<Tier>(t);
  }
  return std::nullopt;
}

const char* TierLabelList() { return "none, device, host, disk, remote, mixed or unknown"; }

}  // namespace kvledger
