// kvledger::Reporter over real gRPC to in-process kvledger servers on 127.0.0.1: exactly-once
// delivery across a server restart, rejected records, a lost reply retried against the server's
// batch-id deduplication, and Report() staying fast while the server is down or stalled.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/reporter.h"
#include "gtest/gtest.h"
#include "server/kvledger_server.h"

namespace kvledger {
namespace {

v1::Record HalfHit(int64_t n = 4096) {
  v1::Record r;
  r.set_model("llama-3.1-8b");
  r.set_tier(v1::TIER_HOST);
  r.set_prompt_tokens(n);
  r.set_logical_match_tokens(n / 2);
  r.set_suffix_prefill_seconds(0.2);
  return r;
}

std::unique_ptr<KvledgerServer> StartServer(const std::string& grpc_address = "127.0.0.1:0",
                                            uint32_t max_receive_message_bytes = ServerOptions().max_receive_message_bytes) {
  ServerOptions options;
  options.max_receive_message_bytes = max_receive_message_bytes;
  options.shutdown_drain_seconds = 0;  // tests stop at once
  options.shutdown_scrape_grace_seconds = 0;
  options.grpc_address = grpc_address;
  options.metrics_address = "127.0.0.1:0";
  auto server = KvledgerServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

ReporterOptions Options(const std::string& target) {
  ReporterOptions o;
  o.target = target;
  o.flush_interval = absl::Milliseconds(20);
  o.initial_backoff = absl::Milliseconds(20);
  o.max_backoff = absl::Milliseconds(200);
  o.rpc_timeout = absl::Seconds(2);
  return o;
}

// p99 and max of `calls` Report() calls, in microseconds.
std::pair<double, double> ReportLatency(Reporter& reporter, int calls) {
  std::vector<double> micros;
  micros.reserve(calls);
  const v1::Record r = HalfHit();
  for (int i = 0; i < calls; ++i) {
    const auto start = std::chrono::steady_clock::now();
    reporter.Report(r);
    micros.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(micros.begin(), micros.end());
  return {micros[micros.size() * 99 / 100], micros.back()};
}

// Proves: everything reported before a successful flush is counted exactly once across a server
// restart in the middle (the second server binds the first one's port), with retries in between.
TEST(ReporterTest, ExactlyOnceAcrossRestart) {
  auto first = StartServer();
  ASSERT_NE(first, nullptr);
  const std::string address = first->grpc_address();
  Reporter reporter(Options(address));
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(reporter.Report(HalfHit()));
  ASSERT_TRUE(reporter.Flush(absl::Seconds(30)));
  first->Shutdown();
  EXPECT_EQ(first->accepted_records(), 1000u);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(reporter.Report(HalfHit()));  // server down: queued
  EXPECT_FALSE(reporter.Flush(absl::Milliseconds(300)));
  auto second = StartServer(address);
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(reporter.Flush(absl::Seconds(30)));
  EXPECT_EQ(second->accepted_records(), 1000u);
  const ReporterStats s = reporter.stats();
  EXPECT_EQ(s.sent, 2000u);
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_GT(s.retried, 0u);
}

// Proves: records the server rejects are counted as rejected, the rest as sent.
TEST(ReporterTest, RejectedRecordsAreCounted) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  Reporter reporter(Options(server->grpc_address()));
  v1::Record bad = HalfHit();
  bad.set_logical_match_tokens(5000);
  ASSERT_TRUE(reporter.Report(bad));
  ASSERT_TRUE(reporter.Report(HalfHit()));
  ASSERT_TRUE(reporter.Flush(absl::Seconds(30)));
  EXPECT_EQ(reporter.stats().rejected, 1u);
  EXPECT_EQ(reporter.stats().sent, 1u);
  EXPECT_EQ(server->accepted_records(), 1u);
}

// A record with `ids` prefix block ids (8 bytes each on the wire).
v1::Record WithIds(int ids) {
  v1::Record r = HalfHit(int64_t{16} * ids);
  r.set_block_tokens(16);
  for (int id = 1; id <= ids; ++id) r.add_prefix_block_ids(static_cast<uint64_t>(id));
  return r;
}

// Proves: a record too large for any message is refused at Report() (rejected, too_large), never
// queued, and the small records around it all arrive.
TEST(ReporterTest, APoisonRecordNeverBlocksTheOthers) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  Reporter reporter(Options(server->grpc_address()));
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(reporter.Report(HalfHit()));
  EXPECT_FALSE(reporter.Report(WithIds(600000)));  // 4.8 MB
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(reporter.Report(HalfHit()));
  ASSERT_TRUE(reporter.Flush(absl::Seconds(30)));
  const ReporterStats s = reporter.stats();
  EXPECT_EQ(s.sent, 1000u);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.too_large, 1u);
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_EQ(server->accepted_records(), 1000u);
}

// Proves: against a server whose receive limit is below the Reporter's, a batch refused for its
// size is split until its records fit, and a record that alone does not fit is rejected — never a
// batch retried whole forever.
TEST(ReporterTest, ABatchTooLargeForTheServerIsSplit) {
  auto server = StartServer("127.0.0.1:0", 64 << 10);
  ASSERT_NE(server, nullptr);
  ReporterOptions options = Options(server->grpc_address());
  options.flush_interval = absl::Seconds(60);  // one batch, sent by Flush
  Reporter reporter(options);
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(reporter.Report(WithIds(1000)));  // 8 kB each, 320 kB in all
  ASSERT_TRUE(reporter.Report(WithIds(20000)));  // 160 kB: past the server's limit alone
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(reporter.Report(WithIds(1000)));
  ASSERT_TRUE(reporter.Flush(absl::Seconds(30)));
  const ReporterStats s = reporter.stats();
  EXPECT_EQ(s.sent, 80u);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.too_large, 1u);
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_EQ(server->accepted_records(), 80u);
}

