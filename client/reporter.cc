#include "client/reporter.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "kvledger/v1/ledger.grpc.pb.h"
#include "lib/wire/call_metadata.h"

namespace kvledger {
namespace {

size_t RoundUpToPowerOfTwo(size_t n) {
  size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

// CANCELLED is what a call meets when its replica's gRPC server shuts down under it (the server
// applies nothing once it is draining); like a cut connection, it is retried on the same replica while
// that one is reachable, which deduplicates it by batch id.
bool IsTransient(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::RESOURCE_EXHAUSTED || code == grpc::StatusCode::CANCELLED;
}

// A call refused for its size (gRPC's "larger than max", on either side): nothing of it was applied.
bool IsTooLarge(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
         absl::StrContains(status.error_message(), "larger than max");
}

// A batch's bytes beyond its records' own: its batch_id and each record's tag and length.
constexpr size_t kBatchOverheadBytes = 64;

// The addresses behind a target, for one channel per replica: "host:port" and "dns:///host:port"
// resolved now, "ipv4:" and "ipv6:" lists as listed. Empty for any other target (unix:, xds:, ...),
// or when the name does not resolve: one channel for the whole target then.
struct ResolvedTarget {
  std::string host;  // the name, for TLS and :authority; empty for literal lists
  std::vector<std::string> addresses;  // "ipv4:1.2.3.4:50051", "ipv6:[::1]:50051"
};

ResolvedTarget Resolve(absl::string_view target) {
  ResolvedTarget out;
  if (absl::ConsumePrefix(&target, "ipv4:") || absl::ConsumePrefix(&target, "ipv6:")) {
    for (absl::string_view a : absl::StrSplit(target, ',')) {
      out.addresses.push_back(absl::StrCat(absl::StrContains(a, '[') ? "ipv6:" : "ipv4:", a));
    }
    return out;
  }
  if (!absl::ConsumePrefix(&target, "dns:///") && !absl::ConsumePrefix(&target, "dns:") &&
      absl::StrContains(target, ":/")) {
    return out;  // another resolver scheme
  }
  const size_t colon = target.rfind(':');
  if (colon == absl::string_view::npos || absl::StrContains(target, '/')) return out;
  std::string host(target.substr(0, colon));
  const std::string port(target.substr(colon + 1));
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return out;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const bool v6 = a->ai_family == AF_INET6;
    const void* ip = v6 ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr)
                        : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr);
    if (inet_ntop(a->ai_family, ip, text, sizeof text) == nullptr) continue;
    std::string address = v6 ? absl::StrCat("ipv6:[", text, "]:", port) : absl::StrCat("ipv4:", text, ":", port);
    if (std::find(out.addresses.begin(), out.addresses.end(), address) == out.addresses.end()) {
      out.addresses.push_back(std::move(address));
    }
  }
  freeaddrinfo(found);
  out.host = host;
  return out;
}

// One channel per replica behind the target, so that a batch's retries go back to the replica that
// got its first attempt (which deduplicates it by batch id) while that replica is reachable, and move
// only when its connection has failed for kFailingFor, or after options.retry_same_replica_for (a
// frozen replica keeps its connection up and never answers: the batch then moves, at the risk of
// counting twice what that replica applied). New batches rotate over the reachable replicas
// (round_robin) or stay on the first reachable one (pick_first), skipping for kResolveEvery one whose
// call ran out of time. The target is resolved again every kResolveEvery, so replicas
// that join get batches and those that leave stop getting them. Used from the sender thread only.
class ReplicaSet {
 public:
  static constexpr absl::Duration kResolveEvery = absl::Seconds(15);
  // A connection cut (an ambiguous failure) leaves the channel failing until it reconnects: a retry
  // stays with its replica unless the failure has lasted this long.
  static constexpr absl::Duration kFailingFor = absl::Seconds(1);

  explicit ReplicaSet(const ReporterOptions& options) : options_(options) {}

