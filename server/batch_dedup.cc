#include "server/batch_dedup.h"

#include <openssl/sha.h>

#include <cstring>

namespace kvledger {

BatchDeduplicator::BatchDeduplicator(size_t max_batches, size_t max_bytes, absl::Duration max_age,
                                     std::function<absl::Time()> now)
    : max_batches_(max_batches), max_bytes_(max_bytes), max_age_(max_age), now_(std::move(now)) {}

BatchDeduplicator::Key BatchDeduplicator::KeyOf(const std::string& batch_id) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(batch_id.data()), batch_id.size(), digest);
  Key key;
  std::memcpy(&key.hi, digest, sizeof key.hi);
  std::memcpy(&key.lo, digest + sizeof key.hi, sizeof key.lo);
  return key;
}

void BatchDeduplicator::EvictLocked(absl::Time now) {
  // Oldest remembered first (batches being applied are not in the order: they are bounded by the
  // calls in flight).
  while (!order_.empty()) {
    DedupEviction cause;
    if (now - absl::FromUnixNanos(order_.front().at_nanos) > max_age_) {
      cause = DedupEviction::kAge;
    } else if (order_.size() > max_batches_) {
      cause = DedupEviction::kEntries;
    } else if (bytes_ > max_bytes_) {
      cause = DedupEviction::kBytes;
    } else {
      break;
    }
    auto it = entries_.find(order_.front().key);
    bytes_ -= Cost(it->second);
    entries_.erase(it);
    order_.pop_front();
    ++evictions_[static_cast<size_t>(cause)];
  }
}

BatchDeduplicator::Claim BatchDeduplicator::Begin(const std::string& batch_id, v1::RecordBatchResponse* outcome) {
  if (max_batches_ == 0 || batch_id.empty()) return Claim::kNew;
  const Key key = KeyOf(batch_id);
  const absl::Time now = now_();
  MutexLock lock(&mu_);
  EvictLocked(now);
  auto [it, inserted] = entries_.try_emplace(key);
  if (inserted) {  // in progress: not in the order yet, so it evicts nothing (Finish decides)
    bytes_ += Cost(it->second);
    return Claim::kNew;
  }
  if (!it->second.done) return Claim::kInProgress;
  if (it->second.outcome) {
    outcome->ParseFromString(*it->second.outcome);
  } else {
    outcome->Clear();
    outcome->set_accepted(it->second.accepted);
  }
  return Claim::kApplied;
}

void BatchDeduplicator::Finish(const std::string& batch_id, const v1::RecordBatchResponse& outcome) {
  if (max_batches_ == 0 || batch_id.empty()) return;
  std::unique_ptr<std::string> bytes;
  if (outcome.rejected() > 0 || outcome.rejections_size() > 0) {  // else the count says it all
    v1::RecordBatchResponse kept;
    kept.set_accepted(outcome.accepted());
    kept.set_rejected(outcome.rejected());
    for (int i = 0; i < outcome.rejections_size() && i < kMaxRememberedRejections; ++i) {
      *kept.add_rejections() = outcome.rejections(i);
    }
    bytes = std::make_unique<std::string>(kept.SerializeAsString());
  }
  const Key key = KeyOf(batch_id);
  const absl::Time now = now_();
  MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  if (outcome.accepted() == 0) {
    // Nothing counted: a retry is refused again the same way, so it needs no memory and may evict
    // nothing (else batches of rejected records would flush the window for free).
    bytes_ -= Cost(it->second);
    entries_.erase(it);
    return;
  }
  it->second.done = true;
  it->second.accepted = static_cast<uint32_t>(outcome.accepted());
  it->second.outcome = std::move(bytes);
  bytes_ += Cost(it->second) - kDedupEntryBytes;
  order_.push_back({absl::ToUnixNanos(now), key});
  EvictLocked(now);  // within the count and byte bounds; the oldest goes
}

BatchDeduplicator::Stats BatchDeduplicator::stats() const {
  MutexLock lock(&mu_);
  return Stats{entries_.size(), bytes_, evictions_};
}

}  // namespace kvledger
