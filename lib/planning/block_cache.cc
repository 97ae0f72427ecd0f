#include "lib/planning/block_cache.h"

#include <utility>

namespace kvledger {

TieredBlockCache::TieredBlockCache(std::vector<uint64_t> capacity_blocks, UseOrder order) : order_(order) {
  for (uint64_t capacity : capacity_blocks) tiers_.push_back(Tier{capacity, 0, kNil, kNil});
  if (tiers_.empty()) tiers_.push_back(Tier{kUnlimited, 0, kNil, kNil});
}

TieredBlockCache::Match TieredBlockCache::Lookup(absl::Span<const int64_t> blocks) const {
  Match match;
  match.per_tier.assign(tiers_.size(), 0);
  for (int64_t id : blocks) {
    const auto it = index_.find(id);
    if (it == index_.end()) break;
    ++match.blocks;
    match.last_tier = entries_[it->second].tier;
    ++match.per_tier[match.last_tier];
  }
  return match;
}

void TieredBlockCache::Unlink(uint32_t e) {
  Entry& entry = entries_[e];
  Tier& tier = tiers_[entry.tier];
  (entry.prev == kNil ? tier.mru : entries_[entry.prev].next) = entry.next;
  (entry.next == kNil ? tier.lru : entries_[entry.next].prev) = entry.prev;
  entry.prev = entry.next = kNil;
  --tier.size;
}

void TieredBlockCache::PushMru(uint32_t e, uint8_t t) {
  Entry& entry = entries_[e];
  Tier& tier = tiers_[t];
  entry.tier = t;
  entry.prev = kNil;
  entry.next = tier.mru;
  (tier.mru == kNil ? tier.lru : entries_[tier.mru].prev) = e;
  tier.mru = e;
  ++tier.size;
}

void TieredBlockCache::Overflow() {
  for (size_t t = 0; t < tiers_.size(); ++t) {
    while (tiers_[t].size > tiers_[t].capacity) {
      const uint32_t victim = tiers_[t].lru;
      Unlink(victim);
      if (t + 1 < tiers_.size()) {
        PushMru(victim, static_cast<uint8_t>(t + 1));
      } else {
        index_.erase(entries_[victim].id);
        free_.push_back(victim);
      }
    }
  }
}

void TieredBlockCache::Use(absl::Span<const int64_t> blocks) {
  ForEachInUseOrder(order_, blocks.size(), [&](size_t k) {
    const int64_t id = blocks[k];
    auto [it, inserted] = index_.try_emplace(id, kNil);
    if (inserted) {
      if (free_.empty()) {
        it->second = static_cast<uint32_t>(entries_.size());
        entries_.emplace_back();
      } else {
        it->second = free_.back();
        free_.pop_back();
      }
      entries_[it->second].id = id;
    } else {
      Unlink(it->second);
    }
    PushMru(it->second, 0);
    Overflow();
  });
}

}  // namespace kvledger
