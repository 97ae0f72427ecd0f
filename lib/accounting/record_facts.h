// One served request's facts as the domain sees them (docs/cost-model.md §1): a plain struct decoupled from the
// wire, generated from it. String fields view into the caller's message, which must outlive the facts.
#ifndef KVLEDGER_LIB_ACCOUNTING_RECORD_FACTS_H_
#define KVLEDGER_LIB_ACCOUNTING_RECORD_FACTS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "lib/accounting/record_facts.gen.h"
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

// RecordFacts (every kvledger.v1.Record field, as the table in lib/wire/record_codegen.h maps it:
// a string is a view, an `optional` field is std::optional, unset meaning not reported and never read
// as 0, a repeated id field is a span) and StateBoundaryFact are generated from the message.
// prefix_block_reuse_distances: each leading block's stack depth beyond a cache of
// cache_capacity_blocks (0: in it; kNeverSeenDistance: never seen).
inline constexpr uint64_t kNeverSeenDistance = ~uint64_t{0};

// A record for the capacity curves only (lib/accounting/record_observer.h), never the served-request
// figures: one rebuilt from a cache's events (it carries prefix_block_reuse_distances: kvledger.kv_events
// makes one per stored run of blocks), or one marked curves_only (a request another integration of the
// same engine reports, e.g. vLLM's KV connector beside its stat logger).
inline bool IsCurvesOnly(const RecordFacts& facts) {
  return facts.curves_only || !facts.prefix_block_reuse_distances.empty();
}

}  // namespace kvledger

#endif  // KVLEDGER_LIB_ACCOUNTING_RECORD_FACTS_H_