// The real server behind a transport that answers the first attempt of every batch with `answer`
// after the server applied it: UNAVAILABLE as a connection cut between apply and reply would, or
// CANCELLED as a replica whose gRPC server shuts down under the call (its worst case).
class ReplacingFirstReply final : public BatchTransport {
 public:
  ReplacingFirstReply(std::unique_ptr<BatchTransport> real, grpc::Status answer)
      : real_(std::move(real)), answer_(std::move(answer)) {}
  grpc::Status Send(const v1::RecordBatchRequest& batch, absl::Time deadline,
                    v1::RecordBatchResponse* response) override {
    grpc::Status status = real_->Send(batch, deadline, response);
    if (status.ok() && batch.batch_id() != last_replaced_) {
      last_replaced_ = batch.batch_id();
      return answer_;
    }
    return status;
  }
  void Cancel() override { real_->Cancel(); }

 private:
  std::unique_ptr<BatchTransport> real_;
  const grpc::Status answer_;
  std::string last_replaced_;
};

std::unique_ptr<BatchTransport> LosingFirstReply(const ReporterOptions& options) {
  return std::make_unique<ReplacingFirstReply>(
      MakeGrpcTransport(options),
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection cut after the server applied the batch"));
}

// Proves: a batch answered CANCELLED is retried with its batch id, never dropped, counted once.
TEST(ReporterTest, CancelledIsRetriedAndCountedOnce) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const ReporterOptions options = Options(server->grpc_address());
  const grpc::Status cancelled(grpc::StatusCode::CANCELLED, "CANCELLED");
  Reporter reporter(options, std::make_unique<ReplacingFirstReply>(MakeGrpcTransport(options), cancelled));
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(reporter.Report(HalfHit()));
  ASSERT_TRUE(reporter.Flush(absl::Seconds(30)));
  const ReporterStats s = reporter.stats();
  EXPECT_EQ(s.sent, 300u);
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_GT(s.retried, 0u);
  EXPECT_EQ(server->accepted_records(), 300u);
}

