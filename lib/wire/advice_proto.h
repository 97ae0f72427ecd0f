// The Advise request and answer between the wire (kvledger.v1.AdviceRequest / Advice) and the
// domain, and the answer's JSON (the CLI's `advise --json` and GET /api/v1/advise print the same).
#ifndef KVLEDGER_LIB_WIRE_ADVICE_PROTO_H_
#define KVLEDGER_LIB_WIRE_ADVICE_PROTO_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kvledger/v1/advice.pb.h"
#include "lib/advice/advisor.h"

namespace kvledger {

AdviceRequestInput AdviceRequestFromProto(const v1::AdviceRequest& request);

// "TIER:MATCH" or "TIER:MATCH:RECOVERABLE" (e.g. "host:3000"), as the CLI's --candidate and the HTTP
// API's candidate= take it. INVALID_ARGUMENT names `what` (e.g. "--candidate") and the text.
absl::StatusOr<v1::AdviceCandidate> ParseCandidate(absl::string_view text, absl::string_view what);
v1::Advice AdviceToProto(const Advice& advice);

// {"model", "prompt_tokens", "recommendation": "host" | ... | "recompute" | null, "saving_seconds",
//  "recompute_all_seconds", "compute": {...}, "candidates": [{"tier", "match_tokens", "reused_tokens",
//  "reused_bytes", "reload_seconds", "recompute_seconds", "prefill_seconds", "basis", "samples",
//  "bandwidth": {...}}]}; an unknown figure is null.
std::string AdviceToJson(const v1::Advice& advice);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_WIRE_ADVICE_PROTO_H_
