// `kvledger bench`: a closed-loop load generator. C connections (one gRPC channel and one thread
// each) send pre-built valid records for a fixed duration; latencies are measured per RPC (per
// batch Write in stream mode) and reported as percentiles.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <random>
#include <thread>

#include "absl/strings/str_format.h"
#include "client/commands.h"
#include "lib/base/quote.h"
#include "lib/cost_model/number_format.h"
#include "client/connection.h"
#include "client/flag_set.h"
#include "lib/wire/json_writer.h"
#include "lib/wire/call_metadata.h"
#include "grpcpp/grpcpp.h"
#include "kvledger/v1/ledger.grpc.pb.h"

namespace kvledger::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct WorkerResult {
  uint64_t records = 0;  // records the server accepted
  uint64_t rpcs = 0;
  uint64_t errors = 0;  // failed RPCs plus rejected records
  std::vector<double> latencies_ms;
  std::string first_error;
};

// Valid records with a realistic spread: several models and tiers, prompts of 256..32768 tokens,
// hits of 0..100 %. Seeded: the same seed gives the same load.
std::vector<v1::RecordBatchRequest> MakeBatches(uint64_t seed, size_t batch_size, size_t count) {
  static const char* const kModels[] = {"llama-3.1-8b", "qwen3-32b", "deepseek-v3", "gemma-3-12b",
                                        "gpt-oss-120b", "kimi-linear-48b-a3b", "qwen3-next-80b-a3b"};
  std::mt19937_64 rng(seed);
  std::vector<v1::RecordBatchRequest> batches(count);
  for (auto& batch : batches) {
    for (size_t i = 0; i < batch_size; ++i) {
      v1::Record* r = batch.add_records();
      r->set_model(kModels[rng() % std::size(kModels)]);
      const int64_t n = 256 + static_cast<int64_t>(rng() % 32513);
      const int64_t match = static_cast<int64_t>(rng() % (n + 1));
      r->set_prompt_tokens(n);
      r->set_logical_match_tokens(match);
      r->set_tier(match == 0 ? v1::TIER_UNSPECIFIED : static_cast<v1::Tier>(1 + rng() % 4));
      r->set_reload_seconds(static_cast<double>(rng() % 50000) / 1e6);
      r->set_suffix_prefill_seconds(static_cast<double>(rng() % 2000000) / 1e6);
      r->set_ttft_seconds(r->reload_seconds() + r->suffix_prefill_seconds() + 0.005);
    }
  }
  return batches;
}

void CountReply(const grpc::Status& status, const v1::RecordBatchResponse* reply, WorkerResult& out) {
  if (!status.ok()) {
    ++out.errors;
    if (out.first_error.empty()) out.first_error = status.error_message();
    return;
  }
  if (reply != nullptr) {
    out.records += reply->accepted();
    out.errors += reply->rejected();
  } else {
    ++out.records;
  }
}

// Without `real`, every call is marked synthetic (kSyntheticMetadata): the target answers as usual
// and its figures do not move.
void RunWorker(const Connection& connection, const std::string& mode, size_t batch_size, uint64_t seed, bool real,
               Clock::time_point end, WorkerResult& out) {
  auto stub = connection.Stub(/*own_connection=*/true);
  const auto batches = MakeBatches(seed, batch_size, 16);
  size_t next = 0;
  auto timed = [&](auto&& call) {
    const auto start = Clock::now();
    call();
    out.latencies_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    ++out.rpcs;
  };
  if (mode == "stream") {
    grpc::ClientContext context;
    if (!real) context.AddMetadata(kSyntheticMetadata, "1");
    v1::RecordBatchResponse reply;
    auto writer = stub->StreamRecords(&context, &reply);
    bool open = true;
    while (open && Clock::now() < end) {
      timed([&] { open = writer->Write(batches[next++ % batches.size()]); });
    }
    if (open) writer->WritesDone();
    CountReply(writer->Finish(), &reply, out);
    return;
  }
  while (Clock::now() < end) {
    const auto& batch = batches[next++ % batches.size()];
    grpc::ClientContext context;
    connection.SetDeadline(context);
    if (!real) context.AddMetadata(kSyntheticMetadata, "1");
    if (mode == "unary") {
      v1::RecordResponse reply;
      timed([&] { CountReply(stub->Record(&context, batch.records(0), &reply), nullptr, out); });
    } else {
      v1::RecordBatchResponse reply;
      timed([&] { CountReply(stub->RecordBatch(&context, batch, &reply), &reply, out); });
    }
  }
}

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  return sorted[static_cast<size_t>(q * static_cast<double>(sorted.size() - 1))];
}

}  // namespace

