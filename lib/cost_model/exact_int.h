// Exact integer arithmetic for work and byte counts.
//
// Query-key pair counts grow as N^2/2: at N = 2^32 tokens they no longer fit in 64 bits, and
// multiplied by per-pair FLOPs and layer counts they pass 2^64 far earlier. All counts that feed
// an exported counter are therefore carried as unsigned 128-bit integers (GCC/Clang
// `unsigned __int128`), exact for every input the validators accept (docs/cost-model.md §7), and
// converted to double only at the edge (exposition, JSON, proto).
#ifndef KVLEDGER_LIB_COST_MODEL_EXACT_INT_H_
#define KVLEDGER_LIB_COST_MODEL_EXACT_INT_H_

#include <cstdint>
#include <string>

namespace kvledger {

using Uint128 = unsigned __int128;

// The largest prompt length any input may state (records and calculators alike): with it, one
// record's FLOPs stay far below 2^128 (docs/cost-model.md §7).
inline constexpr uint64_t kMaxTokens = uint64_t{1} << 31;

// Decimal representation, e.g. "340282366920938463463374607431768211455".
std::string Uint128ToString(Uint128 value);

// Nearest double (correctly rounded by the compiler's conversion).
inline double Uint128ToDouble(Uint128 value) { return static_cast<double>(value); }

}  // namespace kvledger

#endif  // KVLEDGER_LIB_COST_MODEL_EXACT_INT_H_
