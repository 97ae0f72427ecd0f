#include "lib/capacity/reuse_stack.h"

#include <algorithm>

#include "absl/numeric/bits.h"

namespace kvledger {
namespace {

constexpr uint32_t kMinTimes = 64;

// The bits set in a word, computed here: the build targets baseline x86-64, where the builtin is a
// call into the compiler's runtime.
inline int Popcount(uint64_t x) {
  x -= (x >> 1) & 0x5555555555555555;
  x = (x & 0x3333333333333333) + ((x >> 2) & 0x3333333333333333);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0f;
  return static_cast<int>((x * 0x0101010101010101) >> 56);
}

}  // namespace

uint64_t ReuseStack::MemoryBytes() const {
  return marks_.capacity() * sizeof(uint64_t) +
         (word_marks_.capacity() + dense_.capacity() + slot_at_.capacity() + slot_time_.capacity() + free_slots_.capacity()) *
             sizeof(uint32_t) +
         index_.capacity() * (sizeof(std::pair<uint64_t, uint32_t>) + 1);
}

uint32_t ReuseStack::SlotOf(uint64_t id) const {
  if (id < dense_.size()) return dense_[id];
  const auto it = index_.find(id);
  return it == index_.end() ? kNoSlot : it->second;
}

uint64_t ReuseStack::DepthOf(uint64_t id) const {
  const uint32_t slot = SlotOf(id);
  return slot == kNoSlot ? kAbsent : DepthAt(slot);
}

uint32_t ReuseStack::NewSlot() {
  if (free_slots_.empty()) {
    slot_time_.push_back(0);
    return static_cast<uint32_t>(slot_time_.size() - 1);
  }
  const uint32_t slot = free_slots_.back();
  free_slots_.pop_back();
  return slot;
}

uint32_t ReuseStack::Hold(uint64_t id, bool* inserted) {
  if (id < dense_.size()) {
    *inserted = dense_[id] == kNoSlot;
    if (*inserted) {
      dense_[id] = NewSlot();
      ++dense_held_;
    }
    return dense_[id];
  }
  auto [it, fresh] = index_.try_emplace(id, 0);
  *inserted = fresh;
  if (fresh) it->second = NewSlot();
  return it->second;
}

void ReuseStack::Forget(uint64_t id) {
  uint32_t slot = kNoSlot;
  if (id < dense_.size()) {
    std::swap(slot, dense_[id]);
    if (slot == kNoSlot) return;
    --dense_held_;
  } else {
    const auto it = index_.find(id);
    if (it == index_.end()) return;
    slot = it->second;
    index_.erase(it);
  }
  if (slot_time_[slot] != 0) Mark(slot_time_[slot], -1);
  slot_time_[slot] = 0;
  free_slots_.push_back(slot);
}

uint64_t ReuseStack::Depth(uint32_t time) const {
  const uint32_t word = time / 64;
  // Marks at times < `time`: the whole words before its own, then its word's bits below it.
  int64_t before = Popcount(marks_[word] & ((uint64_t{1} << (time % 64)) - 1));
  for (uint32_t i = word; i > 0; i -= i & (~i + 1)) before += word_marks_[i];
  return tracked() - static_cast<uint64_t>(before);
}

void ReuseStack::Mark(uint32_t time, int delta) {
  marks_[time / 64] ^= uint64_t{1} << (time % 64);  // +1 sets the unset bit, -1 clears the set one
  for (uint32_t i = time / 64 + 1; i < word_marks_.size(); i += i & (~i + 1)) word_marks_[i] += delta;
}

void ReuseStack::Renumber() {
  // Each used block is marked once, at its last time, where slot_at_ names its slot: the marked
  // times in order are the used blocks, least recently used first. No hash lookup.
  std::vector<uint32_t> order;
  order.reserve(tracked());
  for (uint32_t w = 0; w < marks_.size(); ++w) {
    for (uint64_t bits = marks_[w]; bits != 0; bits &= bits - 1) {
      order.push_back(slot_at_[w * 64 + static_cast<uint32_t>(absl::countr_zero(bits))]);
    }
  }
  const uint64_t wanted = std::max<uint64_t>(kMinTimes, 2 * (tracked() + 2));
  const auto times = static_cast<uint32_t>(std::min<uint64_t>(wanted, uint64_t{1} << 31));
  slot_at_.assign(times, 0);  // times 1..times - 1; time 0 is never handed out
  marks_.assign((times + 63) / 64, 0);
  now_ = 0;
  for (uint32_t slot : order) {
    ++now_;
    slot_at_[now_] = slot;
    slot_time_[slot] = now_;
    marks_[now_ / 64] |= uint64_t{1} << (now_ % 64);
  }
  word_marks_.assign(marks_.size() + 1, 0);
  for (uint32_t i = 1; i < word_marks_.size(); ++i) {  // the tree over the words' counts, in one pass
    word_marks_[i] += Popcount(marks_[i - 1]);
    const uint64_t parent = uint64_t{i} + (i & (~i + 1));
    if (parent < word_marks_.size()) word_marks_[parent] += word_marks_[i];
  }
}

void ReuseStack::TouchAt(uint32_t slot) {
  if (slot_time_[slot] != 0) Mark(slot_time_[slot], -1);
  slot_time_[slot] = 0;  // unmarked: a renumbering leaves it out
  if (now_ + 1 >= slot_at_.size()) Renumber();
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
