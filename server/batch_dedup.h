// Remembers the batch ids of recently applied RecordBatch requests, so that a client that retries a
// batch whose reply it never saw (a cut connection, a deadline) gets the original outcome instead of
// having the batch counted twice. Bounded by count, by bytes and by age; one replica's memory only — a
// retry that reaches another replica is counted again (docs/integration.md, "Failure semantics").
//
// Compact: a batch is remembered by the first 128 bits of the SHA-256 of its id (two ids sharing them
// is a chance of 2^-128 per pair), and a batch whose every record was accepted by its count alone
// (kDedupEntryBytes in all). Only a batch with rejections keeps its serialized outcome, with at most
// kMaxRememberedRejections rejection details. Who can flush the window, and what protects it:
// docs/security.md.
//
// Thread-safe.
#ifndef KVLEDGER_SERVER_BATCH_DEDUP_H_
#define KVLEDGER_SERVER_BATCH_DEDUP_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "lib/base/enum_table.h"
#include "lib/base/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "kvledger/v1/ledger.pb.h"

namespace kvledger {

// A batch id may be at most this long.
inline constexpr size_t kMaxBatchIdBytes = 128;
// Rejection details a remembered outcome keeps (the counts stay exact).
inline constexpr int kMaxRememberedRejections = 100;
// What one remembered batch costs, counted against the byte bound: the map slot (at the table's
// lowest load), its order entry and its share of the deque's blocks; a batch with rejections adds its
// outcome's bytes and their string (tests/server/batch_dedup_test.cc measures the heap against it).
inline constexpr size_t kDedupEntryBytes = 112;
inline constexpr size_t kDedupOutcomeOverheadBytes = 64;

// Why a remembered batch was forgotten: its age, or room (count or bytes) for newer ones — the latter
// before the age limit, so a retry of it would be counted again.
enum class DedupEviction : uint8_t { kAge = 0, kEntries = 1, kBytes = 2 };
inline constexpr EnumTable<DedupEviction, 3> kDedupEvictionLabels = {
    {{DedupEviction::kAge, "age"}, {DedupEviction::kEntries, "entries"}, {DedupEviction::kBytes, "bytes"}}};
static_assert(IsDense(kDedupEvictionLabels));
inline constexpr size_t kDedupEvictionCount = kDedupEvictionLabels.size();

class BatchDeduplicator {
 public:
  enum class Claim {
    kNew,         // not seen: apply the batch, then call Finish
    kApplied,     // applied before: *outcome holds the remembered reply
    kInProgress,  // being applied by another call right now: ask the client to retry
  };
  struct Stats {
    size_t entries = 0;
    size_t bytes = 0;
    std::array<uint64_t, kDedupEvictionCount> evictions{};  // by DedupEviction
  };

  // max_batches 0 turns deduplication off (every Claim is kNew). `now` is the clock (tests fake it).
  BatchDeduplicator(size_t max_batches, size_t max_bytes, absl::Duration max_age,
                    std::function<absl::Time()> now = [] { return absl::Now(); });

  Claim Begin(const std::string& batch_id, v1::RecordBatchResponse* outcome);
  // Records the reply of a batch claimed kNew; one that counted nothing (every record rejected) is
  // forgotten instead, and evicts nothing.
  void Finish(const std::string& batch_id, const v1::RecordBatchResponse& outcome);

  Stats stats() const;
  size_t size() const { return stats().entries; }

 private:
  // The first 128 bits of SHA-256(batch id).
  struct Key {
    uint64_t hi = 0, lo = 0;
    bool operator==(const Key& o) const { return hi == o.hi && lo == o.lo; }
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.hi, k.lo);
    }
  };
  struct Entry {
    uint32_t accepted = 0;  // at most --max_batch_records
    bool done = false;
    std::unique_ptr<std::string> outcome;  // the serialized reply, only when something was rejected
  };
  static Key KeyOf(const std::string& batch_id);
  void EvictLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static size_t Cost(const Entry& entry) {
    return kDedupEntryBytes + (entry.outcome ? entry.outcome->size() + kDedupOutcomeOverheadBytes : 0);
  }

  const size_t max_batches_;
  const size_t max_bytes_;
  const absl::Duration max_age_;
  const std::function<absl::Time()> now_;
  mutable Mutex mu_;
  absl::flat_hash_map<Key, Entry> entries_ ABSL_GUARDED_BY(mu_);
  // The remembered (finished) batches, oldest first.
  struct Remembered {
    int64_t at_nanos;  // absl::ToUnixNanos of when it was finished
    Key key;
  };
  std::deque<Remembered> order_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::array<uint64_t, kDedupEvictionCount> evictions_ ABSL_GUARDED_BY(mu_){};
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_BATCH_DEDUP_H_
