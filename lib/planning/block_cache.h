// Block-level LRU caches in tiers (docs/planning.md, "The simulation"): tier 0 is the device; each
// tier below holds what the tier above evicts (exclusive: a block lives in one tier at a time), and
// what the last tier evicts is gone.
#ifndef KVLEDGER_LIB_PLANNING_BLOCK_CACHE_H_
#define KVLEDGER_LIB_PLANNING_BLOCK_CACHE_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "lib/capacity/ladder.h"
#include "lib/capacity/use_order.h"

namespace kvledger {

class TieredBlockCache {
 public:
  // Capacities in blocks, top tier first (kUnlimited: never evicts); at least one tier.
  explicit TieredBlockCache(std::vector<uint64_t> capacity_blocks, UseOrder order = UseOrder::kTailFirst);

  struct Match {
    size_t blocks = 0;               // the longest run of leading blocks present in some tier
    std::vector<size_t> per_tier;    // how many of them each tier holds
    size_t last_tier = 0;            // the tier holding the last of them
  };
  // The match of `blocks` before they are used; changes nothing.
  Match Lookup(absl::Span<const int64_t> blocks) const;
  // Every block of `blocks` becomes the most recently used in the top tier, in the cache's UseOrder;
  // what overflows a tier moves to the next (least recently used first).
  void Use(absl::Span<const int64_t> blocks);

  size_t tiers() const { return tiers_.size(); }
  uint64_t size(size_t tier) const { return tiers_[tier].size; }

 private:
  static constexpr uint32_t kNil = std::numeric_limits<uint32_t>::max();
  struct Entry {
    int64_t id = 0;
    uint32_t prev = kNil, next = kNil;  // towards the MRU end, towards the LRU end
    uint8_t tier = 0;
  };
  struct Tier {
    uint64_t capacity = 0;
    uint64_t size = 0;
    uint32_t mru = kNil, lru = kNil;
  };
  void Unlink(uint32_t e);
  void PushMru(uint32_t e, uint8_t tier);
  void Overflow();  // moves LRU entries down while a tier is over its capacity

  const UseOrder order_;
  std::vector<Tier> tiers_;
  std::vector<Entry> entries_;
  std::vector<uint32_t> free_;
  absl::flat_hash_map<int64_t, uint32_t> index_;
};

}  // namespace kvledger

#endif  // KVLEDGER_LIB_PLANNING_BLOCK_CACHE_H_