// Proves: a batch whose reply was lost is retried with its batch id and counted once by the server.
TEST(ReporterTest, LostReplyIsNotCountedTwice) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const ReporterOptions options = Options(server->grpc_address());
  Reporter reporter(options, LosingFirstReply(options));
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(reporter.Report(HalfHit()));
  ASSERT_TRUE(reporter.Flush(absl::Seconds(30)));
  EXPECT_EQ(server->accepted_records(), 300u);
  EXPECT_EQ(reporter.stats().sent, 300u);
  EXPECT_GT(reporter.stats().retried, 0u);
}

// Three replicas behind one target ("ipv4:" list, as a resolved name gives).
struct Fleet {
  std::vector<std::unique_ptr<KvledgerServer>> servers;
  std::string target = "ipv4:";
  Fleet() {
    for (int i = 0; i < 3; ++i) {
      servers.push_back(StartServer());
      absl::StrAppend(&target, i ? "," : "", servers.back()->grpc_address());
    }
  }
  std::vector<uint64_t> Counted() const {
    std::vector<uint64_t> counts;
    for (const auto& s : servers) counts.push_back(s->accepted_records());
    return counts;
  }
};

uint64_t Sum(const std::vector<uint64_t>& v) {
  uint64_t total = 0;
  for (uint64_t x : v) total += x;
  return total;
}

// Proves: with an affinity key every batch goes to one replica, and a second Reporter with the same
// key picks the same one (rendezvous hashing over the addresses; without a key batches spread, as
// LostReplyRetriedOnTheSameReplica shows).
TEST(ReporterTest, AffinityKeyPinsOneReplica) {
  Fleet fleet;
  std::vector<uint64_t> before = fleet.Counted();
  for (int reporter_number = 0; reporter_number < 2; ++reporter_number) {
    ReporterOptions options = Options(fleet.target);
    options.max_batch_size = 10;
    options.affinity_key = "engine-7";
    Reporter reporter(options);
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(reporter.Report(HalfHit()));
      if (i % 10 == 9) {
        ASSERT_TRUE(reporter.Flush(absl::Seconds(30)));
      }
    }
  }
  std::vector<uint64_t> counted = fleet.Counted();
  size_t replicas_used = 0;
  for (size_t i = 0; i < counted.size(); ++i) {
    if (counted[i] != before[i]) {
      ++replicas_used;
      EXPECT_EQ(counted[i] - before[i], 200u);
    }
  }
  EXPECT_EQ(replicas_used, 1u);
}

// Proves: through a target of three replicas, a batch whose reply was lost is retried on the replica
// that applied it, so it is counted once in the fleet; new batches still spread over every replica.
TEST(ReporterTest, LostReplyRetriedOnTheSameReplica) {
  Fleet fleet;
  ReporterOptions options = Options(fleet.target);
  options.max_batch_size = 10;
  Reporter reporter(options, LosingFirstReply(options));
  for (int i = 0; i < 600; ++i) {
    ASSERT_TRUE(reporter.Report(HalfHit()));
    if (i % 10 == 9) {
      ASSERT_TRUE(reporter.Flush(absl::Seconds(30)));  // one batch at a time
    }
  }
  const std::vector<uint64_t> counted = fleet.Counted();
  EXPECT_EQ(Sum(counted), 600u) << counted[0] << " " << counted[1] << " " << counted[2];
  for (uint64_t c : counted) EXPECT_GT(c, 0u);
  EXPECT_EQ(reporter.stats().sent, 600u);
  EXPECT_GE(reporter.stats().retried, 60u);
}

