// Why a record was rejected: a typed value end to end (a reason from a bounded set, the `reason`
// label of kvledger_records_rejected_total, and a message naming the field, the value and the rule).
// The service converts it to a gRPC status in one place (server/ledger_service.cc); ToStatus() gives
// the absl::Status the tests match on.
#ifndef KVLEDGER_LIB_ACCOUNTING_REJECTION_H_
#define KVLEDGER_LIB_ACCOUNTING_REJECTION_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "lib/accounting/record_facts.gen.h"
#include "lib/base/enum_table.h"

namespace kvledger {

// One reason per Record field, "invalid_" and its name, in field order (generated from the message:
// lib/accounting/record_facts.gen.h), then the reasons that are not one field's.
enum class RejectReason : uint8_t {
#define KVLEDGER_REJECT_REASON_ENUMERATOR(enumerator, label, field) enumerator,
  KVLEDGER_RECORD_FIELD_REASONS(KVLEDGER_REJECT_REASON_ENUMERATOR)
#undef KVLEDGER_REJECT_REASON_ENUMERATOR
  kUnknownModel,  // a valid model name with no profile
};
inline constexpr EnumTable<RejectReason, kRecordFieldCount + 1> kRejectReasonLabels = {{
#define KVLEDGER_REJECT_REASON_ROW(enumerator, label, field) {RejectReason::enumerator, label},
    KVLEDGER_RECORD_FIELD_REASONS(KVLEDGER_REJECT_REASON_ROW)
#undef KVLEDGER_REJECT_REASON_ROW
    {RejectReason::kUnknownModel, "unknown_model"},
}};
static_assert(IsDense(kRejectReasonLabels));
inline constexpr std::array kAllRejectReasons = ValuesOf(kRejectReasonLabels);
inline constexpr int kRejectReasonCount = static_cast<int>(kRejectReasonLabels.size());

// Label value, e.g. "invalid_prompt_tokens".
inline const char* RejectReasonLabel(RejectReason reason) { return LabelOf(kRejectReasonLabels, reason, "invalid"); }

// Why one entry was refused: a reason from a bounded set (RejectReason for records,
// EngineStatsRejectReason for engine statistics), and the message.
template <typename Reason>
struct BasicRejection {
  Reason reason;
  std::string message;  // names the field, the value and the rule, the field first
  // The field whose value broke the rule, as data: the record field ("prompt_tokens",
  // "state_boundaries") the message begins with. A surface that calls the field otherwise (the CLI's
  // --prompt-tokens) renders the message with Named(), never by rewriting the text.
  std::string field;

  // The message with its leading field named by `name`.
  template <typename Namer>
  std::string Named(Namer name) const {
    if (field.empty() || message.compare(0, field.size(), field) != 0) return message;
    return name(field) + message.substr(field.size());
  }
};

using Rejection = BasicRejection<RejectReason>;

// The verdict on one entry (a record, an engine-statistics entry): accepted (ok) or rejected. The one
// error model of the accounting; absl::Status only where a refusal leaves the domain (ToStatus,
// RejectionStatus).
template <typename Reason>
class [[nodiscard]] BasicVerdict {
 public:
  BasicVerdict() = default;  // accepted
  BasicVerdict(BasicRejection<Reason> rejection) : rejection_(std::move(rejection)) {}  // NOLINT: implicit by design
  // `message` begins with `field` (see Rejection::field).
  BasicVerdict(Reason reason, std::string field, std::string message)
      : rejection_(BasicRejection<Reason>{reason, std::move(message), std::move(field)}) {}

  bool ok() const { return !rejection_.has_value(); }
  const BasicRejection<Reason>& rejection() const { return *rejection_; }

 private:
  std::optional<BasicRejection<Reason>> rejection_;
};
using Verdict = BasicVerdict<RejectReason>;

// A value, or why the record was rejected.
template <typename T>
class [[nodiscard]] Checked {
 public:
  Checked(T value) : value_(std::move(value)) {}                  // NOLINT: implicit by design
  Checked(Rejection rejection) : rejection_(std::move(rejection)) {}  // NOLINT
  // From a failed verdict only: an accepted one carries no rejection (and no value), so it is not a
  // Checked at all; callers pass `verdict.rejection()` after checking `!verdict.ok()`.

  bool ok() const { return value_.has_value(); }
  const T& operator*() const { return *value_; }
  const T* operator->() const { return &*value_; }
  const Rejection& rejection() const { return *rejection_; }
  Verdict verdict() const { return ok() ? Verdict() : Verdict(*rejection_); }

 private:
  std::optional<T> value_;
  std::optional<Rejection> rejection_;
};

// INVALID_ARGUMENT with the rejection's message; OK for an accepted record.
absl::Status ToStatus(const Verdict& verdict);

// A refusal that is not one record's verdict (Advise) keeps the rejection's reason as a payload of
// its INVALID_ARGUMENT under this URL, so every surface can name it: the service's trailing
// metadata, the JSON API's "reason".
inline constexpr char kRejectReasonPayload[] = "kvledger.v1/reject_reason";
// INVALID_ARGUMENT with `prefix` + the message, and the reason as payload.
absl::Status RejectionStatus(const Rejection& rejection, absl::string_view prefix = {});
// The reason label a status carries, if any.
std::optional<std::string> RejectReasonOf(const absl::Status& status);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_ACCOUNTING_REJECTION_H_
