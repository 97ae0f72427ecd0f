// One cache's stack depths in bounded memory (docs/cost-model.md §14, "Sampling"): fixed-size SHARDS
// (Waldspurger et al., FAST'15). A block is sampled when a hash of its id is at most a threshold; the
// sampled blocks live in an exact ReuseStack, whose depths, divided by the sampling rate (the
// threshold's share of all hashes), estimate the depths of the whole stream. While the stack holds at
// most `max_samples` blocks the threshold admits every block and the depths are exact; past it the
// threshold is lowered to drop the blocks of largest hash, so the rate adapts and memory stays bounded
// whatever the number of distinct blocks. Not thread-safe.
#ifndef KVLEDGER_LIB_CAPACITY_SAMPLED_STACK_H_
#define KVLEDGER_LIB_CAPACITY_SAMPLED_STACK_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/capacity/reuse_stack.h"
#include "lib/capacity/use_order.h"

namespace kvledger {

class SampledStack {
 public:
  static constexpr uint64_t kAbsent = ReuseStack::kAbsent;
  // The most bytes one sampled block costs (its stack's tables, its place in the hash heap), at the
  // worst of each table's growth; MemoryBytes() stays within max_samples times this plus kFixedBytes.
  static constexpr uint64_t kBytesPerSample = 96;
  static constexpr uint64_t kFixedBytes = 2048;  // a stack with no block, and its place in the table

  // A stack that holds every block (exact, unbounded: what a plan replays a trace with).
  static constexpr uint64_t kUnlimitedSamples = ~uint64_t{0};

  // At least 1 sample.
  // Ids below `dense_ids` are looked up in a table indexed by the id (ReuseStack).
  explicit SampledStack(uint64_t max_samples, UseOrder order = UseOrder::kTailFirst, uint64_t dense_ids = 0)
      : max_samples_(max_samples < 1 ? 1 : max_samples), order_(order), stack_(dense_ids) {}

  struct Sampled {
    uint32_t position;  // in the request's ids
    uint64_t depth;     // the prefix depth estimated in blocks: the deepest scaled depth among the
                        // request's sampled blocks up to this one; kAbsent from the first absent one on
  };
  // The request's sampled blocks, in order, with their prefix depths as they stand before it; then
  // they, and the sampled blocks its output filled (`outputs`, never looked up: they follow the
  // prompt's), become the most recently used in the stack's UseOrder. Returns the sampling rate they
  // were taken at (1: every block, depths exact).
  double Reference(absl::Span<const uint64_t> ids, std::vector<Sampled>& sampled,
                   absl::Span<const uint64_t> outputs = {});

  double rate() const;
  uint64_t tracked() const { return stack_.tracked(); }
  uint64_t forgotten() const { return forgotten_; }  // blocks dropped from the sample as the rate fell, ever
  uint64_t MemoryBytes() const;

  // The hash a block is sampled by (a 64-bit mix of its id: engines' ids may be counters).
  static uint64_t Hash(uint64_t id);

 private:
  void Shrink();  // lowers the threshold until at most max_samples blocks are held
  // Makes a sampled block the most recent, by the slot its lookup found it in (kNoSlot: not held then;
  // newly held: into the hash heap).
  void Use(uint64_t id, uint32_t slot);

  const uint64_t max_samples_;
  const UseOrder order_;
  static constexpr uint64_t kEveryBlock = ~uint64_t{0};  // the threshold until the sample is full
  uint64_t threshold_ = kEveryBlock;  // sampled when Hash(id) <= threshold_
  ReuseStack stack_;
  std::vector<std::pair<uint64_t, uint64_t>> heap_;  // (hash, id) of every held block, largest hash on top
  uint64_t forgotten_ = 0;
};

// The fewest blocks a cache's sample may hold.
inline constexpr uint64_t kMinSamplesPerCache = 64;

// The blocks each of `caches` caches' stacks may hold within `memory_bytes` together (an equal
// share each); INVALID_ARGUMENT naming --capacity_memory_bytes and --capacity_caches when that is
// below kMinSamplesPerCache.
absl::StatusOr<uint64_t> SamplesPerCache(uint64_t memory_bytes, uint64_t caches);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_CAPACITY_SAMPLED_STACK_H_
