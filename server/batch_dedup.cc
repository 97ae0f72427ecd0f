#include "server/batch_dedup.h"

namespace kvledger {

BatchDeduplicator::BatchDeduplicator(size_t max_batches, absl::Duration max_age,
                                     std::function<absl::Time()> now)
    : max_batches_(max_batches), max_age_(max_age), now_(std::move(now)) {}

void BatchDeduplicator::EvictLocked(absl::Time now) {
  // Oldest first; one still being applied is forgotten too (its Finish then records nothing).
  while (!order_.empty() && (order_.size() > max_batches_ || now - order_.front().first > max_age_)) {
    entries_.erase(order_.front().second);
    order_.pop_front();
  }
}

BatchDeduplicator::Claim BatchDeduplicator::Begin(const std::string& batch_id, v1::RecordBatchResponse* outcome) {
  if (max_batches_ == 0 || batch_id.empty()) return Claim::kNew;
  const absl::Time now = now_();
  MutexLock lock(&mu_);
  EvictLocked(now);
  auto [it, inserted] = entries_.try_emplace(batch_id);
  if (inserted) {
    order_.emplace_back(now, batch_id);
    EvictLocked(now);  // at most max_batches remembered; the oldest goes
    return Claim::kNew;
  }
  if (!it->second.done) return Claim::kInProgress;
  *outcome = it->second.outcome;
  return Claim::kApplied;
}

void BatchDeduplicator::Finish(const std::string& batch_id, const v1::RecordBatchResponse& outcome) {
  if (max_batches_ == 0 || batch_id.empty()) return;
  MutexLock lock(&mu_);
  auto it = entries_.find(batch_id);
  if (it == entries_.end()) return;  // evicted meanwhile
  it->second.done = true;
  it->second.outcome.set_accepted(outcome.accepted());
  it->second.outcome.set_rejected(outcome.rejected());
  for (int i = 0; i < outcome.rejections_size() && i < kMaxRememberedRejections; ++i) {
    *it->second.outcome.add_rejections() = outcome.rejections(i);
  }
}

size_t BatchDeduplicator::size() const {
  MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace kvledger
