// Requests arrive as bytes (the Ledger service's raw callback methods) and are counted before they
// are parsed (lib/wire/wire_budget.h), so a message never costs the server much more than its size.
#ifndef KVLEDGER_SERVER_WIRE_ADMISSION_H_
#define KVLEDGER_SERVER_WIRE_ADMISSION_H_

#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "lib/base/mutex.h"
#include "lib/base/per_peer_budget.h"
#include "lib/wire/call_metadata.h"
#include "lib/wire/wire_budget.h"

namespace kvledger {

// What a request's wire count says.
enum class Admission { kAdmitted, kTooManyEntries, kRefused };

// The parts of all requests being materialised at once, across every connection: a request is
// parsed only while the total stays within the cap (else RESOURCE_EXHAUSTED, to be retried), so the
// memory of parsed messages in flight never passes cap × kPartBytes. One client address may hold
// at most half of it (a largest batch is under a quarter), so one peer never starves the others.
inline PerPeerBudget MakePartsBudget(size_t cap) { return PerPeerBudget(cap, cap / 2); }

// The client address of a call ("ipv4:127.0.0.1:5432" -> "ipv4:127.0.0.1"): the unit of fairness.
// Whether the call carries the load generators' marker (kSyntheticMetadata = "1").
inline bool IsSynthetic(const grpc::CallbackServerContext& context) {
  const auto& metadata = context.client_metadata();
  const auto found = metadata.find(kSyntheticMetadata);
  return found != metadata.end() && found->second == "1";
}

inline std::string PeerAddress(const grpc::CallbackServerContext& context) {
  std::string peer = context.peer();
  const size_t colon = peer.rfind(':');
  const size_t first = peer.find(':');
  if (colon != std::string::npos && colon != first) peer.resize(colon);  // keep the scheme, drop the port
  return peer;
}

// Parts taken from the parts budget (MakePartsBudget) for as long as a parsed request lives.
class PartsHeld {
 public:
  PartsHeld() = default;
  PartsHeld(const PartsHeld&) = delete;
  PartsHeld& operator=(const PartsHeld&) = delete;
  ~PartsHeld() { Release(); }
  void Hold(PerPeerBudget* budget, std::string peer, size_t parts) {
    Release();
    budget_ = budget;
    peer_ = std::move(peer);
    parts_ = parts;
  }
  void Release() {
    if (budget_ != nullptr) budget_->Give(peer_, parts_);
    budget_ = nullptr;
  }

 private:
  PerPeerBudget* budget_ = nullptr;
  std::string peer_;
  size_t parts_ = 0;
};

// Counts `bytes` against `limits`, then parses them into `message` only if they are within them
// and `budget` has room for their parts, which `held` keeps until it is destroyed or released.
// kTooManyEntries leaves `count->entries` for the caller's own refusal; kRefused sets `status`
// (INVALID_ARGUMENT: malformed, or too many parts; RESOURCE_EXHAUSTED: the budget is spent), which
// leaves the service through its one conversion to a gRPC status.
template <typename Message>
Admission Admit(const grpc::ByteBuffer& bytes, const WireLimits& limits, PerPeerBudget& budget, const std::string& peer,
                PartsHeld& held, Message* message, WireCount* count, absl::Status* status) {
  grpc::ByteBuffer scan(bytes);  // shares the slices
  grpc::ProtoBufferReader scan_reader(&scan);
  if (const absl::Status counted = CountWire(&scan_reader, bytes.Length(), limits, count); !counted.ok()) {
    *status = absl::InvalidArgumentError(counted.message());
    return Admission::kRefused;
  }
  if (count->entries > limits.max_entries) return Admission::kTooManyEntries;
  if (count->parts > limits.max_parts()) {
    *status = absl::InvalidArgumentError(TooManyPartsMessage(limits));
    return Admission::kRefused;
  }
  if (!budget.TryTake(peer, count->parts + 1)) {
    *status = absl::ResourceExhaustedError(absl::StrCat("the server is parsing as many messages' parts (nested messages and unknown "
                                        "fields) as it takes at once: ", budget.cap(), " in all, ", budget.peer_cap(),
                                        " for one client address; retry"));
    return Admission::kRefused;
  }
  held.Hold(&budget, peer, count->parts + 1);
  grpc::ByteBuffer parse(bytes);
  grpc::ProtoBufferReader parse_reader(&parse);
  if (!message->ParseFromZeroCopyStream(&parse_reader)) {  // e.g. a string that is not UTF-8
    *status = absl::InvalidArgumentError(absl::StrCat("the message does not parse as ", Message::descriptor()->full_name(),
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
