#include "lib/accounting/rejection.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace kvledger {

const char* RejectReasonLabel(RejectReason reason) {
  switch (reason) {
    case RejectReason::kInvalidRequestId: return "invalid_request_id";
    case RejectReason::kInvalidModel: return "invalid_model";
    case RejectReason::kUnknownModel: return "unknown_model";
    case RejectReason::kInvalidTier: return "invalid_tier";
    case RejectReason::kInvalidPromptTokens: return "invalid_prompt_tokens";
    case RejectReason::kInvalidLogicalMatchTokens: return "invalid_logical_match_tokens";
    case RejectReason::kInvalidRecoverableTokens: return "invalid_recoverable_tokens";
    case RejectReason::kInvalidRecomputeTokens: return "invalid_recompute_tokens";
    case RejectReason::kInvalidReloadSeconds: return "invalid_reload_seconds";
    case RejectReason::kInvalidSuffixPrefillSeconds: return "invalid_suffix_prefill_seconds";
    case RejectReason::kInvalidTtftSeconds: return "invalid_ttft_seconds";
    case RejectReason::kInvalidStateBoundaries: return "invalid_state_boundaries";
    case RejectReason::kInvalidPredictedMatchTokens: return "invalid_predicted_match_tokens";
    case RejectReason::kInvalidQueueSeconds: return "invalid_queue_seconds";
    case RejectReason::kInvalidOutputTokens: return "invalid_output_tokens";
    case RejectReason::kInvalidDecodeSeconds: return "invalid_decode_seconds";
  }
  return "invalid";
}

absl::Status ToStatus(const Verdict& verdict) {
  return verdict.ok() ? absl::OkStatus() : absl::InvalidArgumentError(verdict.rejection().message);
}

absl::Status RejectionStatus(const Rejection& rejection, absl::string_view prefix) {
  absl::Status status = absl::InvalidArgumentError(absl::StrCat(prefix, rejection.message));
  status.SetPayload(kRejectReasonPayload, absl::Cord(RejectReasonLabel(rejection.reason)));
  return status;
}

std::optional<std::string> RejectReasonOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kRejectReasonPayload);  // absl::optional in this Abseil
  if (!payload) return std::nullopt;
  return std::string(*payload);
}

}  // namespace kvledger
