// A plan's results as JSON and CSV: what `kvledger plan --json` and `--csv` print (docs/planning.md,
// "Output"). Both take their columns from one table.
#ifndef KVLEDGER_LIB_WIRE_PLAN_JSON_H_
#define KVLEDGER_LIB_WIRE_PLAN_JSON_H_

#include <string>
#include <vector>

#include "lib/planning/plan.h"
#include "lib/profiles/profile.h"
#include "lib/wire/json_writer.h"

namespace kvledger {

// One figure of PlanTotals: its JSON key and CSV column, and its value as a JSON number (integers
// exact, ratios and seconds as shortest round-trip doubles).
struct PlanColumn {
  const char* name;
  std::string (*value)(const PlanTotals&);
};
const std::vector<PlanColumn>& PlanTotalsColumns();

// One capacity's result: capacities and the bytes they take per tier (null: unlimited, or no such
// tier), totals, totals by record tier, and the tokens each cache tier served.
JsonObject PlanResultToJson(const PlanResult& result);

// The whole run: the profile, the block size and one entry per capacity, in the order given.
// `second_tiers`: JSON of `kvledger plan --tier`'s table, added as "second_tiers" when not empty.
std::string PlanRunToJson(const Profile& profile, uint64_t block_tokens, const std::vector<PlanResult>& results,
                          const std::string& second_tiers = "");

}  // namespace kvledger

#endif  // KVLEDGER_LIB_WIRE_PLAN_JSON_H_
