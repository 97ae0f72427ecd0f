// KV cache size and capacity for an explicit GQA/MHA shape (docs/cost-model.md §6):
// bytes = 2 x layers x sequences x tokens x kv_heads x head_dim x bytes_per_element.
#ifndef KVLEDGER_LIB_COST_MODEL_KV_CAPACITY_H_
#define KVLEDGER_LIB_COST_MODEL_KV_CAPACITY_H_

#include <cstdint>
#include <optional>

#include "lib/cost_model/exact_int.h"
#include "lib/cost_model/number_format.h"

namespace kvledger {

struct KvShape {
  uint64_t layers = 0;
  uint64_t kv_heads = 0;  // K/V heads, never query heads
  uint64_t head_dim = 0;
  uint64_t bytes_per_element = 0;
};

// K and V bytes per cached position over all layers; nullopt when the product does not fit 128 bits
// (never a wrapped value).
inline std::optional<Uint128> KvBytesPerToken(const KvShape& s) {
  return CheckedProduct({2, s.layers, s.kv_heads, s.head_dim, s.bytes_per_element});
}

// Cached positions that fit: floor((budget - reserved - fixed) / bytes_per_token); 0 when the
// reserve and fixed state already take the whole budget (even past 2^128) or bytes_per_token is 0.
inline Uint128 MaxCachedTokens(Uint128 budget_bytes, Uint128 reserved_bytes, Uint128 fixed_bytes,
                               Uint128 bytes_per_token) {
  const std::optional<Uint128> taken = CheckedSum(reserved_bytes, fixed_bytes);
  if (bytes_per_token == 0 || !taken || *taken >= budget_bytes) return 0;
  return (budget_bytes - *taken) / bytes_per_token;
}

}  // namespace kvledger

#endif  // KVLEDGER_LIB_COST_MODEL_KV_CAPACITY_H_
