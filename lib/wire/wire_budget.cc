#include "lib/wire/wire_budget.h"

#include <climits>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"

namespace kvledger {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::io::CodedInputStream;
using google::protobuf::internal::WireFormatLite;

constexpr int kMaxDepth = 16;  // the request types nest three deep

class Scanner {
 public:
  // `shallow`: count the top-level entries only, without opening any nested message.
  Scanner(CodedInputStream& in, const WireLimits& limits, WireCount& count, bool shallow = false)
      : in_(in), limits_(limits), count_(count), shallow_(shallow) {}

  // Scans one message of `type` up to the current limit. False when malformed; stops early (true)
  // once the parts limit is passed. Entries past their limit are still counted (so a refusal can say
  // how many there were), without looking inside them.
  bool Message(const Descriptor* type, int depth) {
    if (depth > kMaxDepth) return false;
    while (!Over()) {
      const uint32_t tag = in_.ReadTag();
      if (tag == 0) return in_.ConsumedEntireMessage();
      if (IsGroup(tag)) {  // proto3 never sends one; protobuf would keep every field inside it
        group_ = true;
        return false;
      }
      const int number = WireFormatLite::GetTagFieldNumber(tag);
      const FieldDescriptor* field = type->FindFieldByNumber(number);
      if (field == nullptr) {  // kept by protobuf as an unknown field
        ++count_.parts;
        if (!WireFormatLite::SkipField(&in_, tag)) return false;
        continue;
      }
      const WireFormatLite::WireType wire = WireFormatLite::GetTagWireType(tag);
      const bool nested = field->type() == FieldDescriptor::TYPE_MESSAGE && wire == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
      if (!nested) {
        // Kept as an unknown field when its wire type is not the field's; an element when repeated.
        if (field->is_repeated() || !Matches(field, wire)) ++count_.parts;
        if (!WireFormatLite::SkipField(&in_, tag)) return false;
        continue;
      }
      if (depth == 0 && (number == limits_.entry_fields[0] || number == limits_.entry_fields[1]) &&
          ++count_.entries > limits_.max_entries) {  // past the limit: counted, never opened
        if (!WireFormatLite::SkipField(&in_, tag)) return false;
        continue;
      }
      ++count_.parts;
      if (shallow_) {
        if (!WireFormatLite::SkipField(&in_, tag)) return false;
        continue;
      }
      if (!Nested(field->message_type(), depth + 1)) return false;
    }
    return true;
  }

  bool group() const { return group_; }  // the scan stopped at a group

 private:
  static bool Matches(const FieldDescriptor* field, WireFormatLite::WireType wire) {
    const auto type = static_cast<WireFormatLite::FieldType>(field->type());
    return wire == WireFormatLite::WireTypeForFieldType(type) ||
           (field->is_packable() && wire == WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  }

  bool Nested(const Descriptor* type, int depth) {
    uint32_t length;
    if (!in_.ReadVarint32(&length)) return false;
    const int left = in_.BytesUntilLimit();  // -1 at the top: no limit but the end of the input
    if (length > static_cast<uint32_t>(INT32_MAX) || (left >= 0 && static_cast<int>(length) > left)) return false;
    const CodedInputStream::Limit limit = in_.PushLimit(static_cast<int>(length));
    const bool ok = Message(type, depth);
    if (Over()) return ok;  // stopped early: the rest is not read
    if (!ok || in_.BytesUntilLimit() != 0) return false;
    in_.PopLimit(limit);
    return true;
  }

  bool Over() const { return count_.parts > limits_.max_parts(); }

  static bool IsGroup(uint32_t tag) {
    const WireFormatLite::WireType wire = WireFormatLite::GetTagWireType(tag);
    return wire == WireFormatLite::WIRETYPE_START_GROUP || wire == WireFormatLite::WIRETYPE_END_GROUP;
  }

  CodedInputStream& in_;
  const WireLimits& limits_;
  WireCount& count_;
  const bool shallow_;
  bool group_ = false;
};

absl::Status Malformed(const Scanner& scanner, const WireLimits& limits) {
  if (scanner.group()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the message carries a group (wire type 3 or 4): proto3 never sends one, so ", limits.type->full_name(),
        " refuses it; nothing of it was counted"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the message does not parse as ", limits.type->full_name(), "; nothing of it was counted"));
}

}  // namespace

absl::Status CountWire(google::protobuf::io::ZeroCopyInputStream* input, const WireLimits& limits,
                       WireCount* count) {
  *count = WireCount{};
  CodedInputStream in(input);
  Scanner scanner(in, limits, *count);
  if (!scanner.Message(limits.type, 0)) return Malformed(scanner, limits);
  return absl::OkStatus();
}

absl::Status CountWire(google::protobuf::io::ZeroCopyInputStream* input, size_t byte_size, const WireLimits& limits,
                       WireCount* count) {
  if (byte_size > limits.max_parts()) return CountWire(input, limits, count);
  // Every part takes at least one byte on the wire, so a message this small cannot carry too many:
  // only its entries need counting.
  *count = WireCount{};
  CodedInputStream in(input);
  Scanner scanner(in, limits, *count, /*shallow=*/true);
  if (!scanner.Message(limits.type, 0)) return Malformed(scanner, limits);
  count->parts = byte_size;  // the bound, for the budget of parts being parsed
  return absl::OkStatus();
}

std::string TooManyPartsMessage(const WireLimits& limits) {
  return absl::StrCat("the message carries more than ", limits.max_parts(),
                      " nested messages and unknown fields: must be at most ", kPartsPerEntry,
                      " per entry allowed plus ", kPartsAllowance, "; nothing of it was counted");
}

}  // namespace kvledger
