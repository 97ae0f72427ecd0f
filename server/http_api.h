// The read-only JSON API and the explorer page on the metrics port (docs/operations.md, "HTTP API"):
// GET /api/v1/calc, /api/v1/kv-bytes, /api/v1/explain, /api/v1/advise, /api/v1/profiles,
// /api/v1/totals and /explore. Every answer is computed by the same code as the RPCs and the CLI
// (lib/wire), with the same validation: a bad input is 400 with {"error": "<field> = <value>: <rule>"}.
#ifndef KVLEDGER_SERVER_HTTP_API_H_
#define KVLEDGER_SERVER_HTTP_API_H_

#include <vector>

#include "lib/accounting/aggregator.h"
#include "lib/accounting/live_rates.h"
#include "lib/profiles/model_registry.h"
#include "server/http_listener.h"

namespace kvledger {

// The routes; the references must outlive the listener serving them.
std::vector<HttpListener::Route> HttpApiRoutes(const ModelRegistry& registry, const Aggregator& aggregator,
                                               const LiveRates& rates);

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_HTTP_API_H_
