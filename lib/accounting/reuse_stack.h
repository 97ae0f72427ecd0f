// One cache's references replayed as an LRU stack (docs/cost-model.md §14): for each block of a
// request, its stack depth — 1 + the distinct blocks used since it was last used — which by LRU's
// inclusion property says at once at which capacities it would have been present: in a cache of C
// blocks exactly when depth <= C. Exact up to `max_blocks` tracked blocks; past it the least recently
// used is forgotten (a cache of more than max_blocks blocks is not modelled). Not thread-safe.
#ifndef KVLEDGER_LIB_ACCOUNTING_REUSE_STACK_H_
#define KVLEDGER_LIB_ACCOUNTING_REUSE_STACK_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace kvledger {

class ReuseStack {
 public:
  // The depth of a block not in the stack (never seen, or forgotten).
  static constexpr uint64_t kAbsent = std::numeric_limits<uint64_t>::max();

  explicit ReuseStack(uint64_t max_blocks) : max_blocks_(max_blocks < 1 ? 1 : max_blocks) {}

  // For each leading block of `ids`, the deepest stack depth among it and the blocks before it, as
  // they stand before this request (non-decreasing; kAbsent from the first absent block on). A cache
  // of C blocks would have matched the leading blocks whose value is <= C. Then every id, in order,
  // becomes the most recently used (the engine's lookup precedes its use, as a Plan does).
  void Reference(absl::Span<const uint64_t> ids, std::vector<uint64_t>& prefix_depths);

  uint64_t tracked() const { return index_.size(); }
  uint64_t forgotten() const { return forgotten_; }  // blocks dropped past max_blocks, ever
  // Bytes this stack holds (its tables' capacity), for the memory the docs state.
  uint64_t MemoryBytes() const;

 private:
  uint64_t Depth(uint32_t time) const;  // marked times in [time, now]
  void Touch(uint64_t id);
  void Mark(uint32_t time, int delta);
  uint32_t OldestTime() const;  // the least recently used block's time
  void Renumber();               // times 1..tracked in order, when the clock reaches the table's end

  const uint64_t max_blocks_;
  uint32_t now_ = 0;                          // the last time handed out (times start at 1)
  std::vector<int32_t> fenwick_;              // 1-based: marks per time (one per tracked block)
  std::vector<uint64_t> id_at_;               // the block last used at each time (valid where marked)
  absl::flat_hash_map<uint64_t, uint32_t> index_;  // block -> its last time
  uint64_t forgotten_ = 0;
};

}  // namespace kvledger

#endif  // KVLEDGER_LIB_ACCOUNTING_REUSE_STACK_H_
