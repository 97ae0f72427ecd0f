// The Ledger service over a real gRPC channel to an in-process server bound to 127.0.0.1:0.
#include "server/ledger_service.h"

#include "tests/testing/records.h"

#include <atomic>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "lib/accounting/record_sink.h"
#include "lib/profiles/model_registry.h"
#include "lib/profiles/profile_catalog.h"
#include "gtest/gtest.h"
#include "kvledger/v1/ledger.grpc.pb.h"
#include "server/kvledger_server.h"

namespace kvledger {
namespace {

using ::testing::HasSubstr;

v1::Record HalfHit(const char* model = "llama-3.1-8b") { return testing::HitRecord(model, 4096, 2048); }

// Each test owns its server (starting and stopping one takes milliseconds), so no test sees
// another's counters.
class LedgerServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.shutdown_drain_seconds = 0;  // tests stop at once
    options.shutdown_scrape_grace_seconds = 0;
    options.grpc_address = "127.0.0.1:0";
    options.metrics_address = "127.0.0.1:0";
    auto server = KvledgerServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::Ledger::NewStub(grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials()));
  }
  std::unique_ptr<KvledgerServer> server_;
  std::unique_ptr<v1::Ledger::Stub> stub_;
};

// Port 0 was replaced by the real bound ports.
TEST_F(LedgerServiceTest, BoundPortsAreReported) {
  EXPECT_THAT(server_->grpc_address(), ::testing::StartsWith("127.0.0.1:"));
  EXPECT_NE(server_->grpc_address(), "127.0.0.1:0");
  EXPECT_NE(server_->metrics_address(), "127.0.0.1:0");
}

