#include "lib/planning/capacity.h"

#include "absl/strings/str_cat.h"
#include "lib/base/quote.h"
#include "lib/planning/plan.h"

namespace kvledger {

absl::StatusOr<std::vector<PlanConfig>> CapacityConfigs(const CapacityInputs& inputs, const PlanConfig& base,
                                                        size_t max_configs, InputNamer name) {
  if (base.block_tokens < 1 || base.block_tokens > static_cast<uint64_t>(kMaxBlockTokens)) {
    return absl::InvalidArgumentError(absl::StrCat(name("block_tokens"), " = ", base.block_tokens,
                                                   ": must be in [1, ", kMaxBlockTokens, "]"));
  }
  PlanConfig config = base;
  const std::pair<const std::string*, const char*> lower[] = {{&inputs.host, "host_capacity_tokens"},
                                                              {&inputs.disk, "disk_capacity_tokens"}};
  for (size_t t = 1; t < kPlanTierCount; ++t) {
    config.capacity_tokens[t] = 0;
    if (lower[t - 1].first->empty()) continue;
    auto capacity = ParseCapacity(*lower[t - 1].first, name(lower[t - 1].second));
    if (!capacity.ok()) return capacity.status();
    config.capacity_tokens[t] = *capacity;
  }
  if (config.capacity_tokens[2] > 0 && config.capacity_tokens[1] == 0) {
    return absl::InvalidArgumentError(absl::StrCat(name("disk_capacity_tokens"), " needs ", name("host_capacity_tokens"),
                                                   ": a tier holds what the one above it evicts"));
  }
  auto devices = ParseCapacityList(inputs.device, name("capacity_tokens"));
  if (!devices.ok()) return devices.status();
  if (devices->size() > max_configs) {
    return absl::InvalidArgumentError(absl::StrCat(name("capacity_tokens"), " = ", Quoted(inputs.device), ": ",
                                                   devices->size(), " capacities; at most ", max_configs, " here"));
  }
  std::vector<PlanConfig> configs;
  for (uint64_t device : *devices) {
    configs.push_back(config);
    configs.back().capacity_tokens[0] = device;
  }
  return configs;
}

}  // namespace kvledger
