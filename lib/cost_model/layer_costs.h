// The per-architecture formulas: what one layer of each mixer and FFN kind costs, from its
// dimensions (docs/cost-model.md §5-§6). lib/profiles validates a profile's dimensions and calls these
// to build its LayerGroupShape; nothing else knows an architecture's FLOPs or bytes. Pure functions
// on plain structs; every input is bounded by the caller so that no product overflows 64 bits.
#ifndef KVLEDGER_LIB_COST_MODEL_LAYER_COSTS_H_
#define KVLEDGER_LIB_COST_MODEL_LAYER_COSTS_H_

#include <cstdint>

#include "lib/cost_model/model_shape.h"

namespace kvledger {

// MHA / GQA / MQA, optionally with a sliding window (window_tokens > 0).
struct AttentionDims {
  uint64_t num_heads = 0, num_kv_heads = 0, head_dim = 0, window_tokens = 0;
};
// Multi-head latent attention (DeepSeek-V3): a compressed KV latent plus a decoupled RoPE key.
struct MlaDims {
  uint64_t num_heads = 0, q_lora_rank = 0, kv_lora_rank = 0, qk_rope_head_dim = 0, qk_nope_head_dim = 0,
           v_head_dim = 0;
};
// Linear (recurrent, delta-rule) attention with a short convolution over q, k and v.
struct LinearDims {
  uint64_t num_qk_heads = 0, num_v_heads = 0, key_head_dim = 0, value_head_dim = 0, conv_kernel = 0;
};
struct MoeDims {
  uint64_t num_experts = 0, top_k = 0, expert_intermediate_size = 0, num_shared_experts = 0,
           shared_intermediate_size = 0;  // 0: the expert size
};

// Each sets the mixer's part of `s` (kind, FLOPs per pair or per token, cache or state bytes) and
// returns its projection parameters (the weights touched per token).
uint64_t ShapeAttention(const AttentionDims& a, uint64_t hidden, uint64_t cache_bytes_per_element, LayerGroupShape& s);
uint64_t ShapeMla(const MlaDims& m, uint64_t hidden, uint64_t cache_bytes_per_element, LayerGroupShape& s);
uint64_t ShapeLinear(const LinearDims& l, uint64_t hidden, uint64_t state_bytes_per_element, LayerGroupShape& s);

// FFN parameters touched per token (SwiGLU: 3 matrices): dense, or routed top-k experts plus the
// shared ones and the router.
uint64_t DenseFfnParams(uint64_t hidden, uint64_t intermediate_size);
uint64_t MoeFfnParams(uint64_t hidden, const MoeDims& m);

// Token-wise FLOPs per token: 2 per parameter touched.
inline uint64_t TokenFlops(uint64_t projection_params, uint64_t ffn_params) {
  return 2 * (projection_params + ffn_params);
}

}  // namespace kvledger

#endif  // KVLEDGER_LIB_COST_MODEL_LAYER_COSTS_H_