// A valid record is OK; a bad one is INVALID_ARGUMENT naming field, value and rule.
TEST_F(LedgerServiceTest, RecordValidatesOnTheWire) {
  grpc::ClientContext ok_context;
  v1::RecordResponse response;
  EXPECT_TRUE(stub_->Record(&ok_context, HalfHit(), &response).ok());

  v1::Record bad = HalfHit();
  bad.set_logical_match_tokens(5000);
  grpc::ClientContext bad_context;
  const grpc::Status status = stub_->Record(&bad_context, bad, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "logical_match_tokens = 5000: must be in [0, prompt_tokens = 4096]");

  v1::Record unknown = HalfHit("llama-4-1t");
  grpc::ClientContext unknown_context;
  const grpc::Status unknown_status = stub_->Record(&unknown_context, unknown, &response);
  EXPECT_EQ(unknown_status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(unknown_status.error_message(), HasSubstr("known profiles: deepseek-v3, gemma-2-9b"));
}

// A retried batch (same batch_id) gets the original outcome and is not counted again; an oversized
// batch_id refuses the whole batch.
TEST_F(LedgerServiceTest, RetriedBatchIsCountedOnce) {
  v1::RecordBatchRequest batch;
  *batch.add_records() = HalfHit();
  *batch.add_records() = HalfHit();
  batch.mutable_records(1)->set_prompt_tokens(0);
  batch.set_batch_id("retry-test-0001");
  const uint64_t before = server_->accepted_records();  // 0: the test owns the server
  ASSERT_EQ(before, 0u);
  v1::RecordBatchResponse first, second;
  grpc::ClientContext c1, c2;
  ASSERT_TRUE(stub_->RecordBatch(&c1, batch, &first).ok());
  ASSERT_TRUE(stub_->RecordBatch(&c2, batch, &second).ok());
  EXPECT_EQ(server_->accepted_records(), before + 1);
  EXPECT_EQ(second.SerializeAsString(), first.SerializeAsString());
  EXPECT_EQ(second.accepted(), 1u);
  EXPECT_EQ(second.rejected(), 1u);

  batch.set_batch_id(std::string(129, 'x'));
  v1::RecordBatchResponse refused;
  grpc::ClientContext c3;
  const grpc::Status status = stub_->RecordBatch(&c3, batch, &refused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "batch_id (129 bytes): must be at most 128 bytes; nothing of the batch was counted");
  EXPECT_EQ(server_->accepted_records(), before + 1);
}

// In a batch, bad records are rejected by index and reason while the good ones count.
TEST_F(LedgerServiceTest, BatchRejectsByIndex) {
  v1::RecordBatchRequest batch;
  *batch.add_records() = HalfHit();
  auto* nan = batch.add_records();
  *nan = HalfHit();
  nan->set_ttft_seconds(std::nan(""));
  *batch.add_records() = HalfHit("qwen3-8b");
  auto* unspecified = batch.add_records();
  *unspecified = HalfHit();
  unspecified->set_tier(v1::TIER_UNSPECIFIED);
  grpc::ClientContext context;
  v1::RecordBatchResponse response;
  ASSERT_TRUE(stub_->RecordBatch(&context, batch, &response).ok());
  EXPECT_EQ(response.accepted(), 2u);
  EXPECT_EQ(response.rejected(), 2u);
  ASSERT_EQ(response.rejections_size(), 2);
  EXPECT_EQ(response.rejections(0).index(), 1u);
  EXPECT_EQ(response.rejections(0).reason(), "invalid_ttft_seconds");
  EXPECT_EQ(response.rejections(0).message(), "ttft_seconds = nan: must be finite, >= 0 and <= 86400 seconds");
  EXPECT_EQ(response.rejections(1).index(), 3u);
  EXPECT_EQ(response.rejections(1).reason(), "invalid_tier");
}

// 40 records of 256 block ids each, the 8th invalid: more than --bulk_call_bytes.
v1::RecordBatchRequest LargeBatch() {
  v1::RecordBatchRequest batch;
  for (int r = 0; r < 40; ++r) {
    v1::Record* record = batch.add_records();
    *record = HalfHit();
    record->set_block_tokens(16);
    record->set_cache_id("engine-0");
    for (uint64_t b = 0; b < 256; ++b) record->add_prefix_block_ids((static_cast<uint64_t>(r + 1) << 56) + b);
  }
  batch.mutable_records(7)->set_ttft_seconds(-1);
  return batch;
}

// kvledger_bulk_lane_calls_total{outcome="queued"}.
double LaneQueued(KvledgerServer& server) {
  for (const prometheus::MetricFamily& family : server.metrics().registry().Collect()) {
    if (family.name != "kvledger_bulk_lane_calls_total") continue;
    for (const prometheus::ClientMetric& m : family.metric) {
      if (m.label.at(0).value == "queued") return m.counter.value;
    }
  }
  return -1;
}

// A batch of --bulk_call_bytes or more (records with block ids) is applied on the bulk lane and
// answered when applied: its outcome, rejections by index, is the same as where it arrived, and
// the records count once.
TEST_F(LedgerServiceTest, LargeBatchIsAnsweredFromTheBulkLane) {
  const v1::RecordBatchRequest batch = LargeBatch();
  ASSERT_GE(batch.ByteSizeLong(), ServerOptions().bulk_call_bytes);
  const uint64_t before = server_->accepted_records();
  grpc::ClientContext context;
  v1::RecordBatchResponse response;
  ASSERT_TRUE(stub_->RecordBatch(&context, batch, &response).ok());
  EXPECT_EQ(response.accepted(), 39u);
  ASSERT_EQ(response.rejections_size(), 1);
  EXPECT_EQ(response.rejections(0).index(), 7u);
  EXPECT_EQ(server_->accepted_records(), before + 39);
  EXPECT_EQ(LaneQueued(*server_), 1);
}

// A stream's large batch waits on the bulk lane and the stream reads its next batch only once it is
// applied: the summary counts both in order, rejection indices across the stream.
TEST_F(LedgerServiceTest, StreamBatchOnTheBulkLaneKeepsItsOrder) {
  grpc::ClientContext context;
  v1::RecordBatchResponse response;
  auto writer = stub_->StreamRecords(&context, &response);
  ASSERT_TRUE(writer->Write(LargeBatch()));
  v1::RecordBatchRequest small;
  *small.add_records() = HalfHit();
  *small.add_records() = HalfHit();
  small.mutable_records(1)->set_prompt_tokens(0);
  ASSERT_TRUE(writer->Write(small));
  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_EQ(response.accepted(), 40u);
  ASSERT_EQ(response.rejections_size(), 2);
  EXPECT_EQ(response.rejections(0).index(), 7u);
  EXPECT_EQ(response.rejections(1).index(), 41u);
  EXPECT_EQ(LaneQueued(*server_), 1);
}

// Counts the records it is handed.
class CountingSink : public RecordSink {
 public:
  Verdict Record(const RecordFacts&) override {
    ++records;
    return Verdict();
  }
  std::atomic<int> records{0};
};

// A stream ended (for shutdown) while its large batch waits on the bulk lane: the lane's task ends it
// with its summary and counts nothing of the batch, and the reactor outlives that task. The lane is
// held busy by a task of the test's, so the batch surely waits. (Under AddressSanitizer, not
// ThreadSanitizer: this machine's gRPC libraries are not instrumented, and their own threads then read
// as races.)
TEST(LedgerServiceLaneTest, StreamEndedWhileItsBatchWaitsOnTheLaneCountsNothingOfIt) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  ModelRegistry registry(catalog, 4, UnknownModelPolicy::kReject);
  CountingSink real, synthetic;
  LedgerServiceOptions options = LedgerServiceOptions::From(ServerOptions());
  ASSERT_GT(options.bulk_call_bytes, 0u);
  LedgerService service(RecordSinks{real, synthetic}, registry, options);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(port, 0);
  absl::Notification busy, release;
  ASSERT_TRUE(service.bulk_lane_for_tests()->Submit("test", 1, [&] {
    busy.Notify();
    release.WaitForNotification();
  }));
  busy.WaitForNotification();
  auto stub = v1::Ledger::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::RecordBatchResponse response;
  auto writer = stub->StreamRecords(&context, &response);
  ASSERT_TRUE(writer->Write(LargeBatch()));
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (service.bulk_lane_for_tests()->stats().queued < 2 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_EQ(service.bulk_lane_for_tests()->stats().queued, 2u);  // the test's task, then the batch
  service.EndOpenStreams();
  release.Notify();
  const grpc::Status status = writer->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.accepted(), 0u);
  EXPECT_EQ(real.records, 0);
  server->Shutdown();
}

