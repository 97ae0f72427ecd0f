// An independent two-level cache simulation for the second-tier what-if (docs/cost-model.md §15):
// a device LRU of C blocks evicting into a tier LRU of H blocks (TieredBlockCache, block by block,
// no stack depths), or beside an LRU of H blocks that holds copies of every block (write-through), each request's part held by the tier reloaded after the wait at the bandwidth
// unless recomputing it is faster. The truth the live tier figures are checked against.
#ifndef KVLEDGER_TESTS_TESTING_TWO_LEVEL_SIM_H_
#define KVLEDGER_TESTS_TESTING_TWO_LEVEL_SIM_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "lib/accounting/derived_figures.h"
#include "lib/capacity/capacity_curves.h"
#include "lib/planning/block_cache.h"
#include "lib/planning/trace.h"

namespace kvledger::testing {

struct TwoLevelTruth {
  double prompt_tokens = 0;
  Uint128 tier_tokens = 0;  // held by the tier, not by the device
  Uint128 attention_flops = 0, prefill_flops = 0;
  uint64_t hit_requests = 0;
  double recompute_seconds = 0, reload_seconds = 0;  // of the parts reloaded (faster than recomputing)
  uint64_t slower_requests = 0;
  Uint128 slower_tokens = 0;
  double excess_seconds = 0;  // the parts recomputed, and what reloading them would cost
  double NetSeconds() const { return recompute_seconds - reload_seconds; }
};

struct TwoLevelTier {
  uint64_t device_blocks = 0, tier_blocks = 0;
  double bytes_per_second = 0, wait_seconds = 0;
  // Write-through: the tier is an LRU of its own fed every block the device is (it holds copies), and
  // a request reuses the longer of the two matches; else the tier holds what the device evicts.
  bool inclusive = false;
};

// `ids[i]` are trace[i]'s block ids at `block` tokens a block; `compute` is the live compute model.
inline TwoLevelTruth SimulateTwoLevel(const std::vector<TraceRequest>& trace,
                                      const std::vector<std::vector<uint64_t>>& ids, const Profile& profile,
                                      uint64_t block, const TwoLevelTier& tier, const ComputeTime& compute) {
  TieredBlockCache cache({tier.device_blocks, tier.tier_blocks});
  TieredBlockCache device({tier.device_blocks}), copies({tier.tier_blocks});  // inclusive
  const EstimateSource source{compute, false};
  TwoLevelTruth truth;
  std::vector<int64_t> chain;
  for (size_t i = 0; i < trace.size(); ++i) {
    chain.assign(ids[i].begin(), ids[i].end());
    // Blocks on the device and through the tier.
    size_t on_device_blocks = 0, through_tier_blocks = 0;
    if (tier.inclusive) {
      on_device_blocks = device.Lookup(chain).blocks;
      through_tier_blocks = std::max(on_device_blocks, copies.Lookup(chain).blocks);
      device.Use(chain);
      copies.Use(chain);
    } else {
      const TieredBlockCache::Match match = cache.Lookup(chain);
      cache.Use(chain);
      on_device_blocks = match.per_tier[0];
      through_tier_blocks = match.per_tier[0] + match.per_tier[1];
    }
    const int64_t prompt = trace[i].input_length;
    const std::optional<int64_t> output =
        trace[i].output_length > 0 ? std::optional<int64_t>(trace[i].output_length) : std::nullopt;
    truth.prompt_tokens += static_cast<double>(prompt);
    const auto tokens = [&](size_t blocks) { return std::min(static_cast<int64_t>(blocks * block), prompt); };
    const int64_t on_device = tokens(on_device_blocks);
    const int64_t through_tier = tokens(through_tier_blocks);
    if (through_tier <= on_device) continue;
    const RecordFigures low = Derive(FactsAtMatch(profile.name(), prompt, output, on_device), profile, source);
    const RecordFigures high = Derive(FactsAtMatch(profile.name(), prompt, output, through_tier), profile, source);
    const uint64_t part = high.logical_match_tokens - low.logical_match_tokens;
    truth.tier_tokens += part;
    truth.attention_flops += high.ReusedAttentionFlops() - low.ReusedAttentionFlops();
    truth.prefill_flops += high.ReusedPrefillFlops() - low.ReusedPrefillFlops();
    ++truth.hit_requests;
    const double recompute = *high.estimated_recompute_seconds - *low.estimated_recompute_seconds;
    const double reload = tier.wait_seconds + Uint128ToDouble(high.reused_bytes - low.reused_bytes) / tier.bytes_per_second;
    if (reload < recompute) {
      truth.recompute_seconds += recompute;
      truth.reload_seconds += reload;
    } else {
      ++truth.slower_requests;
      truth.slower_tokens += part;
      truth.excess_seconds += reload - recompute;
    }
  }
  return truth;
}

}  // namespace kvledger::testing

#endif  // KVLEDGER_TESTS_TESTING_TWO_LEVEL_SIM_H_
