// What `kvledger plan` prints for people (a table per run and per record tier), for spreadsheets
// (CSV) and as a picture (an SVG curve against device capacity).
#ifndef KVLEDGER_CLIENT_PLAN_OUTPUT_H_
#define KVLEDGER_CLIENT_PLAN_OUTPUT_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/planning/plan.h"
#include "lib/profiles/profile.h"

namespace kvledger::cli {

// One line on the context applied and the requests beyond it, or that none is stated.
std::string DescribeContext(const Profile& profile, const std::vector<TraceRequest>& trace, const PlanResult& r);

void PrintPlanText(std::ostream& out, const Profile& profile, const std::vector<TraceRequest>& trace,
                   const std::vector<PlanResult>& results);

// A header, then per capacity one row per record tier that has requests and one for the total.
void PrintPlanCsv(std::ostream& out, const std::vector<PlanResult>& results);

// The token hit ratio, attention avoided and prefill avoided against the device capacity (log
// scale), titled with the model and `trace` (its path, "-" for stdin), the share axis up to the data's
// highest point rounded up to 10 %; an unlimited capacity is drawn as a level line. What was written,
// in a line for the user; INVALID_ARGUMENT for a FILE not ending in .svg or fewer than two finite,
// non-zero device capacities.
absl::StatusOr<std::string> WritePlanPlot(const std::string& path, const Profile& profile,
                                          const std::vector<PlanResult>& results, const std::string& trace);

}  // namespace kvledger::cli

#endif  // KVLEDGER_CLIENT_PLAN_OUTPUT_H_
