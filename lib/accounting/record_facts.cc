#include "lib/accounting/record_facts.h"

namespace kvledger {

const char* TierLabel(Tier tier) {
  switch (tier) {
    case Tier::kNone: return "none";
    case Tier::kDevice: return "device";
    case Tier::kHost: return "host";
    case Tier::kDisk: return "disk";
    case Tier::kRemote: return "remote";
  }
  return "none";
}

}  // namespace kvledger
