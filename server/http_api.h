// The read-only JSON API and the explorer page on the metrics port (docs/operations.md, "HTTP API"):
// GET /api/v1/calc, /api/v1/kv-bytes, /api/v1/explain, /api/v1/advise, /api/v1/profiles,
// /api/v1/totals, /api/v1/plan (with a trace) and /explore. Every answer is computed by the same code as the RPCs and the CLI
// (lib/wire), with the same validation: a bad input is 400 with {"error": "<field> = <value>: <rule>"}.
#ifndef KVLEDGER_SERVER_HTTP_API_H_
#define KVLEDGER_SERVER_HTTP_API_H_

#include <mutex>
#include <string>
#include <vector>

#include "lib/accounting/aggregator.h"
#include "lib/capacity/capacity_curves.h"
#include "lib/accounting/fleet_rates.h"
#include "lib/accounting/live_rates.h"
#include "lib/planning/trace.h"
#include "lib/profiles/model_registry.h"
#include "server/http/listener.h"

namespace kvledger {

// The trace the server was given for /api/v1/plan (--trace_file), read whole at start.
struct PlanningTrace {
  std::string name;  // the file's name as given
  uint64_t block_tokens = kDefaultTraceBlockTokens;
  std::vector<TraceRequest> requests;
  std::mutex running;  // one plan at a time: another request meanwhile is 503
};

// Reads and checks `path`: INVALID_ARGUMENT "--trace_file = PATH: ..." listing its problems.
// --trace_file stays in the server's memory: at most 256 MiB of trace text (~10 times WEKA's trace).
inline constexpr TraceLimits kServerTraceLimits{size_t{4} << 20, uint64_t{256} << 20};

absl::StatusOr<std::unique_ptr<PlanningTrace>> LoadPlanningTrace(const std::string& path, const std::string& format,
                                                                  uint64_t block_tokens);

// The routes; the references (and `trace` and `curves`, null when none) must outlive the listener
// serving them.
std::vector<HttpListener::Route> HttpApiRoutes(const ModelRegistry& registry, const Aggregator& aggregator,
                                               const LiveRates& rates, const FleetRates* fleet,
                                               PlanningTrace* trace, const CapacityCurves* curves = nullptr);

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_HTTP_API_H_
