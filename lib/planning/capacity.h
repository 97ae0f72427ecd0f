// Cache capacities in tokens as people write them on a command line or in a query: "1e6", "3000000",
// "inf", a list "1e6,3e6,1e7", or a log-spaced range "1e6:5e7:8" (8 capacities from 1e6 to 5e7).
#ifndef KVLEDGER_LIB_PLANNING_CAPACITY_H_
#define KVLEDGER_LIB_PLANNING_CAPACITY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/accounting/capacity_curves.h"
#include "lib/cost_model/alpha_calculator.h"
#include "lib/planning/plan.h"

namespace kvledger {

// The most capacities one list or range expands to.
inline constexpr size_t kMaxCapacities = 64;

// One capacity: a whole number of tokens in integer or decimal-exponent notation (2.5e6), or "inf"
// (kUnlimitedTokens). INVALID_ARGUMENT "FLAG = VALUE: RULE" otherwise.
absl::StatusOr<uint64_t> ParseCapacity(absl::string_view text, absl::string_view flag);

// A comma-separated list of capacities, each one as ParseCapacity() reads it or FROM:TO:POINTS,
// POINTS (2..kMaxCapacities) capacities evenly spaced on a log scale from FROM to TO inclusive,
// rounded to whole tokens. Sorted ascending, duplicates removed.
absl::StatusOr<std::vector<uint64_t>> ParseCapacityList(absl::string_view text, absl::string_view flag);

// The live capacity curves' ladder (docs/cost-model.md §14) as ParseCapacityList reads it: its finite
// capacities, ascending, each > 0 and at most kMaxLadderCapacities of them ("inf" may be listed; the
// unlimited capacity is always on the ladder). Empty text: an empty ladder (no curves).
absl::StatusOr<std::vector<uint64_t>> ParseCapacityLadder(absl::string_view text, absl::string_view flag);

// The capacities of a run as written: device (a list or a range), host and disk (one each; empty: no
// such tier).
struct CapacityInputs {
  std::string device = "inf";
  std::string host, disk;
};

// One configuration per device capacity, ascending, each `base` with those tiers; at most
// `max_configs`. INVALID_ARGUMENT naming the input (`capacity_tokens`, `host_capacity_tokens`,
// `disk_capacity_tokens`, `block_tokens` as `name` spells them) for a bad value, a disk tier without
// a host tier, or a block size outside [1, kMaxBlockTokens].
absl::StatusOr<std::vector<PlanConfig>> CapacityConfigs(const CapacityInputs& inputs, const PlanConfig& base,
                                                        size_t max_configs, InputNamer name = FieldName);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_PLANNING_CAPACITY_H_
