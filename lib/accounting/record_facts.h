// One served request's facts as the domain sees them (docs/cost-model.md §1): a plain struct decoupled from the
// wire. String fields view into the caller's message, which must outlive the facts.
#ifndef KVLEDGER_LIB_ACCOUNTING_RECORD_FACTS_H_
#define KVLEDGER_LIB_ACCOUNTING_RECORD_FACTS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "lib/base/enum_table.h"

namespace kvledger {

// Exported tier label values, indexed by the wire enum value (0 = a miss with no tier). kMixed and
// kUnknown are hits the reporter cannot attribute to one tier (docs/integration.md).
enum class Tier : uint8_t { kNone = 0, kDevice = 1, kHost = 2, kDisk = 3, kRemote = 4, kMixed = 5, kUnknown = 6 };
inline constexpr EnumTable<Tier, 7> kTierLabels = {{{Tier::kNone, "none"},
                                                   {Tier::kDevice, "device"},
                                                   {Tier::kHost, "host"},
                                                   {Tier::kDisk, "disk"},
                                                   {Tier::kRemote, "remote"},
                                                   {Tier::kMixed, "mixed"},
                                                   {Tier::kUnknown, "unknown"}}};
static_assert(IsDense(kTierLabels));
inline constexpr int kTierCount = static_cast<int>(kTierLabels.size());
inline const char* TierLabel(Tier tier) { return LabelOf(kTierLabels, tier, "none"); }
// The tiers data is reloaded from: the ones that have a bandwidth, and that advice chooses among.
inline constexpr std::array kSourceTiers = {Tier::kDevice, Tier::kHost, Tier::kDisk, Tier::kRemote};
inline constexpr bool IsSourceTier(Tier tier) { return tier >= Tier::kDevice && tier <= Tier::kRemote; }
inline constexpr bool IsSourceTierValue(int value) {
  return value >= static_cast<int>(Tier::kDevice) && value <= static_cast<int>(Tier::kRemote);
}
// "device, host, disk or remote": the source tiers' labels, for messages.
const char* SourceTierList();
// The tier whose label is `label` ("none" for a miss), or nullopt; and every label, for messages.
std::optional<Tier> TierFromLabel(absl::string_view label);
const char* TierLabelList();  // "none, device, host, disk, remote, mixed or unknown"

struct StateBoundaryFact {
  absl::string_view state_group;
  int64_t boundary_tokens = 0;
};

struct RecordFacts {
  absl::string_view request_id;
  absl::string_view model;
  int tier_value = 0;  // raw wire enum value; validated into Tier
  int64_t prompt_tokens = 0;
  int64_t logical_match_tokens = 0;
  std::optional<int64_t> recoverable_tokens;
  std::optional<int64_t> recompute_tokens;
  // Unset: not measured (never read as 0).
  std::optional<double> reload_seconds;
  std::optional<double> suffix_prefill_seconds;
  std::optional<double> ttft_seconds;
  std::vector<StateBoundaryFact> state_boundaries;
  // A prefix-aware router's predicted hit for this engine; unset: no prediction.
  std::optional<int64_t> predicted_match_tokens;
  // The whole request (docs/cost-model.md §12); unset: not measured.
  std::optional<double> queue_seconds;
  std::optional<int64_t> output_tokens;
  std::optional<double> decode_seconds;
  // Capacity curves (docs/cost-model.md §14): chained prefix block ids, their block size and the
  // cache they were looked up in; no ids: no part in the curves.
  absl::Span<const uint64_t> prefix_block_ids;
  std::optional<int64_t> block_tokens;
  absl::string_view cache_id;
  // Or, from a cache's evictions: each leading block's stack depth beyond a cache of
  // cache_capacity_blocks (0: in it; kNeverSeenDistance: never seen).
  absl::Span<const uint64_t> prefix_block_reuse_distances;
  std::optional<int64_t> cache_capacity_blocks;
};
inline constexpr uint64_t kNeverSeenDistance = ~uint64_t{0};

}  // namespace kvledger

#endif  // KVLEDGER_LIB_ACCOUNTING_RECORD_FACTS_H_