namespace {

// The workers' results as one: counts summed, latencies merged and sorted.
WorkerResult Merge(std::vector<WorkerResult>& results) {
  WorkerResult total;
  for (auto& r : results) {
    total.records += r.records;
    total.rpcs += r.rpcs;
    total.errors += r.errors;
    total.latencies_ms.insert(total.latencies_ms.end(), r.latencies_ms.begin(), r.latencies_ms.end());
    if (total.first_error.empty()) total.first_error = r.first_error;
  }
  std::sort(total.latencies_ms.begin(), total.latencies_ms.end());
  return total;
}

void PrintBench(const WorkerResult& total, double elapsed, bool json, const std::string& mode, size_t threads,
                size_t per_message, const std::string& target) {
  const double p50 = Percentile(total.latencies_ms, 0.5), p99 = Percentile(total.latencies_ms, 0.99),
               p999 = Percentile(total.latencies_ms, 0.999);
  if (json) {
    JsonObject o;
    o.Number("records_per_second", static_cast<double>(total.records) / elapsed)
        .Number("rpcs_per_second", static_cast<double>(total.rpcs) / elapsed)
        .Number("p50_ms", p50)
        .Number("p99_ms", p99)
        .Number("p999_ms", p999)
        .Integer("errors", total.errors)
        .Integer("records", total.records)
        .Number("duration_seconds", elapsed);
    std::cout << o.str() << "\n";
    return;
  }
  std::cout << absl::StrFormat("%s x%d connections, %d records/message, %.1f s against %s\n", mode, threads,
                               per_message, elapsed, target);
  std::cout << absl::StrFormat("  records/s %.0f   rpcs/s %.0f   errors %d\n", total.records / elapsed,
                               total.rpcs / elapsed, total.errors);
  std::cout << absl::StrFormat("  latency ms  p50 %.3f  p99 %.3f  p99.9 %.3f\n", p50, p99, p999);
}

}  // namespace

int Bench(const Args& args) {
  Connection connection;
  std::string mode = "batch";
  std::optional<uint64_t> batch_size, connections, seed;
  std::optional<double> duration;
  bool json = false, real = false;
  FlagSet flags("bench",
                "Closed-loop load generator: C connections send valid records for a fixed time.\n"
                "Compare kvledger-server with kvledger-noop-server (same API, no accounting).");
  connection.Register(flags);
  flags.String("mode", &mode, "unary | batch | stream (default batch)");
  flags.Uint64("batch-size", &batch_size, "records per RecordBatch or stream message (default 100)");
  flags.Uint64("connections", &connections, "connections, one thread each (default 4)");
  flags.Double("duration", &duration, "seconds to run (default 10)");
  flags.Uint64("seed", &seed, "record generator seed (default 1)");
  flags.Switch("json", &json, "print one JSON object");
  flags.Switch("real", &real,
               "count the records in the target's figures (default: marked synthetic, counted only in "
               "kvledger_synthetic_records_total)");
  if (int code = ParseOrExit(flags, args, "bench"); code >= 0) return code;
  const size_t per_message = mode == "unary" ? 1 : batch_size.value_or(100);
  const size_t threads = connections.value_or(4);
  const double seconds = duration.value_or(10);
  std::string problem;
  if (mode != "unary" && mode != "batch" && mode != "stream") {
    problem = absl::StrCat("--mode = ", Quoted(mode), ": must be unary, batch or stream");
  } else if (per_message < 1 || per_message > 10000) {
    problem = absl::StrCat("--batch-size = ", per_message, ": must be in [1, 10000]");
  } else if (threads < 1 || threads > 256) {
    problem = absl::StrCat("--connections = ", threads, ": must be in [1, 256]");
  } else if (!(seconds > 0 && seconds <= 3600)) {
    problem = absl::StrCat("--duration = ", FormatDouble(seconds), ": must be in (0, 3600]");
  }
  if (!problem.empty()) {
    std::cerr << "kvledger bench: " << problem << "\n";
    return kExitBadInput;
  }
  std::vector<WorkerResult> results(threads);
  std::vector<std::thread> workers;
  const auto start = Clock::now();
  const auto end = start + std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
  for (size_t i = 0; i < threads; ++i) {
    workers.emplace_back(RunWorker, std::cref(connection), std::cref(mode), per_message,
                         seed.value_or(1) * 1000 + i, real, end, std::ref(results[i]));
  }
  for (auto& w : workers) w.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const WorkerResult total = Merge(results);
  PrintBench(total, elapsed, json, mode, threads, per_message, connection.target);
  if (!total.first_error.empty()) std::cerr << "kvledger bench: first error: " << total.first_error << "\n";
  return total.errors == 0 ? kExitOk : kExitFailed;
}

}  // namespace kvledger::cli
