// kvledger::Reporter: reports records to kvledger from a scheduler's serving path without ever
// slowing it down. Report() copies the record into a bounded, lock-free queue and returns; one
// background thread sends what is queued in batches (RecordBatch, each with a unique batch_id) when
// a batch is full, when the oldest record has waited flush_interval, or on Flush().
//
// Guarantees
// - Report() is non-blocking and O(1) from any number of threads: no network, no lock, no
//   allocation once a queue slot has held a record of that size. It returns false when the record
//   was dropped (queue full, or the reporter shut down); every drop is counted in Stats::dropped.
// - Full queue policy: the NEW record is dropped (drop-newest); what is queued keeps its order.
// - Transient failures (UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED) are retried with
//   capped, jittered exponential backoff, forever while the reporter runs, with the SAME batch_id
//   and to the SAME replica while it is reachable: the replica that applied a batch whose reply was
//   lost answers the retry without counting it again. A retry moves to another replica only when
//   the first one's connection has been failing for 1 s, or after retry_same_replica_for (10 s) of
//   retries (a frozen replica). A replica whose call ran out of time gets no new batch for 15 s. While a batch is retried the queue keeps filling, and
//   then drops (counted).
// - Replicas: the target is resolved by the reporter (host:port, dns:///host:port, ipv4:/ipv6:
//   lists; again every 15 s, so replicas that join get batches), one connection per replica. Any
//   other target (unix:, xds:, ...) is one gRPC channel balanced by gRPC, without sticky retries.
// - Any other failure (e.g. INVALID_ARGUMENT for the whole batch, UNIMPLEMENTED) drops the batch,
//   counted in Stats::dropped. Records the server rejects one by one are counted in Stats::rejected.
// - Every record is accounted exactly once: reported = sent + rejected + dropped + queued.
// - Shutdown (or the destructor) sends what is queued until its deadline, then drops the rest
//   (counted) and stops the thread; it never blocks longer than the deadline plus one RPC's
//   cancellation.
//
// Thread safety: every method may be called from any thread. Ownership: the Reporter owns its
// channel, queue and thread; records are copied in Report().
#ifndef KVLEDGER_CLIENT_REPORTER_H_
#define KVLEDGER_CLIENT_REPORTER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "kvledger/v1/ledger.pb.h"

