// Remembers the batch ids of recently applied RecordBatch requests, so that a client that retries a
// batch whose reply it never saw (a cut connection, a deadline) gets the original outcome instead of
// having the batch counted twice. Bounded by count and by age; one replica's memory only — a retry
// that reaches another replica is counted again (docs/integration.md, "Failure semantics").
//
// Thread-safe.
#ifndef KVLEDGER_SERVER_BATCH_DEDUP_H_
#define KVLEDGER_SERVER_BATCH_DEDUP_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "lib/base/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "kvledger/v1/ledger.pb.h"

namespace kvledger {

// A batch id may be at most this long.
inline constexpr size_t kMaxBatchIdBytes = 128;
// Rejection details a remembered outcome keeps (the counts stay exact).
inline constexpr int kMaxRememberedRejections = 100;

class BatchDeduplicator {
 public:
  enum class Claim {
    kNew,         // not seen: apply the batch, then call Finish
    kApplied,     // applied before: *outcome holds the remembered reply
    kInProgress,  // being applied by another call right now: ask the client to retry
  };

  // max_batches 0 turns deduplication off (every Claim is kNew). `now` is the clock (tests fake it).
  BatchDeduplicator(size_t max_batches, absl::Duration max_age,
                    std::function<absl::Time()> now = [] { return absl::Now(); });

  Claim Begin(const std::string& batch_id, v1::RecordBatchResponse* outcome);
  // Records the reply of a batch claimed kNew.
  void Finish(const std::string& batch_id, const v1::RecordBatchResponse& outcome);

  size_t size() const;

 private:
  struct Entry {
    bool done = false;
    v1::RecordBatchResponse outcome;
  };
  void EvictLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_batches_;
  const absl::Duration max_age_;
  const std::function<absl::Time()> now_;
  mutable Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<absl::Time, std::string>> order_ ABSL_GUARDED_BY(mu_);  // oldest first
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_BATCH_DEDUP_H_
