#include "lib/capacity/reuse_stack.h"

#include <algorithm>

namespace kvledger {
namespace {

constexpr uint32_t kMinTimes = 64;

}  // namespace

uint64_t ReuseStack::MemoryBytes() const {
  return fenwick_.capacity() * sizeof(int32_t) + id_at_.capacity() * sizeof(uint64_t) +
         index_.capacity() * (sizeof(std::pair<uint64_t, uint32_t>) + 1);
}

uint64_t ReuseStack::DepthOf(uint64_t id) const {
  const auto it = index_.find(id);
  return it == index_.end() ? kAbsent : Depth(it->second);
}

void ReuseStack::Forget(uint64_t id) {
  const auto it = index_.find(id);
  if (it == index_.end()) return;
  Mark(it->second, -1);
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
  // Each tracked block is marked once, at its last time, where id_at_ names it. The marks come back
  // from the tree by undoing its one-pass build (below), last index first, with no hash lookup.
  const auto size = static_cast<uint32_t>(fenwick_.empty() ? 0 : fenwick_.size() - 1);
  for (uint32_t i = size; i > 0; --i) {
    const uint64_t parent = uint64_t{i} + (i & (~i + 1));
    if (parent <= size) fenwick_[parent] -= fenwick_[i];
  }
  std::vector<uint64_t> order;  // tracked blocks, least recently used first
  order.reserve(index_.size());
  for (uint32_t t = 1; t <= now_; ++t) {
    if (fenwick_[t] != 0) order.push_back(id_at_[t]);
  }
  const uint64_t wanted = std::max<uint64_t>(kMinTimes, 2 * (order.size() + 2));
  const auto times = static_cast<uint32_t>(std::min<uint64_t>(wanted, uint64_t{1} << 31));
  fenwick_.assign(times + 1, 0);
  id_at_.assign(times + 1, 0);
  now_ = 0;
  for (uint64_t id : order) {
    ++now_;
    id_at_[now_] = id;
    index_.find(id)->second = now_;  // an existing key: no rehash, iterators stay valid
    fenwick_[now_] = 1;
  }
  for (uint32_t i = 1; i <= times; ++i) {  // the tree over those marks, built in one pass
    const uint64_t parent = uint64_t{i} + (i & (~i + 1));
    if (parent <= times) fenwick_[parent] += fenwick_[i];
  }
}

bool ReuseStack::Touch(uint64_t id) {
  auto [it, inserted] = index_.try_emplace(id, 0);
  if (!inserted) Mark(it->second, -1);
  it->second = 0;  // unmarked: a renumbering leaves it out
  if (now_ + 1 >= fenwick_.size()) {
    Renumber();  // changes values only: `it` stays valid
  }
  ++now_;
  Mark(now_, +1);
  id_at_[now_] = id;
  it->second = now_;
  return inserted;
}

}  // namespace kvledger
