// Record validation (docs/cost-model.md §1 invariants and field ranges). Every failure is a Rejection:
// a reason and a message naming the field, the value and the rule.
#ifndef KVLEDGER_LIB_ACCOUNTING_VALIDATION_H_
#define KVLEDGER_LIB_ACCOUNTING_VALIDATION_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

#include "lib/accounting/record_facts.h"
#include "lib/accounting/rejection.h"
#include "lib/cost_model/exact_int.h"
#include "lib/profiles/profile.h"

namespace kvledger {

inline constexpr int64_t kMaxPromptTokens = static_cast<int64_t>(kMaxTokens);
inline constexpr double kMaxLatencySeconds = 86400;
inline constexpr size_t kMaxModelNameBytes = 128;
inline constexpr size_t kMaxRequestIdBytes = 256;
inline constexpr size_t kMaxStateBoundaries = 16;
// Capacity curves: the most prefix block ids one record carries, the largest block, the longest cache id.
inline constexpr size_t kMaxPrefixBlockIds = 65536;
inline constexpr int64_t kMaxBlockTokens = int64_t{1} << 20;
inline constexpr size_t kMaxCacheIdBytes = 128;
// The largest cache a record's reuse distances were measured in (cache_capacity_blocks).
inline constexpr int64_t kMaxCacheCapacityBlocks = int64_t{1} << 40;

// The rule for a model name (1-128 printable ASCII characters without spaces): empty when `model`
// keeps it, else the message "<field> = \"...\": must be ...". Records and engine statistics share it.
std::string ModelNameProblem(absl::string_view model, absl::string_view field = "model");

// Checks that do not need the model's profile: names, tier, token invariants, latencies.
Verdict ValidateFields(const RecordFacts& facts);

// Checks that need the profile: state boundaries name the profile's layer groups, once each, lie in
// [0, logical_match_tokens], agree with recoverable_tokens, and recompute_tokens covers the
// alignment loss they imply. Call after ValidateFields succeeded.
Verdict ValidateAgainstProfile(const RecordFacts& facts, const Profile& profile);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_ACCOUNTING_VALIDATION_H_
