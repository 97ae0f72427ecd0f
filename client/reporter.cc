#include "client/reporter.h"

#include <algorithm>
#include <mutex>
#include <random>

#include "absl/strings/str_format.h"
#include "kvledger/v1/ledger.grpc.pb.h"

namespace kvledger {
namespace {

size_t RoundUpToPowerOfTwo(size_t n) {
  size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

bool IsTransient(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::RESOURCE_EXHAUSTED;
}

class GrpcTransport final : public BatchTransport {
 public:
  explicit GrpcTransport(const ReporterOptions& options) {
    grpc::ChannelArguments arguments;
    if (!options.load_balancing_policy.empty()) arguments.SetLoadBalancingPolicyName(options.load_balancing_policy);
    // A restarted server is found again within a second or two (gRPC's default backoff grows to 120 s).
    arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
    arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
    auto credentials = options.credentials ? options.credentials : grpc::InsecureChannelCredentials();
    stub_ = v1::Ledger::NewStub(grpc::CreateCustomChannel(options.target, credentials, arguments));
  }
  grpc::Status Send(const v1::RecordBatchRequest& batch, absl::Time deadline,
                    v1::RecordBatchResponse* response) override {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_) return grpc::Status(grpc::StatusCode::CANCELLED, "reporter shut down");
      current_ = &context;
    }
    grpc::Status status = stub_->RecordBatch(&context, batch, response);
    std::lock_guard<std::mutex> lock(mu_);
    current_ = nullptr;
    return status;
  }
  void Cancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    if (current_ != nullptr) current_->TryCancel();
  }

 private:
  std::unique_ptr<v1::Ledger::Stub> stub_;
  std::mutex mu_;
  grpc::ClientContext* current_ = nullptr;  // the call in progress, guarded by mu_
  bool cancelled_ = false;
};

}  // namespace

std::unique_ptr<BatchTransport> MakeGrpcTransport(const ReporterOptions& options) {
  return std::make_unique<GrpcTransport>(options);
}

Reporter::Reporter(ReporterOptions options) : Reporter(options, MakeGrpcTransport(options)) {}

Reporter::Reporter(ReporterOptions options, std::unique_ptr<BatchTransport> transport)
    : options_(std::move(options)),
      transport_(std::move(transport)),
      mask_(RoundUpToPowerOfTwo(std::max<size_t>(options_.max_queue_size, 2)) - 1),
      slots_(new Slot[mask_ + 1]) {
  for (size_t i = 0; i <= mask_; ++i) slots_[i].sequence.store(i, std::memory_order_relaxed);
  std::random_device random;
  batch_prefix_ = absl::StrFormat("%08x%08x-", random(), random());
  sender_ = std::thread([this] { Run(); });
}

Reporter::~Reporter() { Shutdown(options_.shutdown_timeout); }

// A bounded multi-producer queue over `slots_` (each slot's sequence number says whether it is free
// for the producer at `position` or holds a record for the consumer at `position`).
bool Reporter::Report(const v1::Record& record) {
  reported_.fetch_add(1, std::memory_order_relaxed);
  if (Stopping()) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  size_t position = enqueue_position_.load(std::memory_order_relaxed);
  Slot* slot;
  for (;;) {
    slot = &slots_[position & mask_];
    const size_t sequence = slot->sequence.load(std::memory_order_acquire);
    const auto diff = static_cast<std::ptrdiff_t>(sequence) - static_cast<std::ptrdiff_t>(position);
    if (diff == 0) {
      if (enqueue_position_.compare_exchange_weak(position, position + 1, std::memory_order_relaxed)) break;
    } else if (diff < 0) {  // full: drop the new record
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    } else {
      position = enqueue_position_.load(std::memory_order_relaxed);
    }
  }
  slot->record.CopyFrom(record);
  slot->sequence.store(position + 1, std::memory_order_release);
  if (position + 1 - dequeue_position_.load(std::memory_order_relaxed) == options_.max_batch_size) {
    wake_.notify_one();  // a full batch is waiting; otherwise the sender wakes on its interval
  }
  return true;
}

bool Reporter::TryPop(v1::Record* out) {
  const size_t position = dequeue_position_.load(std::memory_order_relaxed);
  Slot& slot = slots_[position & mask_];
  if (slot.sequence.load(std::memory_order_acquire) != position + 1) return false;  // empty or not yet published
  out->Swap(&slot.record);
  dequeue_position_.store(position + 1, std::memory_order_relaxed);
  slot.sequence.store(position + mask_ + 1, std::memory_order_release);
  return true;
}

std::string Reporter::NextBatchId() { return absl::StrFormat("%s%016x", batch_prefix_, ++batch_counter_); }

