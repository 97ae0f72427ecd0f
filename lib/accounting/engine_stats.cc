#include "lib/accounting/engine_stats.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "lib/accounting/figure_schema.h"
#include "lib/accounting/validation.h"
#include "lib/cost_model/number_format.h"

namespace kvledger {

EngineStatsVerdict EngineStats::Reject(EngineStatsRejectReason reason, std::string message) {
  MutexLock lock(&mu_);
  ++totals_.rejected[static_cast<size_t>(reason)];
  return EngineStatsVerdict(reason, "", std::move(message));
}

EngineStatsVerdict EngineStats::Label(absl::string_view model, absl::string_view where,
                                                       LabelSlot* label) {
  if (std::string problem = ModelNameProblem(model, absl::StrCat(where, "model")); !problem.empty()) {
    return Reject(EngineStatsRejectReason::kInvalidModel, std::move(problem));
  }
  const absl::StatusOr<Resolution> resolved = registry_.Resolve(model);
  if (!resolved.ok()) {
    return Reject(EngineStatsRejectReason::kUnknownModel, absl::StrCat(where, resolved.status().message()));
  }
  *label = resolved->label ? *resolved->label : registry_.ClaimLabel(model, resolved->profile);
  return {};
}

EngineStatsVerdict EngineStats::AddTransfer(const TransferFacts& f, absl::string_view where) {
  if (!IsSourceTierValue(f.tier_value)) {
    return Reject(EngineStatsRejectReason::kInvalidTier,
                  absl::StrCat(where, "tier = ", f.tier_value, ": must be the tier the data came from: ",
                               SourceTierList(), " (1-4)"));
  }
  if (f.bytes > kMaxTransferBytes) {
    return Reject(EngineStatsRejectReason::kInvalidBytes,
                  absl::StrCat(where, "bytes = ", f.bytes, ": must be <= 2^53 (", kMaxTransferBytes, ")"));
  }
  if (!std::isfinite(f.seconds) || f.seconds <= 0 || f.seconds > kMaxTransferSeconds) {
    return Reject(EngineStatsRejectReason::kInvalidSeconds,
                  absl::StrCat(where, "seconds = ", FormatDouble(f.seconds), ": must be finite, > 0 and <= ",
                               kMaxTransferSeconds, " seconds"));
  }
  if (f.transfers > kMaxUnrecordedRequests) {
    return Reject(EngineStatsRejectReason::kInvalidTransfers,
                  absl::StrCat(where, "transfers = ", f.transfers, ": must be <= 2^40"));
  }
  LabelSlot label;
  if (EngineStatsVerdict labelled = Label(f.model, where, &label); !labelled.ok()) return labelled;
  const Tier tier = static_cast<Tier>(f.tier_value);
  {
    MutexLock lock(&mu_);
    TransferTotals& t = totals_.transfers[{label.slot, tier}];
    t.bytes += f.bytes;
    t.seconds_nanounits += ToNanoUnits(f.seconds);
    t.transfers += Uint128{f.transfers == 0 ? 1 : f.transfers};
  }
  // Rates are per model: an observation folded into "other" would mix models.
  if (rates_ != nullptr && !label.folded) {
    rates_->ObserveTransfer(label.slot, tier, static_cast<double>(f.bytes), f.seconds);
  }
  return {};
}

EngineStatsVerdict EngineStats::AddUnrecorded(const UnrecordedFacts& f, absl::string_view where) {
  if (f.reason_value != 1 && f.reason_value != 2) {
    return Reject(EngineStatsRejectReason::kInvalidReason,
                  absl::StrCat(where, "reason = ", f.reason_value,
                               ": must be UNRECORDED_REASON_ABORTED (1) or UNRECORDED_REASON_FAILED (2)"));
  }
  if (f.requests < 1 || f.requests > kMaxUnrecordedRequests) {
    return Reject(EngineStatsRejectReason::kInvalidRequests,
                  absl::StrCat(where, "requests = ", f.requests, ": must be in [1, 2^40]"));
  }
  if (Uint128{f.logical_match_tokens} > Uint128{f.requests} * kMaxTokens) {
    return Reject(EngineStatsRejectReason::kInvalidLogicalMatchTokens,
                  absl::StrCat(where, "logical_match_tokens = ", f.logical_match_tokens,
                               ": must be <= requests * 2^31 = ", Uint128ToString(Uint128{f.requests} * kMaxTokens)));
  }
  LabelSlot label;
  if (EngineStatsVerdict labelled = Label(f.model, where, &label); !labelled.ok()) return labelled;
  const auto reason = static_cast<UnrecordedReason>(f.reason_value - 1);
  MutexLock lock(&mu_);
  UnrecordedTotals& t = totals_.unrecorded[{label.slot, reason}];
  t.requests += Uint128{f.requests};
  t.logical_match_tokens += f.logical_match_tokens;
  return {};
}

EngineStats::Snapshot EngineStats::Totals() const {
  MutexLock lock(&mu_);
  return totals_;
}

}  // namespace kvledger
