// Why a record was rejected: a bounded set of reasons (the `reason` label of
// kvledger_records_rejected_total) carried inside an INVALID_ARGUMENT absl::Status whose message
// names the field, the value and the rule.
#ifndef KVLEDGER_LIB_ACCOUNTING_REJECTION_H_
#define KVLEDGER_LIB_ACCOUNTING_REJECTION_H_

#include <string>

#include "absl/status/status.h"

namespace kvledger {

enum class RejectReason : uint8_t {
  kInvalidRequestId,
  kInvalidModel,
  kUnknownModel,
  kInvalidTier,
  kInvalidPromptTokens,
  kInvalidLogicalMatchTokens,
  kInvalidRecoverableTokens,
  kInvalidRecomputeTokens,
  kInvalidReloadSeconds,
  kInvalidSuffixPrefillSeconds,
  kInvalidTtftSeconds,
  kInvalidStateBoundaries,
  kOther,  // a status without a reason payload
};
inline constexpr int kRejectReasonCount = static_cast<int>(RejectReason::kOther) + 1;

// Label value, e.g. "invalid_prompt_tokens".
const char* RejectReasonLabel(RejectReason reason);

// INVALID_ARGUMENT with `message` and the reason attached as a payload.
absl::Status Reject(RejectReason reason, const std::string& message);

// The reason attached by Reject(), or kOther.
RejectReason ReasonOf(const absl::Status& status);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_ACCOUNTING_REJECTION_H_
