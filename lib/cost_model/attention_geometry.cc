#include "lib/cost_model/attention_geometry.h"

namespace kvledger {

Uint128 FullCausalPairs(uint64_t tokens) {
  const Uint128 x = tokens;
  // One of x, x+1 is even: divide that one first so the product never needs more than 128 bits.
  return (x % 2 == 0) ? (x / 2) * (x + 1) : x * ((x + 1) / 2);
}

Uint128 SlidingWindowPairs(uint64_t tokens, uint64_t window_tokens) {
  if (window_tokens == 0 || tokens <= window_tokens) return FullCausalPairs(tokens);
  return FullCausalPairs(window_tokens) +
         static_cast<Uint128>(tokens - window_tokens) * window_tokens;
}

uint64_t AlignDown(uint64_t tokens, uint64_t alignment) {
  if (alignment <= 1) return tokens;
  return tokens / alignment * alignment;
}

double ContinuousFullWork(double x) { return x * x / 2.0; }

double ContinuousWindowWork(double x, double window_fraction) {
  if (x <= window_fraction) return x * x / 2.0;
  return window_fraction * x - window_fraction * window_fraction / 2.0;
}

}  // namespace kvledger
