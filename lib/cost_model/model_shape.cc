#include "lib/cost_model/model_shape.h"

#include <algorithm>
#include <limits>

#include "lib/cost_model/attention_geometry.h"

namespace kvledger {

Uint128 GroupMixingFlops(const LayerGroupShape& group, uint64_t tokens) {
  const Uint128 layers = group.num_layers;
  switch (group.kind) {
    case MixerKind::kFullCausal:
      return layers * group.pair_flops * FullCausalPairs(tokens);
    case MixerKind::kSlidingWindow:
      return layers * group.pair_flops * SlidingWindowPairs(tokens, group.window_tokens);
    case MixerKind::kLinear:
      return layers * group.recurrent_flops_per_token * static_cast<Uint128>(tokens);
  }
  return 0;
}

Uint128 GroupTokenFlops(const LayerGroupShape& group, uint64_t tokens) {
  return static_cast<Uint128>(group.num_layers) * group.token_flops * tokens;
}

Uint128 GroupCacheBytes(const LayerGroupShape& group, uint64_t tokens) {
  const Uint128 layers = group.num_layers;
  switch (group.kind) {
    case MixerKind::kFullCausal:
      return layers * group.kv_bytes_per_token * tokens;
    case MixerKind::kSlidingWindow:
      return layers * group.kv_bytes_per_token * std::min(tokens, group.window_tokens);
    case MixerKind::kLinear:
      return tokens == 0 ? 0 : layers * group.state_bytes_per_sequence;
  }
  return 0;
}

Uint128 MixingFlops(const ModelShape& shape, uint64_t tokens) {
  Uint128 total = 0;
  for (const auto& group : shape.groups) total += GroupMixingFlops(group, tokens);
  return total;
}

Uint128 PrefillFlops(const ModelShape& shape, uint64_t tokens) {
  Uint128 total = 0;
  for (const auto& group : shape.groups) {
    total += GroupMixingFlops(group, tokens) + GroupTokenFlops(group, tokens);
  }
  return total;
}

Uint128 CacheBytes(const ModelShape& shape, uint64_t tokens) {
  Uint128 total = 0;
  for (const auto& group : shape.groups) total += GroupCacheBytes(group, tokens);
  return total;
}

uint64_t BytesPerCachedToken(const ModelShape& shape) {
  uint64_t total = 0;
  for (const auto& group : shape.groups) {
    if (group.kind != MixerKind::kLinear) total += group.num_layers * group.kv_bytes_per_token;
  }
  return total;
}

uint64_t StateBytesPerSequence(const ModelShape& shape) {
  uint64_t total = 0;
  for (const auto& group : shape.groups) {
    if (group.kind == MixerKind::kLinear) total += group.num_layers * group.state_bytes_per_sequence;
  }
  return total;
}

uint64_t GroupBoundary(const LayerGroupShape& group, uint64_t logical_match_tokens,
                       uint64_t prompt_tokens) {
  const uint64_t usable =
      std::min(logical_match_tokens, prompt_tokens == 0 ? 0 : prompt_tokens - 1);
  return AlignDown(usable, group.alignment_tokens);
}

uint64_t ModelledRecoverableTokens(const ModelShape& shape, uint64_t logical_match_tokens,
                                   uint64_t prompt_tokens) {
  uint64_t boundary = std::numeric_limits<uint64_t>::max();
  for (const auto& group : shape.groups) {
    boundary = std::min(boundary, GroupBoundary(group, logical_match_tokens, prompt_tokens));
  }
  return shape.groups.empty() ? 0 : boundary;
}

}  // namespace kvledger
