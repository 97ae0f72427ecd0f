// Report() latency of kvledger::Reporter against its floor, in one run: each call timed on its own,
// p50/p99/p99.9/max over 200,000 calls per producer thread, medians of 5 alternating repetitions.
//   baseline  copying the record into a preallocated Record (what any queue must do at least)
//   report    Reporter::Report() with the sender stuck in a call that never answers (the server is
//             stalled), so nothing is delivered and the queue only fills
// Prints one JSON object per case and thread count.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "client/reporter.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kCalls = 200000;
constexpr int kRepetitions = 5;

class StalledTransport final : public kvledger::BatchTransport {
 public:
  grpc::Status Send(const kvledger::v1::RecordBatchRequest&, absl::Time, kvledger::v1::RecordBatchResponse*) override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return cancelled_; });
    return grpc::Status(grpc::StatusCode::CANCELLED, "stalled");
  }
  void Cancel() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool cancelled_ = false;
};

kvledger::v1::Record Sample() {
  kvledger::v1::Record r;
  r.set_model("llama-3.1-8b");
  r.set_request_id("req-000000000001");
  r.set_tier(kvledger::v1::TIER_HOST);
  r.set_prompt_tokens(4096);
  r.set_logical_match_tokens(2048);
  r.set_reload_seconds(0.01);
  r.set_suffix_prefill_seconds(0.2);
  r.set_ttft_seconds(0.25);
  return r;
}

struct Quantiles {
  double p50, p99, p999, max;
};

// Runs `call` kCalls times on each of `threads` threads; quantiles of the per-call nanoseconds.
template <typename Call>
Quantiles Measure(int threads, Call call) {
  std::vector<std::vector<double>> per_thread(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      auto& ns = per_thread[t];
      ns.reserve(kCalls);
      for (int i = 0; i < kCalls; ++i) {
        const auto start = Clock::now();
        call(t);
        ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count());
      }
    });
  }
  for (auto& w : workers) w.join();
  std::vector<double> all;
  for (auto& v : per_thread) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  const size_t n = all.size();
  return {all[n / 2], all[n * 99 / 100], all[n * 999 / 1000], all.back()};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  const kvledger::v1::Record record = Sample();
  for (int threads : {1, 2}) {
    std::vector<double> base[4], report[4];
    for (int rep = 0; rep < kRepetitions; ++rep) {
      std::vector<kvledger::v1::Record> sinks(threads);
      const Quantiles b = Measure(threads, [&](int t) { sinks[t].CopyFrom(record); });
      kvledger::ReporterOptions options;
      options.max_queue_size = static_cast<size_t>(kCalls) * threads * 2;  // measure the enqueue, not drops
      options.flush_interval = absl::Milliseconds(1);
      kvledger::Reporter reporter(options, std::make_unique<StalledTransport>());
      const Quantiles r = Measure(threads, [&](int) { reporter.Report(record); });
      reporter.Shutdown(absl::ZeroDuration());
      for (auto [dst, q] : {std::pair{base, b}, std::pair{report, r}}) {
        dst[0].push_back(q.p50);
        dst[1].push_back(q.p99);
        dst[2].push_back(q.p999);
        dst[3].push_back(q.max);
      }
    }
    for (auto [name, q] : {std::pair{"baseline_copy", base}, std::pair{"report_stalled_server", report}}) {
      std::printf("{\"case\": \"%s\", \"threads\": %d, \"p50_ns\": %.0f, \"p99_ns\": %.0f, \"p999_ns\": %.0f, \"max_ns\": %.0f}\n",
                  name, threads, Median(q[0]), Median(q[1]), Median(q[2]), Median(q[3]));
    }
  }
  return 0;
}
