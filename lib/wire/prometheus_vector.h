// The answer of Prometheus's instant-query API (GET /api/v1/query) as samples: what a replica reads
// back of the fleet rules (lib/accounting/fleet_rates.h).
#ifndef KVLEDGER_LIB_WIRE_PROMETHEUS_VECTOR_H_
#define KVLEDGER_LIB_WIRE_PROMETHEUS_VECTOR_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/accounting/fleet_rates.h"

namespace kvledger {

// The samples of a {"status": "success", "data": {"resultType": "vector", "result": [...]}} answer;
// each result's "metric" labels and its value (the second element of "value", a decimal string,
// "NaN" and "+Inf" included). Anything else (an error answer, another result type, a malformed
// value) is an error that says what was found. Bounded whatever the input: one pass, nesting at most
// kMaxPrometheusDepth, at most kMaxPrometheusSamples samples of kMaxPrometheusLabels labels, strings
// of at most kMaxPrometheusStringBytes; past a bound, an error naming it.
inline constexpr int kMaxPrometheusDepth = 16;
inline constexpr size_t kMaxPrometheusSamples = 50000;
inline constexpr size_t kMaxPrometheusLabels = 16;
inline constexpr size_t kMaxPrometheusStringBytes = 4096;
absl::StatusOr<std::vector<LabeledSample>> ParsePrometheusVector(absl::string_view json);

// `text` escaped for a URL's query string (RFC 3986: unreserved characters kept, the rest %XX).
std::string UrlQueryEscape(absl::string_view text);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_WIRE_PROMETHEUS_VECTOR_H_
