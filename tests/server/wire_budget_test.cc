// lib/wire/wire_budget (here for the service's messages, which only the gRPC proto target builds):
// the wire count against hand-built bytes: entries and parts counted exactly as protobuf would build
// them, limits applied before anything is parsed, malformed bytes refused.
#include "lib/wire/wire_budget.h"

#include <string>

#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvledger/v1/advice.pb.h"
#include "kvledger/v1/ledger.pb.h"

namespace kvledger {
namespace {

using ::testing::HasSubstr;

WireLimits BatchLimits(size_t max_records) {
  WireLimits limits;
  limits.type = v1::RecordBatchRequest::descriptor();
  limits.entry_fields[0] = v1::RecordBatchRequest::kRecordsFieldNumber;
  limits.max_entries = max_records;
  return limits;
}

absl::Status Count(const std::string& bytes, const WireLimits& limits, WireCount* count) {
  google::protobuf::io::ArrayInputStream input(bytes.data(), static_cast<int>(bytes.size()));
  return CountWire(&input, limits, count);
}

std::string Repeat(const std::string& piece, size_t times) {
  std::string out;
  for (size_t i = 0; i < times; ++i) out += piece;
  return out;
}

// A real batch, serialized by protobuf: 3 records (one with 2 state boundaries) and a batch id.
TEST(WireBudgetTest, CountsRecordsAndNestedMessagesOfARealBatch) {
  v1::RecordBatchRequest batch;
  batch.set_batch_id("b1");
  for (int i = 0; i < 3; ++i) batch.add_records()->set_prompt_tokens(100);
  batch.mutable_records(1)->add_state_boundaries()->set_boundary_tokens(16);
  batch.mutable_records(1)->add_state_boundaries()->set_boundary_tokens(32);
  WireCount count;
  ASSERT_TRUE(Count(batch.SerializeAsString(), BatchLimits(10), &count).ok());
  EXPECT_EQ(count.entries, 3u);
  EXPECT_EQ(count.parts, 5u);  // 3 records + 2 boundaries; the scalars and the id allocate nothing
}

// prefix_block_ids is packed fixed64: 10,000 ids are one run of 80,000 bytes that protobuf keeps as
// one array of the same 80,000 bytes (one part, memory = wire bytes). Sent unpacked, each id is its
// own tagged element, a part each: past the parts a one-record batch may carry.
TEST(WireBudgetTest, PrefixBlockIdsCostTheirWireBytes) {
  v1::RecordBatchRequest batch;
  v1::Record* record = batch.add_records();
  for (uint64_t id = 0; id < 10000; ++id) record->add_prefix_block_ids(id * 0x9E3779B97F4A7C15ull);
  const std::string packed = batch.SerializeAsString();
  EXPECT_LT(packed.size(), 80100u);
  WireCount count;
  ASSERT_TRUE(Count(packed, BatchLimits(1), &count).ok());
  EXPECT_EQ(count.parts, 2u);  // the record and its one packed run
  std::string unpacked_record;
  for (int i = 0; i < 10000; ++i) unpacked_record += std::string("\x81\x01", 2) + std::string(8, '\x07');
  std::string varint;  // the record's length, as a varint
  for (size_t n = unpacked_record.size(); ; n >>= 7) {
    varint += static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0));
    if (n < 0x80) break;
  }
  const std::string unpacked = "\x0a" + varint + unpacked_record;
  v1::RecordBatchRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(unpacked));
  EXPECT_EQ(parsed.records(0).prefix_block_ids_size(), 10000);
  ASSERT_TRUE(Count(unpacked, BatchLimits(1), &count).ok());
  EXPECT_GT(count.parts, BatchLimits(1).max_parts());  // refused before parsing
}

// 1.5 M empty records (3 MB): all counted, none opened, against a limit of 10,000.
TEST(WireBudgetTest, EntriesPastTheLimitAreCountedWithoutBeingOpened) {
  WireCount count;
  ASSERT_TRUE(Count(Repeat(std::string("\x0a\x00", 2), 1500000), BatchLimits(10000), &count).ok());
  EXPECT_EQ(count.entries, 1500000u);
  EXPECT_EQ(count.parts, 10000u);  // only the records within the limit were looked into
}

