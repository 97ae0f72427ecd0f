// Requests arrive as bytes (the Ledger service's raw callback methods) and are counted before they
// are parsed (lib/wire/wire_budget.h), so a message never costs the server much more than its size.
#ifndef KVLEDGER_SERVER_WIRE_ADMISSION_H_
#define KVLEDGER_SERVER_WIRE_ADMISSION_H_

#include <atomic>
#include <string>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "lib/wire/wire_budget.h"

namespace kvledger {

// What a request's wire count says.
enum class Admission { kAdmitted, kTooManyEntries, kRefused };

// The parts of all requests being materialised at once, across every connection: a request is
// parsed only while the total stays within the cap (else RESOURCE_EXHAUSTED, to be retried), so the
// memory of parsed messages in flight never passes cap × kPartBytes.
class PartsBudget {
 public:
  explicit PartsBudget(size_t cap) : cap_(cap) {}
  size_t cap() const { return cap_; }
  bool TryTake(size_t parts) {
    size_t used = used_.load(std::memory_order_relaxed);
    do {
      if (used + parts > cap_) return false;
    } while (!used_.compare_exchange_weak(used, used + parts, std::memory_order_relaxed));
    return true;
  }
  void Give(size_t parts) { used_.fetch_sub(parts, std::memory_order_relaxed); }

 private:
  const size_t cap_;
  std::atomic<size_t> used_{0};
};

// Parts taken from a PartsBudget for as long as a parsed request lives.
class PartsHeld {
 public:
  PartsHeld() = default;
  PartsHeld(const PartsHeld&) = delete;
  PartsHeld& operator=(const PartsHeld&) = delete;
  ~PartsHeld() { Release(); }
  void Hold(PartsBudget* budget, size_t parts) {
    Release();
    budget_ = budget;
    parts_ = parts;
  }
  void Release() {
    if (budget_ != nullptr) budget_->Give(parts_);
    budget_ = nullptr;
  }

 private:
  PartsBudget* budget_ = nullptr;
  size_t parts_ = 0;
};

// Counts `bytes` against `limits`, then parses them into `message` only if they are within them
// and `budget` has room for their parts, which `held` keeps until it is destroyed or released.
// kTooManyEntries leaves `count->entries` for the caller's own refusal; kRefused sets `status`
// (INVALID_ARGUMENT: malformed, or too many parts; RESOURCE_EXHAUSTED: the budget is spent).
template <typename Message>
Admission Admit(const grpc::ByteBuffer& bytes, const WireLimits& limits, PartsBudget& budget, PartsHeld& held,
                Message* message, WireCount* count, grpc::Status* status) {
  grpc::ByteBuffer scan(bytes);  // shares the slices
  grpc::ProtoBufferReader scan_reader(&scan);
  if (const absl::Status counted = CountWire(&scan_reader, bytes.Length(), limits, count); !counted.ok()) {
    *status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(counted.message()));
    return Admission::kRefused;
  }
  if (count->entries > limits.max_entries) return Admission::kTooManyEntries;
  if (count->parts > limits.max_parts()) {
    *status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, TooManyPartsMessage(limits));
    return Admission::kRefused;
  }
  if (!budget.TryTake(count->parts + 1)) {
    *status = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           absl::StrCat("the server is parsing ", budget.cap(), " messages' parts at once already "
                                        "(nested messages and unknown fields); retry"));
    return Admission::kRefused;
  }
  held.Hold(&budget, count->parts + 1);
  grpc::ByteBuffer parse(bytes);
  grpc::ProtoBufferReader parse_reader(&parse);
  if (!message->ParseFromZeroCopyStream(&parse_reader)) {  // e.g. a string that is not UTF-8
    *status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                           absl::StrCat("the message does not parse as ", Message::descriptor()->full_name(),
                                        " (a string field that is not UTF-8?); nothing of it was counted"));
    return Admission::kRefused;
  }
  return Admission::kAdmitted;
}

// Serializes a reply into the raw method's response buffer.
template <typename Message>
grpc::Status Reply(const Message& message, grpc::ByteBuffer* out) {
  bool own = false;
  return grpc::SerializationTraits<Message>::Serialize(message, out, &own);
}

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_WIRE_ADMISSION_H_