// Proves: a replica that stops leaves the rotation; what it acknowledged stays counted there and
// nothing else is lost or counted twice.
TEST(ReporterTest, ReplicaThatLeavesIsSkipped) {
  Fleet fleet;
  ReporterOptions options = Options(fleet.target);
  options.max_batch_size = 10;
  Reporter reporter(options);
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(reporter.Report(HalfHit()));
  ASSERT_TRUE(reporter.Flush(absl::Seconds(30)));
  const uint64_t before_stop = fleet.servers[1]->accepted_records();
  fleet.servers[1]->Shutdown(/*patient=*/false);
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(reporter.Report(HalfHit()));
  ASSERT_TRUE(reporter.Flush(absl::Seconds(30)));
  EXPECT_EQ(fleet.servers[0]->accepted_records() + before_stop + fleet.servers[2]->accepted_records(), 600u);
  EXPECT_EQ(reporter.stats().sent, 600u);
}

// A loopback port this test holds: bound only (connections are refused) or also listening (the
// kernel completes handshakes; nobody ever answers). Returns the socket and "127.0.0.1:PORT".
std::pair<int, std::string> HoldLoopbackPort(bool listening) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  if (listening) {
    EXPECT_EQ(listen(fd, 16), 0);
  }
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return {fd, "127.0.0.1:" + std::to_string(ntohs(addr.sin_port))};
}

// Proves: a frozen replica (its port accepts connections, nothing ever answers) costs one batch a
// short wait: that batch moves after retry_same_replica_for, and new batches skip the replica, so
// every record is counted once by the two live replicas with a handful of retries.
TEST(ReporterTest, FrozenReplicaIsSkipped) {
  auto a = StartServer();
  auto c = StartServer();
  const auto [holder, frozen] = HoldLoopbackPort(/*listening=*/true);
  ReporterOptions options = Options(absl::StrCat("ipv4:", a->grpc_address(), ",", frozen, ",", c->grpc_address()));
  options.max_batch_size = 10;
  options.rpc_timeout = absl::Milliseconds(500);
  options.retry_same_replica_for = absl::Seconds(1);
  Reporter reporter(options);
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(reporter.Report(HalfHit()));
    if (i % 10 == 9) {
      ASSERT_TRUE(reporter.Flush(absl::Seconds(30)));
    }
  }
  EXPECT_EQ(a->accepted_records() + c->accepted_records(), 200u);
  EXPECT_EQ(reporter.stats().sent, 200u);
  EXPECT_LE(reporter.stats().retried, 6u);
  close(holder);
}

// Proves: with nothing listening, Report() stays fast (a generous bound: the real figures are in
// docs/performance.md) and shutdown returns promptly, counting every record as dropped.
TEST(ReporterTest, ServerDownReportStaysFast) {
  const auto [holder, target] = HoldLoopbackPort(/*listening=*/false);
  Reporter reporter(Options(target));
  const auto [p99, max] = ReportLatency(reporter, 20000);
  EXPECT_LT(p99, 1000.0);
  EXPECT_LT(max, 1000000.0);  // one scheduling hiccup on a busy 2-core machine is not a failure
  const absl::Time start = absl::Now();
  const ReporterStats s = reporter.Shutdown(absl::Milliseconds(300));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(s.sent, 0u);
  EXPECT_EQ(s.dropped, s.reported);
  close(holder);
}

// Proves: against a server that accepts the connection and never answers, Report() stays fast and
// shutdown cancels the stuck call by its deadline.
TEST(ReporterTest, StalledServerReportStaysFast) {
  const auto [listener, target] = HoldLoopbackPort(/*listening=*/true);
  ReporterOptions options = Options(target);
  options.rpc_timeout = absl::Seconds(30);
  Reporter reporter(options);
  const auto [p99, max] = ReportLatency(reporter, 20000);
  EXPECT_LT(p99, 1000.0);
  EXPECT_LT(max, 1000000.0);  // one scheduling hiccup on a busy 2-core machine is not a failure
  const absl::Time start = absl::Now();
  const ReporterStats s = reporter.Shutdown(absl::Milliseconds(300));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(s.dropped, s.reported);
  close(listener);
}

}  // namespace
}  // namespace kvledger
