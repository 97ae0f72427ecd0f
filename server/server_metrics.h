// The server's own operational metrics (docs/operations.md, "The server's own metrics"), instrumented
// the way C++ services do it: a prometheus::Registry and prometheus-cpp's builders. Every family is
// registered at construction, so a bad name throws at start-up, never on a request.
//
// RPCs follow the conventions of gRPC's Prometheus interceptors (go-grpc-prometheus):
// grpc_server_started_total, grpc_server_handled_total (with grpc_code) and the histogram
// grpc_server_handling_seconds, labelled grpc_type, grpc_service, grpc_method; NewInterceptorFactory()
// feeds them from every call. The rest are kvledger_*: build info, process start time, streams open,
// deduplicated and oversized batches, scrape duration and size, the listener watchdog's queue.
//
// Thread-safe. The per-call cost is one hash lookup of the method under a mutex and prometheus-cpp's
// own atomic counter and locked histogram; per call, never per record.
#ifndef KVLEDGER_SERVER_SERVER_METRICS_H_
#define KVLEDGER_SERVER_SERVER_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "grpcpp/support/server_interceptor.h"
#include "grpcpp/support/status.h"
#include "server/batch_dedup.h"
#include "lib/base/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace kvledger {

enum class BulkOutcome { kQueued, kRefused, kInline };

// grpc_code label values: the names gRPC's other implementations print ("OK", "InvalidArgument", ...).
const char* GrpcCodeName(grpc::StatusCode code);

class ServerMetrics {
 public:
  // `version` is kvledger's; the git revision is the build's, gRPC's version is the library's.
  explicit ServerMetrics(const std::string& version);

  const prometheus::Registry& registry() const { return registry_; }

  // One per server (grpc::ServerBuilder takes ownership); its interceptors record every call.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewInterceptorFactory();

  // Per-call counters of one method, created on its first call.
  struct Method {
    prometheus::Counter* started = nullptr;
    prometheus::Histogram* seconds = nullptr;
    prometheus::Family<prometheus::Counter>* handled_family = nullptr;
    prometheus::Labels labels;  // grpc_type, grpc_service, grpc_method
    std::array<std::atomic<prometheus::Counter*>, 17> handled{};
    void Handled(grpc::StatusCode code, double seconds_taken);
  };
  Method& ForMethod(const char* full_method, grpc::experimental::ServerRpcInfo::Type type);

  void StreamOpened() { streams_open_.Increment(); }
  void StreamClosed() { streams_open_.Decrement(); }
  void BatchDeduplicated() { deduplicated_batches_.Increment(); }
  void BatchOversized(size_t records) {
    oversized_batches_.Increment();
    oversized_records_.Increment(static_cast<double>(records));
  }
  // A call or stream batch of --bulk_call_bytes or more went to the bulk lane, or did not fit it: a
  // unary call is refused, a stream batch applied where it arrived.
  void BulkCall(BulkOutcome outcome) {
    (outcome == BulkOutcome::kQueued ? bulk_queued_ : outcome == BulkOutcome::kRefused ? bulk_refused_ : bulk_inline_)
        .Increment();
  }
  // A load generator's records (kSyntheticMetadata): validated and answered, counted only here.
  void SyntheticRecords(uint64_t accepted, uint64_t rejected) {
    synthetic_accepted_.Increment(static_cast<double>(accepted));
    synthetic_rejected_.Increment(static_cast<double>(rejected));
  }
  // A /metrics answer took `seconds` and was `bytes` long (shown from the next scrape on).
  void Scraped(double seconds, size_t bytes) {
    scrape_seconds_.Observe(seconds);
    last_scrape_bytes_.Set(static_cast<double>(bytes));
  }
  // Reads this process's CPU time, memory and descriptors (/proc/self) into the process_* metrics
  // every Prometheus client exports; called before each scrape.
  void SampleProcess();
  // The listener watchdog's latest check (its gauge appears once the watchdog runs).
  void WatchdogChecked(int64_t queued_connections);
  // The batch-id window now: entries, bytes, and its evictions so far by cause (age, entries, bytes —
  // the order of DedupEviction); counters advance to the largest totals seen.
  void DedupWindow(size_t entries, size_t bytes, const std::array<uint64_t, kDedupEvictionCount>& evictions);
  // A fetch of the fleet's rates (--fleet_prometheus_url) succeeded or failed (the families appear
  // with the first fetch).
  void FleetRatesFetched(bool ok);

 private:
  prometheus::Registry registry_;
  prometheus::Family<prometheus::Counter>& started_;
  prometheus::Family<prometheus::Counter>& handled_;
  prometheus::Family<prometheus::Histogram>& handling_seconds_;
  prometheus::Gauge& streams_open_;
  prometheus::Counter& deduplicated_batches_;
  prometheus::Counter& oversized_batches_;
  prometheus::Counter& oversized_records_;
  prometheus::Family<prometheus::Counter>& bulk_family_;
  prometheus::Counter& bulk_queued_;
  prometheus::Counter& bulk_refused_;
  prometheus::Counter& bulk_inline_;
  prometheus::Family<prometheus::Counter>& synthetic_family_;
  prometheus::Counter& synthetic_accepted_;
  prometheus::Counter& synthetic_rejected_;
  prometheus::Histogram& scrape_seconds_;
  prometheus::Gauge& last_scrape_bytes_;
  prometheus::Family<prometheus::Gauge>& watchdog_family_;
  std::atomic<prometheus::Gauge*> watchdog_queued_{nullptr};
  prometheus::Gauge& resident_bytes_;
  prometheus::Gauge& virtual_bytes_;
  prometheus::Gauge& open_fds_;
  prometheus::Gauge& max_fds_;
  prometheus::Counter& cpu_seconds_;
  double cpu_seconds_seen_ ABSL_GUARDED_BY(mu_) = 0;
  prometheus::Family<prometheus::Counter>& fleet_fetches_family_;
  prometheus::Family<prometheus::Gauge>& fleet_success_family_;
  prometheus::Gauge& dedup_entries_;
  prometheus::Gauge& dedup_bytes_;
  std::array<prometheus::Counter*, kDedupEvictionCount> dedup_evictions_{};
  Mutex mu_;
  std::array<uint64_t, kDedupEvictionCount> dedup_evictions_seen_ ABSL_GUARDED_BY(mu_){};
  absl::flat_hash_map<std::string, std::unique_ptr<Method>> methods_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_SERVER_METRICS_H_
