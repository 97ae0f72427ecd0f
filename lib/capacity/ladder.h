// Cache capacities as people write them and as the what-if reads them (docs/cost-model.md §14,
// docs/planning.md): one "unlimited", one grammar — "1e6", "3000000", "inf", a list "1e6,3e6,1e7", a
// log-spaced range "1e6:5e7:8" (8 capacities from 1e6 to 5e7) — and one set of rules for the live
// curves' ladder.
#ifndef KVLEDGER_LIB_CAPACITY_LADDER_H_
#define KVLEDGER_LIB_CAPACITY_LADDER_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kvledger {

// The live curves' ladder by default: 16 capacities from 64 Ki to 2 Gi tokens, each double the last.
// One ladder in tokens for every model, so rungs add across models; chosen from the built-in
// catalog's KV bytes per token (7.9 KiB to 384 KiB): for every model in it the ladder runs from a
// fraction of one GPU's cache (64 Ki tokens of llama-3.1-8b: 8 GiB) to a store of 17 TB or more (2 Gi
// tokens: 256 TiB of llama-3.1-8b; 17 TB of kimi-linear-48b-a3b, the fewest bytes a token), past 20 TB
// for all but that one. docs/operations.md, "Capacity curves", has the table.
inline constexpr char kDefaultCapacityLadder[] = "65536:2147483648:16";

// A capacity (in tokens or blocks) that never evicts.
inline constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();
// The most capacities one list or range expands to.
inline constexpr size_t kMaxCapacities = 64;
// The most finite capacities of the live curves' ladder; the unlimited capacity is always there besides.
inline constexpr size_t kMaxLadderCapacities = 16;

// One capacity: a whole number of tokens in integer or decimal-exponent notation (2.5e6), or "inf"
// (kUnlimited). INVALID_ARGUMENT "FLAG = VALUE: RULE" otherwise.
absl::StatusOr<uint64_t> ParseCapacity(absl::string_view text, absl::string_view flag);

// A comma-separated list of capacities, each one as ParseCapacity() reads it or FROM:TO:POINTS,
// POINTS (2..kMaxCapacities) capacities evenly spaced on a log scale from FROM to TO inclusive,
// rounded to whole tokens. Sorted ascending, duplicates removed.
absl::StatusOr<std::vector<uint64_t>> ParseCapacityList(absl::string_view text, absl::string_view flag);

// The rule a ladder's finite capacities break, or "" when they keep every one: ascending, distinct,
// each > 0, at most kMaxLadderCapacities.
std::string LadderRule(absl::Span<const uint64_t> finite);

// The live capacity curves' ladder as ParseCapacityList reads it: its finite capacities, keeping
// LadderRule ("inf" may be listed; the unlimited capacity is always on the ladder). Empty text: an
// empty ladder (no curves).
absl::StatusOr<std::vector<uint64_t>> ParseCapacityLadder(absl::string_view text, absl::string_view flag);

// The deepest stack depth, in blocks of `block_tokens`, that a cache of `capacity_tokens` holds:
// floor(C / block_tokens); the unlimited one holds every depth but an absent block's (kUnlimited).
inline uint64_t DepthWithin(uint64_t capacity_tokens, uint64_t block_tokens) {
  return capacity_tokens == kUnlimited ? kUnlimited - 1 : capacity_tokens / block_tokens;
}

// The label value of a capacity: its tokens, or "+Inf".
std::string CapacityLabel(uint64_t capacity_tokens);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_CAPACITY_LADDER_H_
