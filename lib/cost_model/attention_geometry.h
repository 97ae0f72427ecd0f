// Attention geometry: how much sequence-mixing work the first x queries of a prompt do, for each
// attention kind, counted exactly in discrete units, plus the continuous limits used by the
// alpha-only calculator. Derivations: docs/cost-model.md §1-§3.
//
// All functions are pure and thread-safe.
#ifndef KVLEDGER_LIB_COST_MODEL_ATTENTION_GEOMETRY_H_
#define KVLEDGER_LIB_COST_MODEL_ATTENTION_GEOMETRY_H_

#include <cstdint>

#include "lib/cost_model/exact_int.h"

namespace kvledger {

// Full causal attention: query t (1-based) reads t keys. Pairs of the first x queries:
// A(x) = x(x+1)/2. Exact for every uint64 x whose result fits 128 bits (x < 2^64).
Uint128 FullCausalPairs(uint64_t tokens);

// Sliding window W >= 1: query t reads min(t, W) keys.
// A_W(x) = x(x+1)/2 for x <= W, W(W+1)/2 + (x - W) W for x > W.
Uint128 SlidingWindowPairs(uint64_t tokens, uint64_t window_tokens);

// Largest multiple of `alignment` that is <= tokens (alignment 0 or 1 leaves tokens unchanged).
uint64_t AlignDown(uint64_t tokens, uint64_t alignment);

// Continuous limits, all normalized so the prompt has length 1 and x = alpha in [0, 1]:
// full causal a(x) = x^2/2; sliding window with w = W/N:
// a(x) = x^2/2 for x <= w, w x - w^2/2 for x > w.
double ContinuousFullWork(double x);
double ContinuousWindowWork(double x, double window_fraction);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_COST_MODEL_ATTENTION_GEOMETRY_H_