// A stream of batches is summarized once, with rejection indices counted across the stream.
TEST_F(LedgerServiceTest, StreamSummarizesAcrossBatches) {
  grpc::ClientContext context;
  v1::RecordBatchResponse response;
  auto writer = stub_->StreamRecords(&context, &response);
  for (int b = 0; b < 3; ++b) {
    v1::RecordBatchRequest batch;
    for (int i = 0; i < 4; ++i) {
      v1::Record r = HalfHit();
      if (b == 2 && i == 1) r.set_prompt_tokens(0);
      *batch.add_records() = r;
    }
    ASSERT_TRUE(writer->Write(batch));
  }
  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_EQ(response.accepted(), 11u);
  EXPECT_EQ(response.rejected(), 1u);
  ASSERT_EQ(response.rejections_size(), 1);
  EXPECT_EQ(response.rejections(0).index(), 9u);
  EXPECT_EQ(response.rejections(0).reason(), "invalid_prompt_tokens");
}

// A stream's batches are deduplicated by batch_id like RecordBatch: a stream cut before its summary
// can be resent whole (in a new stream or as RecordBatch calls) and only the batches the server had
// not applied count; the summary reports a repeated batch by its original outcome.
TEST_F(LedgerServiceTest, StreamBatchesAreCountedOnce) {
  auto batch_of = [](const std::string& id, bool with_bad) {
    v1::RecordBatchRequest batch;
    batch.set_batch_id(id);
    *batch.add_records() = HalfHit();
    *batch.add_records() = HalfHit();
    if (with_bad) batch.mutable_records(1)->set_prompt_tokens(0);
    return batch;
  };
  const uint64_t before = server_->accepted_records();  // 0: the test owns the server
  ASSERT_EQ(before, 0u);
  v1::RecordBatchResponse applied;
  grpc::ClientContext c1;
  ASSERT_TRUE(stub_->RecordBatch(&c1, batch_of("stream-dedup-a", true), &applied).ok());
  ASSERT_EQ(server_->accepted_records(), before + 1);

  grpc::ClientContext c2;
  v1::RecordBatchResponse summary;
  auto writer = stub_->StreamRecords(&c2, &summary);
  ASSERT_TRUE(writer->Write(batch_of("stream-dedup-b", false)));  // new: counts 2
  ASSERT_TRUE(writer->Write(batch_of("stream-dedup-a", true)));   // applied before: counts nothing
  ASSERT_TRUE(writer->Write(batch_of("stream-dedup-b", false)));  // repeated in the stream: nothing
  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_EQ(server_->accepted_records(), before + 1 + 2);
  EXPECT_EQ(summary.accepted(), 2u + 1u + 2u);
  EXPECT_EQ(summary.rejected(), 1u);
  ASSERT_EQ(summary.rejections_size(), 1);
  EXPECT_EQ(summary.rejections(0).index(), 3u);  // record 1 of the stream's second batch
  EXPECT_EQ(summary.rejections(0).reason(), "invalid_prompt_tokens");

  // The batch applied in the stream is a repeat for RecordBatch too.
  v1::RecordBatchResponse repeat;
  grpc::ClientContext c3;
  ASSERT_TRUE(stub_->RecordBatch(&c3, batch_of("stream-dedup-b", false), &repeat).ok());
  EXPECT_EQ(repeat.accepted(), 2u);
  EXPECT_EQ(server_->accepted_records(), before + 3);

  // An oversized batch_id ends the stream, naming what its earlier batches counted.
  grpc::ClientContext c4;
  v1::RecordBatchResponse cut;
  auto bad_writer = stub_->StreamRecords(&c4, &cut);
  ASSERT_TRUE(bad_writer->Write(batch_of("stream-dedup-c", false)));
  bad_writer->Write(batch_of(std::string(129, 'x'), false));
  bad_writer->WritesDone();
  const grpc::Status status = bad_writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "batch_id (129 bytes): must be at most 128 bytes; nothing of the batch was counted (this batch; the "
            "stream's earlier batches were counted: 2 accepted, 0 rejected)");
  EXPECT_EQ(server_->accepted_records(), before + 5);
}

