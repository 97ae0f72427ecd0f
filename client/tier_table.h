// The second-tier table `kvledger capacity` and `kvledger plan --tier` print (docs/cost-model.md §15).
#ifndef KVLEDGER_CLIENT_TIER_TABLE_H_
#define KVLEDGER_CLIENT_TIER_TABLE_H_

#include <ostream>
#include <vector>

#include "kvledger/v1/capacity.pb.h"
#include "lib/capacity/second_tier.h"

namespace kvledger::cli {

// One row per tier size of `m` (those of `only` when it lists any): its token hit, attention and
// prefill avoided, net prefill seconds saved with the break-even threshold on, reload seconds, and the
// records whose reload is slower than recomputing with what reloading them regardless would cost.
void PrintTierTable(std::ostream& out, const v1::ModelCapacityCurve& m, const std::vector<TierSize>& only);

}  // namespace kvledger::cli

#endif  // KVLEDGER_CLIENT_TIER_TABLE_H_
