#include "lib/accounting/rejection.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace kvledger {

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
