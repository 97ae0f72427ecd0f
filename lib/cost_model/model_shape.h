// The cost model of one model: per-layer-group constants (FLOPs per query-key pair, per token,
// bytes per cached position) and the exact work, FLOP and byte counts derived from them.
// Derivations: docs/cost-model.md §4-§6.
//
// ModelShape is a plain value built once per profile (lib/profiles); every function here is pure
// and thread-safe.
#ifndef KVLEDGER_LIB_COST_MODEL_MODEL_SHAPE_H_
#define KVLEDGER_LIB_COST_MODEL_MODEL_SHAPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "lib/base/enum_table.h"
#include "lib/cost_model/exact_int.h"

namespace kvledger {

enum class MixerKind {
  kFullCausal,     // MHA/GQA/MQA and MLA: the triangle A(x)
  kSlidingWindow,  // banded attention of window_tokens
  kLinear,         // recurrent/linear attention: work linear in tokens, resumable at checkpoints
};

inline constexpr EnumTable<MixerKind, 3> kMixerKindNames = {
    {{MixerKind::kFullCausal, "full"}, {MixerKind::kSlidingWindow, "sliding_window"}, {MixerKind::kLinear, "linear"}}};
static_assert(IsDense(kMixerKindNames));
inline const char* MixerKindName(MixerKind kind) { return LabelOf(kMixerKindNames, kind, "unknown"); }

// Constants for one layer group, each per single layer of the group.
struct LayerGroupShape {
  std::string name;
  MixerKind kind = MixerKind::kFullCausal;
  bool latent = false;               // MLA: full causal with a compressed latent cache
  uint32_t num_layers = 0;
  uint64_t window_tokens = 0;        // kSlidingWindow only
  uint64_t alignment_tokens = 1;     // KV page size (attention) or checkpoint interval (linear)
  uint64_t pair_flops = 0;           // attention FLOPs per query-key pair (attention kinds)
  uint64_t recurrent_flops_per_token = 0;  // state update + readout FLOPs per token (kLinear)
  uint64_t token_flops = 0;          // token-wise FLOPs per token: projections + FFN
  uint64_t kv_bytes_per_token = 0;   // cache bytes per cached position (attention kinds)
  uint64_t state_bytes_per_sequence = 0;  // constant recurrent + conv state bytes (kLinear)
};

struct ModelShape {
  std::vector<LayerGroupShape> groups;
};

// Sequence-mixing FLOPs of queries 1..tokens over all layers of the group: attention pairs times
// pair_flops, or tokens times recurrent_flops_per_token.
Uint128 GroupMixingFlops(const LayerGroupShape& group, uint64_t tokens);

// Token-wise FLOPs of tokens 1..tokens over all layers of the group.
Uint128 GroupTokenFlops(const LayerGroupShape& group, uint64_t tokens);

// Cache bytes one sequence holds for a prefix of `tokens` positions in this group: growing with
// tokens for full attention, capped at the window for sliding window, constant (once any token is
// cached) for recurrent state.
Uint128 GroupCacheBytes(const LayerGroupShape& group, uint64_t tokens);

// Sums over all groups of the functions above.
Uint128 MixingFlops(const ModelShape& shape, uint64_t tokens);
Uint128 PrefillFlops(const ModelShape& shape, uint64_t tokens);  // mixing + token-wise
Uint128 CacheBytes(const ModelShape& shape, uint64_t tokens);

// Bytes per cached position summed over the attention groups (the growth rate that bounds
// capacity), and the constant per-sequence recurrent state over the linear groups.
uint64_t BytesPerCachedToken(const ModelShape& shape);
uint64_t StateBytesPerSequence(const ModelShape& shape);

// Where one group could resume for a logical match: the match aligned down to the group's page or
// checkpoint. The last prompt token is always computed (its logits give the first output token),
// so the match is first capped at prompt_tokens - 1.
uint64_t GroupBoundary(const LayerGroupShape& group, uint64_t logical_match_tokens,
                       uint64_t prompt_tokens);

// The modelled recoverable boundary: the minimum of GroupBoundary over all groups.
uint64_t ModelledRecoverableTokens(const ModelShape& shape, uint64_t logical_match_tokens,
                                   uint64_t prompt_tokens);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_COST_MODEL_MODEL_SHAPE_H_
