// Engine-level observations that are not one request's record (docs/operations.md, "Engine
// statistics"): aggregate KV transfers per (model, tier) — bytes and seconds an engine's connector
// moved, with no request attached — and finished requests that did not become records, by reason.
//
// Transfers feed LiveRates' reload bandwidth (what Advise reads) and their own counters; they never
// touch a per-request figure. Unrecorded requests are only counted. Each entry is validated on its
// own: a bad one is rejected with a message naming the entry, the field, the value and the rule,
// and counted by reason; the others count.
//
// Exact: bytes, tokens and requests are integers, seconds are summed in nanounits like the record
// figures. Thread-safe (one mutex: engines report these once per stats interval, not per request).
#ifndef KVLEDGER_LIB_ACCOUNTING_ENGINE_STATS_H_
#define KVLEDGER_LIB_ACCOUNTING_ENGINE_STATS_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "lib/accounting/rejection.h"
#include "lib/base/enum_table.h"
#include "lib/accounting/live_rates.h"
#include "lib/accounting/record_facts.h"
#include "lib/base/mutex.h"
#include "lib/cost_model/exact_int.h"
#include "lib/profiles/model_registry.h"

namespace kvledger {

// Why finished requests did not become records; the wire enum value minus one.
enum class UnrecordedReason : uint8_t { kAborted = 0, kFailed = 1 };
inline constexpr EnumTable<UnrecordedReason, 2> kUnrecordedReasonLabels = {
    {{UnrecordedReason::kAborted, "aborted"}, {UnrecordedReason::kFailed, "failed"}}};
static_assert(IsDense(kUnrecordedReasonLabels));
inline const char* UnrecordedReasonLabel(UnrecordedReason reason) {
  return LabelOf(kUnrecordedReasonLabels, reason, "aborted");
}

// Why an engine-statistics entry was rejected: the reason label of kvledger_engine_stats_rejected_total.
enum class EngineStatsRejectReason : uint8_t {
  kInvalidModel,
  kUnknownModel,
  kInvalidTier,
  kInvalidBytes,
  kInvalidSeconds,
  kInvalidTransfers,
  kInvalidReason,
  kInvalidRequests,
  kInvalidLogicalMatchTokens,
};
inline constexpr EnumTable<EngineStatsRejectReason, 9> kEngineStatsRejectReasonLabels = {{
    {EngineStatsRejectReason::kInvalidModel, "invalid_model"},
    {EngineStatsRejectReason::kUnknownModel, "unknown_model"},
    {EngineStatsRejectReason::kInvalidTier, "invalid_tier"},
    {EngineStatsRejectReason::kInvalidBytes, "invalid_bytes"},
    {EngineStatsRejectReason::kInvalidSeconds, "invalid_seconds"},
    {EngineStatsRejectReason::kInvalidTransfers, "invalid_transfers"},
    {EngineStatsRejectReason::kInvalidReason, "invalid_reason"},
    {EngineStatsRejectReason::kInvalidRequests, "invalid_requests"},
    {EngineStatsRejectReason::kInvalidLogicalMatchTokens, "invalid_logical_match_tokens"},
}};
static_assert(IsDense(kEngineStatsRejectReasonLabels));
inline constexpr int kEngineStatsRejectReasonCount = static_cast<int>(kEngineStatsRejectReasonLabels.size());
inline const char* EngineStatsRejectReasonLabel(EngineStatsRejectReason reason) {
  return LabelOf(kEngineStatsRejectReasonLabels, reason, "invalid_model");
}

// An entry's verdict; the message names the entry, e.g. "transfers[2].seconds = -1: must be ...".
using EngineStatsVerdict = BasicVerdict<EngineStatsRejectReason>;

// One TransferObservation as the domain sees it; `model` views into the caller's message.
struct TransferFacts {
  absl::string_view model;
  int tier_value = 0;       // raw wire enum value
  uint64_t bytes = 0;
  double seconds = 0;
  uint64_t transfers = 0;   // 0: one
};

// One UnrecordedRequests entry.
struct UnrecordedFacts {
  absl::string_view model;
  int reason_value = 0;     // raw wire enum value: 1 aborted, 2 failed
  uint64_t requests = 0;
  uint64_t logical_match_tokens = 0;
};

inline constexpr uint64_t kMaxTransferBytes = uint64_t{1} << 53;   // exact in a double
inline constexpr double kMaxTransferSeconds = 86400;
inline constexpr uint64_t kMaxUnrecordedRequests = uint64_t{1} << 40;

class EngineStats {
 public:
  // `registry` resolves and labels models exactly as for records; `rates` (may be null) receives
  // transfers. Both must outlive this.
  EngineStats(ModelRegistry& registry, LiveRates* rates) : registry_(registry), rates_(rates) {}

  // Validates and counts one entry; `where` prefixes messages ("transfers[2]."). A rejected entry
  // is counted by reason and changes nothing else.
  EngineStatsVerdict AddTransfer(const TransferFacts& facts, absl::string_view where);
  EngineStatsVerdict AddUnrecorded(const UnrecordedFacts& facts, absl::string_view where);

  struct TransferTotals {
    Uint128 bytes = 0;
    Uint128 seconds_nanounits = 0;
    Uint128 transfers = 0;  // 128-bit, like every sum: 2^40 an entry never wraps
  };
  struct UnrecordedTotals {
    Uint128 requests = 0;
    Uint128 logical_match_tokens = 0;
  };
  struct Snapshot {
    std::map<std::pair<uint32_t, Tier>, TransferTotals> transfers;                  // by (label slot, tier)
    std::map<std::pair<uint32_t, UnrecordedReason>, UnrecordedTotals> unrecorded;  // by (label slot, reason)
    std::array<uint64_t, kEngineStatsRejectReasonCount> rejected{};
  };
  Snapshot Totals() const;

 private:
  EngineStatsVerdict Reject(EngineStatsRejectReason reason, std::string message);
  // The label slot of a valid model name, or the rejection (unknown model under kReject).
  EngineStatsVerdict Label(absl::string_view model, absl::string_view where, LabelSlot* label);

  ModelRegistry& registry_;
  LiveRates* const rates_;
  mutable Mutex mu_;
  Snapshot totals_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvledger

#endif  // KVLEDGER_LIB_ACCOUNTING_ENGINE_STATS_H_
