#include "lib/accounting/rejection.h"

#include "absl/strings/cord.h"

namespace kvledger {
namespace {
constexpr char kReasonPayloadUrl[] = "type.kvledger.dev/kvledger.RejectReason";
}  // namespace

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
    case RejectReason::kOther: return "other";
  }
  return "other";
}

absl::Status Reject(RejectReason reason, const std::string& message) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kReasonPayloadUrl, absl::Cord(std::string(1, static_cast<char>(reason))));
  return status;
}

RejectReason ReasonOf(const absl::Status& status) {
  auto payload = status.GetPayload(kReasonPayloadUrl);
  if (!payload || payload->size() != 1) return RejectReason::kOther;
  const int value = static_cast<unsigned char>((*payload)[0]);
  return value < kRejectReasonCount ? static_cast<RejectReason>(value) : RejectReason::kOther;
}

}  // namespace kvledger