// A stream that sends nothing for --stream_idle_seconds ends with its summary: status OK and the
// counts of what it sent before.
TEST(StreamIdleTest, IdleStreamEndsWithItsSummary) {
  ServerOptions options;
  options.shutdown_drain_seconds = 0;
  options.shutdown_scrape_grace_seconds = 0;
  options.grpc_address = "127.0.0.1:0";
  options.metrics_address = "127.0.0.1:0";
  options.stream_idle_seconds = 1;
  auto server = KvledgerServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::Ledger::NewStub(grpc::CreateChannel((*server)->grpc_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::RecordBatchResponse summary;
  auto writer = stub->StreamRecords(&context, &summary);
  v1::RecordBatchRequest batch;
  *batch.add_records() = HalfHit();
  *batch.add_records() = HalfHit();
  ASSERT_TRUE(writer->Write(batch));
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status status = writer->Finish();  // no WritesDone: only the idle limit ends it
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(summary.accepted(), 2u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_EQ((*server)->accepted_records(), 2u);
}

// An empty batch is answered OK with nothing counted.
TEST_F(LedgerServiceTest, EmptyBatchCountsNothing) {
  grpc::ClientContext context;
  v1::RecordBatchResponse response;
  ASSERT_TRUE(stub_->RecordBatch(&context, v1::RecordBatchRequest(), &response).ok());
  EXPECT_EQ(response.accepted(), 0u);
  EXPECT_EQ(response.rejected(), 0u);
}

// An enum value this server does not know is rejected by name, not coerced.
TEST_F(LedgerServiceTest, UnknownTierValueIsRejected) {
  v1::Record r = HalfHit();
  r.set_tier(static_cast<v1::Tier>(7));
  grpc::ClientContext context;
  v1::RecordResponse response;
  const grpc::Status status = stub_->Record(&context, r, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), ::testing::StartsWith("tier = 7: must be one of TIER_DEVICE (1)"));
}

// A stream lists at most --max_listed_rejections (1000 by default) rejections; the counts stay exact.
TEST_F(LedgerServiceTest, StreamCapsRejectionDetails) {
  grpc::ClientContext context;
  v1::RecordBatchResponse response;
  auto writer = stub_->StreamRecords(&context, &response);
  v1::RecordBatchRequest batch;
  v1::Record bad = HalfHit();
  bad.set_reload_seconds(-1);
  for (int i = 0; i < 700; ++i) *batch.add_records() = bad;
  *batch.add_records() = HalfHit();
  ASSERT_TRUE(writer->Write(batch));
  ASSERT_TRUE(writer->Write(batch));
  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_EQ(response.accepted(), 2u);
  EXPECT_EQ(response.rejected(), 1400u);
  // A stream's answer lists at most 32 KiB of rejections (an idle stream holds its answer): the
  // first ones, in order; the counts stay exact.
  size_t bytes = 0;
  for (const auto& r : response.rejections()) bytes += r.SpaceUsedLong();
  EXPECT_LE(bytes, 40u << 10);  // the client's parsed copy: its strings' capacities differ a little
  ASSERT_GT(response.rejections_size(), 100);
  ASSERT_LT(response.rejections_size(), 1000);
  for (int i = 0; i < response.rejections_size(); ++i) {
    EXPECT_EQ(response.rejections(i).index(), i < 700 ? static_cast<uint64_t>(i) : static_cast<uint64_t>(i + 1));
  }
}

// A RecordBatch lists at most --max_listed_rejections rejections too, so every reply fits a default
// client's 4 MB limit; the counts stay exact.
TEST_F(LedgerServiceTest, BatchCapsRejectionDetails) {
  v1::RecordBatchRequest batch;
  v1::Record bad = HalfHit();
  bad.set_reload_seconds(-1);
  for (int i = 0; i < 5000; ++i) *batch.add_records() = bad;
  *batch.add_records() = HalfHit();
  grpc::ClientContext context;
  v1::RecordBatchResponse response;
  ASSERT_TRUE(stub_->RecordBatch(&context, batch, &response).ok());
  EXPECT_EQ(response.accepted(), 1u);
  EXPECT_EQ(response.rejected(), 5000u);
  ASSERT_EQ(response.rejections_size(), 1000);
  EXPECT_EQ(response.rejections(999).index(), 999u);
}

// A batch over --max_batch_records (10000 by default) is refused whole, naming the limit; in a
// stream, the earlier batches stay counted and the reply says how many.
TEST_F(LedgerServiceTest, OversizedBatchIsRefusedWhole) {
  v1::RecordBatchRequest batch;
  for (int i = 0; i < 10001; ++i) *batch.add_records() = HalfHit("qwen3-235b-a22b");
  const uint64_t before = server_->accepted_records();  // 0: the test owns the server
  ASSERT_EQ(before, 0u);
  grpc::ClientContext context;
  v1::RecordBatchResponse response;
  const grpc::Status status = stub_->RecordBatch(&context, batch, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "records: 10001 records in one batch: must be at most 10000 (--max_batch_records); nothing of the batch was counted");
  EXPECT_EQ(server_->accepted_records(), before);

  grpc::ClientContext stream_context;
  v1::RecordBatchResponse summary;
  auto writer = stub_->StreamRecords(&stream_context, &summary);
  v1::RecordBatchRequest small;
  *small.add_records() = HalfHit("qwen3-235b-a22b");
  ASSERT_TRUE(writer->Write(small));
  writer->Write(batch);
  writer->WritesDone();
  const grpc::Status stream_status = writer->Finish();
  EXPECT_EQ(stream_status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(stream_status.error_message(),
              HasSubstr("nothing of it was counted; the stream's earlier batches were (1 accepted, 0 rejected)"));
  EXPECT_EQ(server_->accepted_records(), before + 1);
}

// A message over --max_receive_message_bytes (4 MiB by default) is refused with RESOURCE_EXHAUSTED
// before it is parsed; nothing of it is counted.
TEST_F(LedgerServiceTest, OversizedMessageIsRefused) {
  v1::RecordBatchRequest batch;
  v1::Record big = HalfHit();
  big.set_request_id(std::string(200, 'r'));
  for (int i = 0; i < 20000; ++i) *batch.add_records() = big;  // ~5 MB
  const uint64_t before = server_->accepted_records();  // 0: the test owns the server
  ASSERT_EQ(before, 0u);
  grpc::ClientContext context;
  v1::RecordBatchResponse response;
  const grpc::Status status = stub_->RecordBatch(&context, batch, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(server_->accepted_records(), before);
}

// Explain returns the figures and errors like Record.
TEST_F(LedgerServiceTest, ExplainReturnsFigures) {
  grpc::ClientContext context;
  v1::DerivedFigures figures;
  ASSERT_TRUE(stub_->Explain(&context, HalfHit(), &figures).ok());
  EXPECT_EQ(figures.reused_tokens(), 2048);
  EXPECT_EQ(figures.attention_baseline_flops(), 4399120252928.0);
  EXPECT_EQ(figures.attention_avoided_reused_flops(), 1100048498688.0);
  EXPECT_EQ(figures.recoverable_source(), v1::BOUNDARY_SOURCE_MODEL);
  v1::Record bad = HalfHit();
  bad.set_model("has space");
  grpc::ClientContext bad_context;
  const grpc::Status status = stub_->Explain(&bad_context, bad, &figures);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("model = \"has space\""));
}

// A second server cannot silently share the first one's port.
TEST_F(LedgerServiceTest, PortIsNotShared) {
  ServerOptions options;
  options.shutdown_drain_seconds = 0;  // tests stop at once
  options.shutdown_scrape_grace_seconds = 0;
  options.grpc_address = server_->grpc_address();
  options.metrics_address = "127.0.0.1:0";
  auto second = KvledgerServer::Start(options);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

TEST(ServerOptionsTest, BadOptionsNameTheFlag) {
  ServerOptions options;
  options.shutdown_drain_seconds = 0;  // tests stop at once
  options.shutdown_scrape_grace_seconds = 0;
  options.grpc_address = "nohost";
  EXPECT_THAT(std::string(options.Validate().message()), HasSubstr("--grpc_address = \"nohost\""));
  options = ServerOptions();
  options.max_models = 0;
  EXPECT_THAT(std::string(options.Validate().message()), HasSubstr("--max_models = 0"));
  options = ServerOptions();
  options.tls_cert_file = "cert.pem";
  EXPECT_THAT(std::string(options.Validate().message()), HasSubstr("give both or neither"));
  options = ServerOptions();
  options.max_batch_records = 0;
  EXPECT_EQ(std::string(options.Validate().message()), "--max_batch_records = 0: must be in [1, 1000000]");
  options = ServerOptions();
  options.grpc_memory_quota_bytes = 1024;
  EXPECT_EQ(std::string(options.Validate().message()),
            "--grpc_memory_quota_bytes = 1024: must be in [16777216, 68719476736]");
  options = ServerOptions();
  options.batch_dedup_seconds = 0;
  EXPECT_EQ(std::string(options.Validate().message()), "--batch_dedup_seconds = 0: must be in [1, 86400]");
  options = ServerOptions();
  options.max_receive_message_bytes = 32u << 20;
  EXPECT_EQ(std::string(options.Validate().message()),
            "--bulk_lane_bytes = 67108864: must be at least 4 x --max_receive_message_bytes (134217728), so that a "
            "client's largest call fits its quarter of the lane");
  options.bulk_call_bytes = 0;  // no lane: no rule
  EXPECT_TRUE(options.Validate().ok());
}

}  // namespace
}  // namespace kvledger
