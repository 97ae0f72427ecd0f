// The tiers of a plan's runs from the capacities as written (lib/capacity/ladder.h reads each).
#ifndef KVLEDGER_LIB_PLANNING_CAPACITY_H_
#define KVLEDGER_LIB_PLANNING_CAPACITY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/capacity/ladder.h"
#include "lib/cost_model/alpha_calculator.h"
#include "lib/planning/plan.h"

namespace kvledger {

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
