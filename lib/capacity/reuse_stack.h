// One cache's references replayed as an LRU stack (docs/cost-model.md §14): a block's stack depth is
// 1 + the distinct blocks used since it was last used, which by LRU's inclusion property says at once
// at which capacities it would have been present: in a cache of C blocks exactly when depth <= C.
// Exact for every block it holds; it forgets a block only when told (SampledStack, which uses it, says
// which blocks to hold and in what order). Not thread-safe.
#ifndef KVLEDGER_LIB_CAPACITY_REUSE_STACK_H_
#define KVLEDGER_LIB_CAPACITY_REUSE_STACK_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace kvledger {

class ReuseStack {
 public:
  // The depth of a block not in the stack (never seen, or forgotten).
  static constexpr uint64_t kAbsent = std::numeric_limits<uint64_t>::max();
  // The slot of a block not held.
  static constexpr uint32_t kNoSlot = std::numeric_limits<uint32_t>::max();

  ReuseStack() = default;
  // Ids below `dense_ids` find their slot in a table indexed by the id, not in the hash map: for ids
  // known to be small integers (a trace's block numbers), 4 bytes per id below it.
  explicit ReuseStack(uint64_t dense_ids) : dense_(dense_ids, kNoSlot) {}

  uint64_t DepthOf(uint64_t id) const;  // kAbsent when not held
  bool Touch(uint64_t id);              // `id` becomes the most recently used; true when it was not held
  void Forget(uint64_t id);             // `id` is held no more (nothing if it is not)

  // The same by a held block's slot, which stays its own until it is forgotten: a caller that looks a
  // block up and later uses it (a request's lookup, then its use) pays one hash lookup, not two.
  uint32_t SlotOf(uint64_t id) const;  // kNoSlot when not held
  uint64_t DepthAt(uint32_t slot) const { return Depth(slot_time_[slot]); }
  uint32_t Hold(uint64_t id, bool* inserted);  // its slot, held from now on (a new one: not yet used)
  void TouchAt(uint32_t slot);                 // the held block becomes the most recently used

  uint64_t tracked() const { return index_.size() + dense_held_; }
  // Bytes this stack holds (its tables' capacity), for the memory the docs state.
  uint64_t MemoryBytes() const;

 private:
  uint64_t Depth(uint32_t time) const;  // marked times in [time, now]
  void Mark(uint32_t time, int delta);   // +1: a block's last use is at `time`; -1: no longer
  void Renumber();  // times 1..tracked in order, when the clock reaches the table's end
  uint32_t NewSlot();

  // A time is marked when some held block was last used then. The marks are bits, 64 to a word, and
  // a Fenwick tree counts them per word: a depth is one walk over the words (a table of 1/64 of the
  // times, which stays in the processor's nearest cache) and one popcount.
  uint32_t now_ = 0;                          // the last time handed out (times start at 1)
  std::vector<uint64_t> marks_;               // bit t % 64 of word t / 64: time t is marked
  std::vector<int32_t> word_marks_;           // 1-based Fenwick tree: marks per word of marks_
  std::vector<uint32_t> slot_at_;             // the slot last used at each time (valid where marked)
  std::vector<uint32_t> slot_time_;           // each slot's last time (0: not used yet, or free)
  std::vector<uint32_t> free_slots_;          // slots of forgotten blocks, to reuse
  absl::flat_hash_map<uint64_t, uint32_t> index_;  // block -> its slot (ids from dense_.size() on)
  std::vector<uint32_t> dense_;                    // id -> its slot (kNoSlot: not held), ids below its size
  uint64_t dense_held_ = 0;                        // the ids held in dense_
};

}  // namespace kvledger

#endif  // KVLEDGER_LIB_CAPACITY_REUSE_STACK_H_