  // The stub for an attempt at `batch_id`.
  v1::Ledger::Stub* Pick(const std::string& batch_id) {
    const absl::Time now = absl::Now();
    if (now >= next_resolve_) Refresh();
    const bool same_batch = batch_id == pinned_batch_;
    if (same_batch && now < pinned_until_ && replicas_.count(pinned_address_) > 0 &&
        FailingFor(replicas_[pinned_address_], now) < kFailingFor) {
      return replicas_[pinned_address_].stub.get();
    }
    if (!same_batch) pinned_until_ = now + options_.retry_same_replica_for;
    const size_t n = order_.size();
    size_t chosen = !options_.affinity_key.empty()                  ? AffinityStart()
                    : options_.load_balancing_policy == "pick_first" ? 0
                                                                     : next_++ % n;
    for (size_t i = 0; i < n; ++i) {
      const size_t k = (chosen + i) % n;
      Replica& r = replicas_[order_[k]];
      if (FailingFor(r, now) == absl::ZeroDuration() && now >= r.slow_until) {
        chosen = k;
        break;
      }
    }
    pinned_batch_ = batch_id;
    pinned_address_ = order_[chosen];
    return replicas_[pinned_address_].stub.get();
  }

  // The outcome of the attempt Pick() last chose for: a replica that let a call run out of time (frozen
  // or overloaded) gets no new batches for a while; one that answers is trusted again. One that is
  // `draining` (it refused the call before applying any of it: kDrainingMetadata) is leaving: the
  // batch's retry goes elsewhere at once, and no new batch goes there.
  void Answered(grpc::StatusCode code, bool draining) {
    auto it = replicas_.find(pinned_address_);
    if (it == replicas_.end()) return;
    if (draining) {
      it->second.slow_until = absl::Now() + kResolveEvery;
      pinned_until_ = absl::InfinitePast();
    } else if (code == grpc::StatusCode::DEADLINE_EXCEEDED) {
      it->second.slow_until = absl::Now() + kResolveEvery;
    } else if (code == grpc::StatusCode::OK) {
      it->second.slow_until = absl::InfinitePast();
    }
  }

 private:
  struct Replica {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<v1::Ledger::Stub> stub;
    absl::Time failing_since = absl::InfiniteFuture();  // when its channel was first seen failing
    absl::Time slow_until = absl::InfinitePast();       // no new batches before (a call timed out)
  };
  // How long the replica's channel has been failing to connect; zero when it is not.
  static absl::Duration FailingFor(Replica& r, absl::Time now) {
    if (r.channel->GetState(true) != GRPC_CHANNEL_TRANSIENT_FAILURE) {
      r.failing_since = absl::InfiniteFuture();
      return absl::ZeroDuration();
    }
    if (r.failing_since == absl::InfiniteFuture()) r.failing_since = now;
    return now - r.failing_since + absl::Nanoseconds(1);
  }

  std::shared_ptr<grpc::Channel> Channel(const std::string& target, const std::string& host) const {
    grpc::ChannelArguments arguments;
    // A restarted server is found again within a second or two (gRPC's default backoff grows to 120 s).
    arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
    arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
    arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(absl::ToInt64Milliseconds(options_.keepalive_time)));
    arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                     static_cast<int>(absl::ToInt64Milliseconds(options_.keepalive_timeout)));
    arguments.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    if (!host.empty()) arguments.SetSslTargetNameOverride(host);  // certificates name the host, not its address
    if (target == options_.target) arguments.SetLoadBalancingPolicyName(options_.load_balancing_policy);
    auto credentials = options_.credentials ? options_.credentials : grpc::InsecureChannelCredentials();
    return grpc::CreateCustomChannel(target, credentials, arguments);
  }

  // The replica options_.affinity_key wins: the highest FNV-1a 64 of (key, 0, address).
  size_t AffinityStart() const {
    size_t best = 0;
    uint64_t best_score = 0;
    for (size_t k = 0; k < order_.size(); ++k) {
      uint64_t h = 14695981039346656037ull;
      auto mix = [&h](absl::string_view bytes) {
        for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
      };
      mix(options_.affinity_key);
      mix(absl::string_view("\0", 1));
      mix(order_[k]);
      if (k == 0 || h > best_score) best = k, best_score = h;
    }
    return best;
  }

  void Refresh() {
    next_resolve_ = absl::Now() + kResolveEvery;
    ResolvedTarget resolved = Resolve(options_.target);
    if (resolved.addresses.empty()) {
      if (!order_.empty()) return;  // keep what we have while the name does not resolve
      resolved.addresses = {options_.target};  // not resolvable here: gRPC balances the target itself
    }
    std::map<std::string, Replica> next;
    for (const std::string& address : resolved.addresses) {
      auto it = replicas_.find(address);
      if (it != replicas_.end()) {
        next[address] = std::move(it->second);
      } else {
        Replica& r = next[address];
        r.channel = Channel(address, resolved.host);
        r.stub = v1::Ledger::NewStub(r.channel);
      }
    }
    replicas_ = std::move(next);
    order_ = resolved.addresses;
  }

  const ReporterOptions& options_;
  std::map<std::string, Replica> replicas_;
  std::vector<std::string> order_;  // as resolved
  size_t next_ = 0;
  std::string pinned_batch_, pinned_address_;
  absl::Time pinned_until_;  // the batch's retries stay with its replica until then
  absl::Time next_resolve_ = absl::InfinitePast();
};

