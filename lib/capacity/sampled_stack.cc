#include "lib/capacity/sampled_stack.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace kvledger {

absl::StatusOr<uint64_t> SamplesPerCache(uint64_t memory_bytes, uint64_t caches) {
  const uint64_t share = memory_bytes / std::max<uint64_t>(caches, 1);
  const uint64_t samples =
      share > SampledStack::kFixedBytes ? (share - SampledStack::kFixedBytes) / SampledStack::kBytesPerSample : 0;
  if (samples < kMinSamplesPerCache) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--capacity_memory_bytes = ", memory_bytes, ": gives each of --capacity_caches = ", caches, " caches room for ",
        samples, " sampled blocks; must be at least ", kMinSamplesPerCache, " (",
        caches * (SampledStack::kFixedBytes + kMinSamplesPerCache * SampledStack::kBytesPerSample), " bytes)"));
  }
  return samples;
}

uint64_t SampledStack::Hash(uint64_t id) {
  // splitmix64's finalizer: a bijection, so distinct ids never share a hash.
  id ^= id >> 30;
  id *= 0xbf58476d1ce4e5b9ULL;
  id ^= id >> 27;
  id *= 0x94d049bb133111ebULL;
  return id ^ (id >> 31);
}

double SampledStack::rate() const {
  return threshold_ == kEveryBlock ? 1.0 : (static_cast<double>(threshold_) + 1.0) / 18446744073709551616.0;
}

double SampledStack::Reference(absl::Span<const uint64_t> ids, std::vector<Sampled>& sampled,
                               absl::Span<const uint64_t> outputs) {
  sampled.clear();
  // The prompt's sampled blocks and then the output's, as one chain, with the slot each prompt block
  // was found in (one hash lookup for both its depth and its use), in the order they are used below.
  thread_local std::vector<std::pair<uint64_t, uint32_t>> used;  // per thread, as the callers' scratch
  used.clear();
  const double rate_now = rate();
  uint64_t deepest = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (threshold_ != kEveryBlock && Hash(ids[i]) > threshold_) continue;
    // Past an absent block the prefix is absent whatever this one's depth: its use looks it up then.
    const uint32_t slot = deepest == kAbsent ? ReuseStack::kNoSlot : stack_.SlotOf(ids[i]);
    uint64_t depth = slot == ReuseStack::kNoSlot ? kAbsent : stack_.DepthAt(slot);
    if (depth != kAbsent && rate_now < 1.0) {
      // 1 + the distinct blocks used since: the sampled ones among them stand for 1/rate each (held
      // below kAbsent however small the rate: ids can be chosen to hash low).
      const double scaled = std::round(static_cast<double>(depth - 1) / rate_now);
      depth = scaled >= 1e19 ? kAbsent - 1 : 1 + static_cast<uint64_t>(scaled);
    }
    deepest = std::max(deepest, depth);
    sampled.push_back(Sampled{static_cast<uint32_t>(i), deepest});
    used.emplace_back(ids[i], slot);
  }
  for (const uint64_t id : outputs) {
    if (threshold_ == kEveryBlock || Hash(id) <= threshold_) used.emplace_back(id, ReuseStack::kNoSlot);
  }
  ForEachInUseOrder(order_, used.size(), [&](size_t k) { Use(used[k].first, used[k].second); });
  Shrink();
  return rate_now;
}

void SampledStack::Use(uint64_t id, uint32_t slot) {
  bool inserted = false;
  if (slot == ReuseStack::kNoSlot) slot = stack_.Hold(id, &inserted);  // new, or met twice in the request
  stack_.TouchAt(slot);
  if (inserted && max_samples_ != kUnlimitedSamples) {  // newly held: the heap may drop it
    heap_.emplace_back(Hash(id), id);
    std::push_heap(heap_.begin(), heap_.end());
  }
}

void SampledStack::Shrink() {
  while (stack_.tracked() > max_samples_) {
    const uint64_t top = heap_.front().first;
    threshold_ = top - 1;  // top > 0: only a full table reaches here, and hashes are distinct
    while (!heap_.empty() && heap_.front().first == top) {
      stack_.Forget(heap_.front().second);
      std::pop_heap(heap_.begin(), heap_.end());
      heap_.pop_back();
      ++forgotten_;
    }
  }
}

uint64_t SampledStack::MemoryBytes() const {
  return stack_.MemoryBytes() + heap_.capacity() * sizeof(heap_[0]) + sizeof(*this);
}

}  // namespace kvledger
