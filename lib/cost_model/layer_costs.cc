#include "lib/cost_model/layer_costs.h"

namespace kvledger {

uint64_t ShapeAttention(const AttentionDims& a, uint64_t hidden, uint64_t cache_bytes_per_element, LayerGroupShape& s) {
  const uint64_t q = a.num_heads * a.head_dim;
  const uint64_t kv = a.num_kv_heads * a.head_dim;
  s.kind = a.window_tokens ? MixerKind::kSlidingWindow : MixerKind::kFullCausal;
  s.window_tokens = a.window_tokens;
  s.pair_flops = 2 * a.num_heads * (2 * a.head_dim);  // QK^T and PV, 2 FLOPs per multiply-add
  s.kv_bytes_per_token = 2 * kv * cache_bytes_per_element;
  return hidden * q + 2 * hidden * kv + q * hidden;  // Q, K, V and O
}

uint64_t ShapeMla(const MlaDims& m, uint64_t hidden, uint64_t cache_bytes_per_element, LayerGroupShape& s) {
  const uint64_t qk_dim = m.qk_rope_head_dim + m.qk_nope_head_dim;
  const uint64_t q_params =
      m.q_lora_rank ? hidden * m.q_lora_rank + m.q_lora_rank * m.num_heads * qk_dim : hidden * m.num_heads * qk_dim;
  const uint64_t kv_params = hidden * (m.kv_lora_rank + m.qk_rope_head_dim) +
                             m.kv_lora_rank * m.num_heads * (m.qk_nope_head_dim + m.v_head_dim);
  s.kind = MixerKind::kFullCausal;
  s.latent = true;
  s.pair_flops = 2 * m.num_heads * (qk_dim + m.v_head_dim);
  s.kv_bytes_per_token = (m.kv_lora_rank + m.qk_rope_head_dim) * cache_bytes_per_element;
  return q_params + kv_params + m.num_heads * m.v_head_dim * hidden;
}

uint64_t ShapeLinear(const LinearDims& l, uint64_t hidden, uint64_t state_bytes_per_element, LayerGroupShape& s) {
  const uint64_t qk = l.num_qk_heads * l.key_head_dim;
  const uint64_t v = l.num_v_heads * l.value_head_dim;
  const uint64_t conv_channels = 2 * qk + v;
  const uint64_t state = l.num_v_heads * l.key_head_dim * l.value_head_dim;
  s.kind = MixerKind::kLinear;
  // Delta-rule step per head: S^T k, the rank-1 update and S^T q, 2 FLOPs per state element each;
  // plus the short convolution over q, k and v channels.
  s.recurrent_flops_per_token = 6 * state + 2 * l.conv_kernel * conv_channels;
  const uint64_t conv_state = l.conv_kernel ? conv_channels * (l.conv_kernel - 1) : 0;
  s.state_bytes_per_sequence = (state + conv_state) * state_bytes_per_element;
  return hidden * conv_channels + v * hidden;
}

uint64_t DenseFfnParams(uint64_t hidden, uint64_t intermediate_size) { return 3 * hidden * intermediate_size; }

uint64_t MoeFfnParams(uint64_t hidden, const MoeDims& m) {
  const uint64_t shared_size = m.shared_intermediate_size ? m.shared_intermediate_size : m.expert_intermediate_size;
  return hidden * m.num_experts  // router
         + 3 * hidden * m.top_k * m.expert_intermediate_size + 3 * hidden * m.num_shared_experts * shared_size;
}

}  // namespace kvledger