void Reporter::SendBatch(v1::RecordBatchRequest& batch) {
  const auto n = static_cast<uint64_t>(batch.records_size());
  batch.set_batch_id(NextBatchId());
  absl::Duration backoff = options_.initial_backoff;
  std::mt19937_64 jitter(std::hash<std::string>{}(batch.batch_id()));
  auto answer = [&](uint64_t sent, uint64_t rejected) {
    sent_.fetch_add(sent, std::memory_order_relaxed);
    rejected_.fetch_add(rejected, std::memory_order_relaxed);
    dropped_.fetch_add(n - sent - rejected, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mu_);
      answered_.fetch_add(n, std::memory_order_release);
    }
    answered_cv_.notify_all();
  };
  for (;;) {
    absl::Time stop_deadline;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_deadline = stop_deadline_;
    }
    const absl::Time now = absl::Now();
    if (now >= stop_deadline) return answer(0, 0);  // shut down: dropped
    v1::RecordBatchResponse response;
    const grpc::Status status = transport_->Send(batch, std::min(now + options_.rpc_timeout, stop_deadline), &response);
    if (status.ok()) {
      const uint64_t accepted = std::min<uint64_t>(response.accepted(), n);
      return answer(accepted, std::min<uint64_t>(response.rejected(), n - accepted));
    }
    if (!IsTransient(status.error_code())) return answer(0, 0);  // dropped: retrying cannot help
    retried_.fetch_add(1, std::memory_order_relaxed);
    const double fraction = std::uniform_real_distribution<double>(0.5, 1.0)(jitter);
    const absl::Time until = absl::Now() + backoff * fraction;
    backoff = std::min(backoff * 2, options_.max_backoff);
    std::unique_lock<std::mutex> lock(mu_);
    while (absl::Now() < std::min(until, stop_deadline_)) {
      wake_.wait_until(lock, absl::ToChronoTime(std::min(until, stop_deadline_)));
    }
  }
}

void Reporter::Run() {
  v1::RecordBatchRequest batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait_for(lock, absl::ToChronoMilliseconds(options_.flush_interval), [&] {
        return Stopping() || flush_requested_.load(std::memory_order_relaxed) ||
               enqueue_position_.load(std::memory_order_relaxed) -
                       dequeue_position_.load(std::memory_order_relaxed) >= options_.max_batch_size;
      });
    }
    flush_requested_.store(false, std::memory_order_relaxed);
    for (;;) {  // everything queued now, in batches
      batch.Clear();
      while (static_cast<size_t>(batch.records_size()) < options_.max_batch_size) {
        v1::Record* record = batch.add_records();
        if (!TryPop(record)) {
          batch.mutable_records()->RemoveLast();
          break;
        }
      }
      if (batch.records_size() == 0) break;
      SendBatch(batch);
    }
    if (Stopping()) break;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    sender_done_ = true;
  }
  answered_cv_.notify_all();
}

bool Reporter::Flush(absl::Duration timeout) {
  const size_t target = enqueue_position_.load(std::memory_order_acquire);
  flush_requested_.store(true, std::memory_order_relaxed);
  wake_.notify_one();
  std::unique_lock<std::mutex> lock(mu_);
  return answered_cv_.wait_until(lock, absl::ToChronoTime(absl::Now() + timeout), [&] {
    return answered_.load(std::memory_order_acquire) >= target;
  });
}

ReporterStats Reporter::Shutdown(absl::Duration timeout) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_.load(std::memory_order_relaxed)) {
      first = true;
      stop_deadline_ = absl::Now() + timeout;
      stopping_.store(true, std::memory_order_release);
    }
  }
  if (first) {
    wake_.notify_all();
    {
      // Past the deadline, a call still in progress is cancelled so the sender can finish.
      std::unique_lock<std::mutex> lock(mu_);
      if (!answered_cv_.wait_until(lock, absl::ToChronoTime(stop_deadline_), [&] { return sender_done_; })) {
        lock.unlock();
        transport_->Cancel();
      }
    }
    sender_.join();
    // Records claimed by a Report() that raced with the stop: published soon; counted as dropped.
    v1::Record record;
    while (dequeue_position_.load(std::memory_order_relaxed) < enqueue_position_.load(std::memory_order_acquire)) {
      if (!TryPop(&record)) {
        std::this_thread::yield();
        continue;
      }
      dropped_.fetch_add(1, std::memory_order_relaxed);
      answered_.fetch_add(1, std::memory_order_release);
    }
    answered_cv_.notify_all();
  }
  return stats();
}

ReporterStats Reporter::stats() const {
  ReporterStats s;
  s.sent = sent_.load(std::memory_order_relaxed);
  s.rejected = rejected_.load(std::memory_order_relaxed);
  s.dropped = dropped_.load(std::memory_order_relaxed);
  s.retried = retried_.load(std::memory_order_relaxed);
  s.reported = reported_.load(std::memory_order_relaxed);
  const uint64_t done = s.sent + s.rejected + s.dropped;
  s.queued = s.reported > done ? s.reported - done : 0;
  return s;
}

}  // namespace kvledger