class GrpcTransport final : public BatchTransport {
 public:
  explicit GrpcTransport(const ReporterOptions& options) : options_(options), replicas_(options_) {}
  grpc::Status Send(const v1::RecordBatchRequest& batch, absl::Time deadline,
                    v1::RecordBatchResponse* response) override {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    if (options_.synthetic) context.AddMetadata(kSyntheticMetadata, "1");
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_) return grpc::Status(grpc::StatusCode::CANCELLED, "reporter shut down");
      current_ = &context;
    }
    grpc::Status status = replicas_.Pick(batch.batch_id())->RecordBatch(&context, batch, response);
    const auto& trailers = context.GetServerTrailingMetadata();
    const auto draining = trailers.find(kDrainingMetadata);
    replicas_.Answered(status.error_code(), draining != trailers.end() && draining->second == "1");
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
  const ReporterOptions options_;
  ReplicaSet replicas_;
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
  if (record.ByteSizeLong() + kBatchOverheadBytes > options_.max_message_bytes) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    too_large_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
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
    if (IsTooLarge(status)) {  // nothing applied: each half on its own, or the record alone rejected
      if (n == 1) {
        too_large_.fetch_add(1, std::memory_order_relaxed);
        return answer(0, 1);
      }
      v1::RecordBatchRequest second;
      const int half = batch.records_size() / 2;
      for (int i = half; i < batch.records_size(); ++i) *second.add_records() = std::move(*batch.mutable_records(i));
      batch.mutable_records()->DeleteSubrange(half, batch.records_size() - half);
      SendBatch(batch);
      return SendBatch(second);
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
  std::optional<v1::Record> carry;  // popped, past the last batch's bytes: the next batch's first
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
      size_t bytes = 0;
      if (carry) {
        bytes += carry->ByteSizeLong();
        *batch.add_records() = *std::move(carry);
        carry.reset();
      }
      while (static_cast<size_t>(batch.records_size()) < options_.max_batch_size) {
        v1::Record* record = batch.add_records();
        if (!TryPop(record)) {
          batch.mutable_records()->RemoveLast();
          break;
        }
        const size_t size = record->ByteSizeLong();
        if (bytes + size > options_.max_batch_bytes && batch.records_size() > 1) {
          carry = std::move(*record);
          batch.mutable_records()->RemoveLast();
          break;
        }
        bytes += size;
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
  s.too_large = too_large_.load(std::memory_order_relaxed);
  s.dropped = dropped_.load(std::memory_order_relaxed);
  s.retried = retried_.load(std::memory_order_relaxed);
  s.reported = reported_.load(std::memory_order_relaxed);
  const uint64_t done = s.sent + s.rejected + s.dropped;
  s.queued = s.reported > done ? s.reported - done : 0;
  return s;
}

}  // namespace kvledger