// Unknown fields are parts (protobuf keeps each); the count stops once the limit is passed.
TEST(WireBudgetTest, UnknownFieldsArePartsAndStopTheScan) {
  WireLimits limits;
  limits.type = v1::Record::descriptor();
  limits.max_entries = 1;
  ASSERT_EQ(limits.max_parts(), kPartsPerEntry + kPartsAllowance);
  const std::string unknown("\xc0\x3e\x01", 3);  // field 1000, varint 1
  WireCount count;
  ASSERT_TRUE(Count(Repeat(unknown, limits.max_parts()), limits, &count).ok());
  EXPECT_EQ(count.parts, limits.max_parts());  // exactly at the limit: admitted
  ASSERT_TRUE(Count(Repeat(unknown, 1000000), limits, &count).ok());
  EXPECT_EQ(count.parts, limits.max_parts() + 1);  // one past it, and no further
  EXPECT_THAT(TooManyPartsMessage(limits), HasSubstr("more than 1048 nested messages and unknown fields"));
}

// An Advise request's candidates are its entries.
TEST(WireBudgetTest, CandidatesAreTheEntriesOfAnAdviceRequest) {
  v1::AdviceRequest request;
  request.set_model("llama-3.1-8b");
  for (int i = 0; i < 20; ++i) request.add_candidates()->set_logical_match_tokens(100);
  WireLimits limits;
  limits.type = v1::AdviceRequest::descriptor();
  limits.entry_fields[0] = v1::AdviceRequest::kCandidatesFieldNumber;
  limits.max_entries = 16;
  WireCount count;
  ASSERT_TRUE(Count(request.SerializeAsString(), limits, &count).ok());
  EXPECT_EQ(count.entries, 20u);
  EXPECT_EQ(count.parts, 16u);
}

// Bytes that are not a message: a truncated nested length, a zero tag, a length past the end.
TEST(WireBudgetTest, MalformedBytesAreRefused) {
  WireCount count;
  for (const std::string& bad : {std::string("\x0a\x05\x08", 3), std::string("\x00\x01", 2),
                                 std::string("\x0a", 1), std::string("\x0a\x02\x5a\x05", 4)}) {
    const absl::Status status = Count(bad, BatchLimits(10), &count);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << testing::PrintToString(bad);
    EXPECT_THAT(status.message(), HasSubstr("does not parse as kvledger.v1.RecordBatchRequest"));
  }
}

// A message no larger than the parts limit cannot carry too many parts: only its entries are
// counted, and its parts are bounded by its size.
TEST(WireBudgetTest, SmallMessagesCountOnlyTheirEntries) {
  v1::RecordBatchRequest batch;
  for (int i = 0; i < 3; ++i) batch.add_records()->add_state_boundaries()->set_boundary_tokens(16);
  const std::string bytes = batch.SerializeAsString();
  google::protobuf::io::ArrayInputStream input(bytes.data(), static_cast<int>(bytes.size()));
  WireCount count;
  ASSERT_TRUE(CountWire(&input, bytes.size(), BatchLimits(10), &count).ok());
  EXPECT_EQ(count.entries, 3u);
  EXPECT_EQ(count.parts, bytes.size());
  // A large one is scanned whole: 1.5 M empty records (3 MB) against a limit of 10,000.
  const std::string large = Repeat(std::string("\x0a\x00", 2), 1500000);
  google::protobuf::io::ArrayInputStream large_input(large.data(), static_cast<int>(large.size()));
  ASSERT_TRUE(CountWire(&large_input, large.size(), BatchLimits(10000), &count).ok());
  EXPECT_EQ(count.entries, 1500000u);
  EXPECT_EQ(count.parts, 10000u);
}

// A group (wire types 3 and 4) is refused wherever it is: protobuf keeps every field inside one as
// an unknown field, and proto3 never sends one. At the top level of a batch, inside a record, and
// an end-group tag alone; in a message small enough for the shallow count too.
TEST(WireBudgetTest, GroupsAreRefused) {
  const std::string group_of_varints = "\x9b\x01" + Repeat("\x08\x01", 50) + "\x9c\x01";  // field 19 start/end
  for (const std::string& bytes : {group_of_varints, "\x0a" + std::string(1, static_cast<char>(group_of_varints.size())) +
                                                         group_of_varints,
                                   std::string("\x9c\x01")}) {
    WireCount count;
    const absl::Status s = Count(bytes, BatchLimits(10), &count);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("carries a group (wire type 3 or 4): proto3 never sends one"));
  }
  google::protobuf::io::ArrayInputStream small("\x9b\x01\x9c\x01", 4);
  WireCount count;
  EXPECT_THAT(CountWire(&small, 4, BatchLimits(10), &count).message(), HasSubstr("carries a group"));
}

}  // namespace
}  // namespace kvledger
