#include "lib/capacity/reuse_stack.h"

#include <algorithm>

namespace kvledger {
namespace {

constexpr uint32_t kMinTimes = 64;

}  // namespace

uint64_t ReuseStack::MemoryBytes() const {
  return (fenwick_.capacity() + slot_at_.capacity() + slot_time_.capacity() + free_slots_.capacity()) *
             sizeof(uint32_t) +
         index_.capacity() * (sizeof(std::pair<uint64_t, uint32_t>) + 1);
}

uint32_t ReuseStack::SlotOf(uint64_t id) const {
  const auto it = index_.find(id);
  return it == index_.end() ? kNoSlot : it->second;
}

uint64_t ReuseStack::DepthOf(uint64_t id) const {
  const uint32_t slot = SlotOf(id);
  return slot == kNoSlot ? kAbsent : DepthAt(slot);
}

uint32_t ReuseStack::Hold(uint64_t id, bool* inserted) {
  auto [it, fresh] = index_.try_emplace(id, 0);
  *inserted = fresh;
  if (!fresh) return it->second;
  if (free_slots_.empty()) {
    it->second = static_cast<uint32_t>(slot_time_.size());
    slot_time_.push_back(0);
  } else {
    it->second = free_slots_.back();
    free_slots_.pop_back();
  }
  return it->second;
}

void ReuseStack::Forget(uint64_t id) {
  const auto it = index_.find(id);
  if (it == index_.end()) return;
  const uint32_t slot = it->second;
  if (slot_time_[slot] != 0) Mark(slot_time_[slot], -1);
  slot_time_[slot] = 0;
  free_slots_.push_back(slot);
  index_.erase(it);
}

uint64_t ReuseStack::Depth(uint32_t time) const {
  int64_t before = 0;  // marks at times < `time`
  for (uint32_t i = time - 1; i > 0; i -= i & (~i + 1)) before += fenwick_[i];
  return index_.size() - static_cast<uint64_t>(before);
}

void ReuseStack::Mark(uint32_t time, int delta) {
  for (uint32_t i = time; i < fenwick_.size(); i += i & (~i + 1)) fenwick_[i] += delta;
}

void ReuseStack::Renumber() {
  // Each used block is marked once, at its last time, where slot_at_ names its slot. The marks come
  // back from the tree by undoing its one-pass build (below), last index first: no hash lookup.
  const auto size = static_cast<uint32_t>(fenwick_.empty() ? 0 : fenwick_.size() - 1);
  for (uint32_t i = size; i > 0; --i) {
    const uint64_t parent = uint64_t{i} + (i & (~i + 1));
    if (parent <= size) fenwick_[parent] -= fenwick_[i];
  }
  std::vector<uint32_t> order;  // the used blocks' slots, least recently used first
  order.reserve(index_.size());
  for (uint32_t t = 1; t <= now_; ++t) {
    if (fenwick_[t] != 0) order.push_back(slot_at_[t]);
  }
  const uint64_t wanted = std::max<uint64_t>(kMinTimes, 2 * (index_.size() + 2));
  const auto times = static_cast<uint32_t>(std::min<uint64_t>(wanted, uint64_t{1} << 31));
  fenwick_.assign(times + 1, 0);
  slot_at_.assign(times + 1, 0);
  now_ = 0;
  for (uint32_t slot : order) {
    ++now_;
    slot_at_[now_] = slot;
    slot_time_[slot] = now_;
    fenwick_[now_] = 1;
  }
  for (uint32_t i = 1; i <= times; ++i) {  // the tree over those marks, built in one pass
    const uint64_t parent = uint64_t{i} + (i & (~i + 1));
    if (parent <= times) fenwick_[parent] += fenwick_[i];
  }
}

void ReuseStack::TouchAt(uint32_t slot) {
  if (slot_time_[slot] != 0) Mark(slot_time_[slot], -1);
  slot_time_[slot] = 0;  // unmarked: a renumbering leaves it out
  if (now_ + 1 >= fenwick_.size()) Renumber();
  ++now_;
  Mark(now_, +1);
  slot_at_[now_] = slot;
  slot_time_[slot] = now_;
}

bool ReuseStack::Touch(uint64_t id) {
  bool inserted = false;
  TouchAt(Hold(id, &inserted));
  return inserted;
}

}  // namespace kvledger