namespace kvledger {

struct ReporterOptions {
  // kvledger-server HOST:PORT, or any gRPC target ("dns:///kvledger-grpc.ns.svc:50051").
  std::string target = "127.0.0.1:50051";
  // Channel credentials; insecure when null.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // Across the target's replicas: "round_robin" sends each new batch to the next reachable replica,
  // "pick_first" every batch to the first reachable one. A retry stays on its replica either way.
  std::string load_balancing_policy = "round_robin";
  // When set (say the cache_id of the engine this Reporter reports for), new batches go to the replica
  // this key picks instead — rendezvous hashing over the replicas' addresses (the highest FNV-1a 64 of
  // key, a zero byte and the address), the next reachable one while it is not — so every record of one
  // cache reaches one replica, as the capacity curves need (docs/operations.md, "Capacity curves"). A
  // replica that joins or leaves moves only the keys it wins or held. The Python Reporter picks alike.
  std::string affinity_key;
  // Records the queue holds, rounded up to a power of two.
  size_t max_queue_size = 2048;
  // Records per RecordBatch, and the bytes a batch's records take on the wire: a record with many
  // prefix_block_ids (up to 590 kB) ends a batch early, well inside the server's 4 MiB
  // --max_receive_message_bytes. A record larger than this alone is sent in a batch of its own.
  size_t max_batch_size = 512;
  size_t max_batch_bytes = 1 << 20;
  // The largest message a call may carry (by default the server's default
  // --max_receive_message_bytes): a record whose encoding cannot fit in one is refused at Report()
  // (rejected, counted in too_large), never queued. A batch a server refuses as larger than its own
  // limit is split in two and each half sent; a record alone refused so is rejected the same way.
  size_t max_message_bytes = 4 << 20;
  // A queued record waits at most this long before its batch is sent.
  absl::Duration flush_interval = absl::Seconds(1);
  // Deadline of one RecordBatch attempt.
  absl::Duration rpc_timeout = absl::Seconds(5);
  // How long a batch's retries stay with the replica of its first attempt (which may have applied
  // it) while that replica's connection is up but its calls fail: a frozen replica holds the sender
  // this long at most, and the batch then moves (and may count twice).
  absl::Duration retry_same_replica_for = absl::Seconds(10);
  // HTTP/2 keepalive on every replica's connection, idle ones too: a ping this often, and a
  // connection whose ping is not answered within keepalive_timeout is closed, so a replica that
  // vanished or froze is seen failing (and skipped) before a batch waits on it. At least the
  // server's --keepalive_min_ping_seconds (30 s), else it closes the connection.
  absl::Duration keepalive_time = absl::Seconds(60);
  absl::Duration keepalive_timeout = absl::Seconds(10);
  // Retry backoff: first wait, cap; each wait is drawn uniformly from [wait/2, wait].
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(5);
  // How long the destructor keeps sending what is queued.
  absl::Duration shutdown_timeout = absl::Seconds(5);
  // Marks every call as a load generator's (kSyntheticMetadata): the server validates and answers
  // its records but counts them only in kvledger_synthetic_records_total. For tests and demos that
  // must not move a real server's figures.
  bool synthetic = false;
};

// Monotonic counters, except queued.
struct ReporterStats {
  uint64_t reported = 0;  // Report() calls
  uint64_t queued = 0;    // in the queue or in a batch not yet answered
  uint64_t sent = 0;      // accepted and counted by the server
  uint64_t rejected = 0;  // rejected by the server as invalid (not counted; see its reasons), or too large
  uint64_t too_large = 0;  // of rejected: records larger than a message may be (max_message_bytes)
  uint64_t dropped = 0;   // never delivered: queue full, shut down, or a non-retryable failure
  uint64_t retried = 0;   // batch attempts retried after a transient failure
};

// Sends one batch: the seam between the reporter and the wire (tests use fakes).
class BatchTransport {
 public:
  virtual ~BatchTransport() = default;
  // Blocks until the reply, an error, or `deadline`.
  virtual grpc::Status Send(const v1::RecordBatchRequest& batch, absl::Time deadline,
                            v1::RecordBatchResponse* response) = 0;
  // Makes a Send() in progress on another thread return soon (CANCELLED); called at shutdown.
  virtual void Cancel() = 0;
};

// The gRPC transport: RecordBatch on a channel to options.target.
std::unique_ptr<BatchTransport> MakeGrpcTransport(const ReporterOptions& options);

class Reporter {
 public:
  explicit Reporter(ReporterOptions options);
  Reporter(ReporterOptions options, std::unique_ptr<BatchTransport> transport);
  ~Reporter();  // Shutdown(options.shutdown_timeout)
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  // Queues a copy of `record`; false when it was dropped (counted).
  bool Report(const v1::Record& record);

  // Waits until every record reported before the call has been answered (sent, rejected or
  // dropped); false on timeout. Starts sending at once instead of waiting for flush_interval.
  bool Flush(absl::Duration timeout);

  // Sends what is queued until `timeout`, drops the rest, stops the sender; later Report() calls
  // drop. Idempotent; returns the final stats.
  ReporterStats Shutdown(absl::Duration timeout);

  ReporterStats stats() const;

 private:
  struct Slot {
    std::atomic<size_t> sequence{0};
    v1::Record record;
  };
  bool TryPop(v1::Record* out);
  void Run();
  void SendBatch(v1::RecordBatchRequest& batch);
  bool Stopping() const { return stopping_.load(std::memory_order_acquire); }
  std::string NextBatchId();

  const ReporterOptions options_;
  std::unique_ptr<BatchTransport> transport_;
  const size_t mask_;
  std::unique_ptr<Slot[]> slots_;
  alignas(64) std::atomic<size_t> enqueue_position_{0};
  alignas(64) std::atomic<size_t> dequeue_position_{0};

  alignas(64) std::atomic<uint64_t> reported_{0};
  std::atomic<uint64_t> sent_{0}, rejected_{0}, dropped_{0}, retried_{0}, too_large_{0};
  std::atomic<size_t> answered_{0};  // queue positions answered (sent, rejected or dropped)

  std::mutex mu_;
  std::condition_variable wake_;      // the sender: work, flush or shutdown
  std::condition_variable answered_cv_;  // Flush() waiters
  std::atomic<bool> flush_requested_{false};
  std::atomic<bool> stopping_{false};
  absl::Time stop_deadline_ = absl::InfiniteFuture();  // guarded by mu_
  bool sender_done_ = false;                           // guarded by mu_
  uint64_t batch_counter_ = 0;                         // sender thread only
  std::string batch_prefix_;
  std::thread sender_;
};

}  // namespace kvledger

#endif  // KVLEDGER_CLIENT_REPORTER_H_
