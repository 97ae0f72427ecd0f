// What a message will cost to materialise, counted in its wire bytes before it is parsed.
//
// protobuf builds one object for every nested message and keeps every unknown field, so a few bytes
// on the wire can become hundreds in memory (an empty Record is 2 bytes on the wire and a heap object
// of about 200). A request is scanned first: its top-level entries (records, candidates, engine
// statistics) and its "parts" — every nested message, every unknown field (a field this server does
// not know, or one sent with another wire type than its own) and every element of a repeated field,
// each of which protobuf would allocate — are counted without building anything, and a request over its limits is refused
// before a single object exists. A request within them costs at most its size plus
// kPartBytes × parts (docs/security.md).
#ifndef KVLEDGER_LIB_WIRE_WIRE_BUDGET_H_
#define KVLEDGER_LIB_WIRE_WIRE_BUDGET_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/zero_copy_stream.h"

namespace kvledger {

// Parts a request may carry per entry it is allowed (a record: itself, its state boundaries up to
// the 16 validation takes, and a few fields unknown to this server), plus a fixed allowance.
inline constexpr size_t kPartsPerEntry = 24;
inline constexpr size_t kPartsAllowance = 1024;
// The most one part costs once parsed (sizeof a Record and allocator overhead), for the bound.
inline constexpr size_t kPartBytes = 256;

struct WireCount {
  size_t entries = 0;  // occurrences of the counted top-level field(s)
  size_t parts = 0;    // nested messages and unknown fields, at every depth
};

// The limits of one request type: which top-level repeated fields are its entries and how many it
// may have. Parts are allowed kPartsPerEntry per allowed entry plus kPartsAllowance.
struct WireLimits {
  const google::protobuf::Descriptor* type = nullptr;
  // Field numbers whose occurrences are entries (0 = none counted), at the top level only.
  int entry_fields[2] = {0, 0};
  size_t max_entries = 1;
  size_t max_parts() const { return max_entries * kPartsPerEntry + kPartsAllowance; }
};

// Counts `input` as a message of `limits.type`: entries exactly, parts until their limit is passed
// (the count then exceeds it and the rest is not read). INVALID_ARGUMENT when the bytes are not a well-formed message of that shape.
absl::Status CountWire(google::protobuf::io::ZeroCopyInputStream* input, const WireLimits& limits,
                       WireCount* count);

// The same for a message of `byte_size` bytes: one no larger than max_parts() cannot carry more
// parts than bytes, so only its top-level entries are counted (a nested message is not opened) and
// `count->parts` is the bound byte_size. Larger ones are scanned whole.
absl::Status CountWire(google::protobuf::io::ZeroCopyInputStream* input, size_t byte_size, const WireLimits& limits,
                       WireCount* count);

// The refusal for a request past its parts limit: names the count and the limit.
std::string TooManyPartsMessage(const WireLimits& limits);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_WIRE_WIRE_BUDGET_H_
