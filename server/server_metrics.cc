#include "server/server_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/grpcpp.h"
#include "kvledger/v1/ledger.pb.h"  // links the Ledger service's descriptor

#ifndef KVLEDGER_GIT_REVISION
#define KVLEDGER_GIT_REVISION "unknown"
#endif

namespace kvledger {
namespace {

// A gauge without labels, registered in `registry`.
prometheus::Gauge& Unlabelled(prometheus::Registry& registry, const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

// Call latency buckets: a unary Record is well under a millisecond; a large batch or a stream's
// summary takes longer.
const prometheus::Histogram::BucketBoundaries& RpcBuckets() {
  static const prometheus::Histogram::BucketBoundaries buckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10};
  return buckets;
}

// "/unknown/unknown": grpc_service and grpc_method "unknown".
constexpr absl::string_view kUnknownMethod = "/unknown/unknown";

// The gRPC services this server serves besides its own (whose methods come from its descriptor).
constexpr absl::string_view kOtherServedMethods[] = {
    "/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch",
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"};

// Whether `full_method` ("/package.Service/Method") is a method this server serves.
bool KnownMethod(absl::string_view full_method) {
  for (absl::string_view other : kOtherServedMethods) {
    if (full_method == other) return true;
  }
  const size_t slash = full_method.rfind('/');
  if (full_method.size() < 2 || full_method[0] != '/' || slash == 0 || slash == absl::string_view::npos) return false;
  const auto* service = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
      std::string(full_method.substr(1, slash - 1)));
  return service != nullptr && service->full_name() == "kvledger.v1.Ledger" &&
         service->FindMethodByName(std::string(full_method.substr(slash + 1))) != nullptr;
}

const char* TypeName(grpc::experimental::ServerRpcInfo::Type type) {
  using Type = grpc::experimental::ServerRpcInfo::Type;
  switch (type) {
    case Type::UNARY: return "unary";
    case Type::CLIENT_STREAMING: return "client_stream";
    case Type::SERVER_STREAMING: return "server_stream";
    case Type::BIDI_STREAMING: return "bidi_stream";
  }
  return "unary";
}

// Records one call: started when created, handled with its status and latency when the status goes out.
class RpcInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit RpcInterceptor(ServerMetrics::Method& method) : method_(method), start_(std::chrono::steady_clock::now()) {
    method_.started->Increment();
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const std::chrono::duration<double> taken = std::chrono::steady_clock::now() - start_;
      method_.Handled(methods->GetSendStatus().error_code(), taken.count());
    }
    methods->Proceed();
  }

 private:
  ServerMetrics::Method& method_;
  const std::chrono::steady_clock::time_point start_;
};

class RpcInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcInterceptorFactory(ServerMetrics& metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    return new RpcInterceptor(metrics_.ForMethod(info->method(), info->type()));
  }

 private:
  ServerMetrics& metrics_;
};

}  // namespace

const char* GrpcCodeName(grpc::StatusCode code) {
  static constexpr const char* kNames[] = {
      "OK",       "Canceled",     "Unknown",       "InvalidArgument",  "DeadlineExceeded", "NotFound",
      "AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange",
      "Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated"};
  const int i = static_cast<int>(code);
  return i >= 0 && i < 17 ? kNames[i] : "Unknown";
}

ServerMetrics::ServerMetrics(const std::string& version)
    : started_(prometheus::BuildCounter()
                   .Name("grpc_server_started_total")
                   .Help("RPCs started on the server.")
                   .Register(registry_)),
      handled_(prometheus::BuildCounter()
                   .Name("grpc_server_handled_total")
                   .Help("RPCs completed on the server, by status code.")
                   .Register(registry_)),
      handling_seconds_(prometheus::BuildHistogram()
                            .Name("grpc_server_handling_seconds")
                            .Help("Seconds from an RPC's start to its status being sent.")
                            .Register(registry_)),
      streams_open_(prometheus::BuildGauge()
                        .Name("kvledger_streams_open")
                        .Help("StreamRecords calls open now.")
                        .Register(registry_)
                        .Add({})),
      deduplicated_batches_(prometheus::BuildCounter()
                                .Name("kvledger_deduplicated_batches_total")
                                .Help("Batches answered with the outcome of an earlier call with the same batch_id "
                                      "and not counted again.")
                                .Register(registry_)
                                .Add({})),
      oversized_batches_(prometheus::BuildCounter()
                             .Name("kvledger_oversized_batches_total")
                             .Help("Batches refused whole for holding more than --max_batch_records records.")
                             .Register(registry_)
                             .Add({})),
      oversized_records_(prometheus::BuildCounter()
                             .Name("kvledger_oversized_batch_records_total")
                             .Help("Records in the batches refused as oversized (none of them counted).")
                             .Register(registry_)
                             .Add({})),
      bulk_family_(prometheus::BuildCounter()
                       .Name("kvledger_bulk_lane_calls_total")
                       .Help("Record and RecordBatch calls and stream batches of --bulk_call_bytes or more, by "
                             "outcome: queued on the bulk lane; or, their address's quarter of --bulk_lane_bytes "
                             "full, refused RESOURCE_EXHAUSTED with nothing applied (a call) or applied where it "
                             "arrived (inline: a stream batch).")
                       .Register(registry_)),
      bulk_queued_(bulk_family_.Add({{"outcome", "queued"}})),
      bulk_refused_(bulk_family_.Add({{"outcome", "refused"}})),
      bulk_inline_(bulk_family_.Add({{"outcome", "inline"}})),
      synthetic_family_(prometheus::BuildCounter()
                            .Name("kvledger_synthetic_records_total")
                            .Help("Records of calls marked kvledger-synthetic (kvledger bench, the examples) by "
                                  "outcome: validated and answered, counted in no other family.")
                            .Register(registry_)),
      synthetic_accepted_(synthetic_family_.Add({{"outcome", "accepted"}})),
      synthetic_rejected_(synthetic_family_.Add({{"outcome", "rejected"}})),
      scrape_seconds_(prometheus::BuildHistogram()
                          .Name("kvledger_scrape_duration_seconds")
                          .Help("Seconds to write one /metrics answer (the scrape itself shows from the next).")
                          .Register(registry_)
                          .Add({}, prometheus::Histogram::BucketBoundaries{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                                           0.1, 0.25, 0.5, 1, 2.5, 10})),
      last_scrape_bytes_(prometheus::BuildGauge()
                             .Name("kvledger_last_scrape_size_bytes")
                             .Help("Bytes of the latest /metrics answer.")
                             .Register(registry_)
                             .Add({})),
      watchdog_family_(prometheus::BuildGauge()
                           .Name("kvledger_watchdog_queued_connections")
                           .Help("Connections waiting in the gRPC listener's accept queue at the listener "
                                 "watchdog's latest check (--deaf_listener_seconds).")
                           .Register(registry_)),
      resident_bytes_(Unlabelled(registry_, "process_resident_memory_bytes", "Resident memory size in bytes.")),
      virtual_bytes_(Unlabelled(registry_, "process_virtual_memory_bytes", "Virtual memory size in bytes.")),
      open_fds_(Unlabelled(registry_, "process_open_fds", "Number of open file descriptors.")),
      max_fds_(Unlabelled(registry_, "process_max_fds", "Maximum number of open file descriptors.")),
      cpu_seconds_(prometheus::BuildCounter()
                       .Name("process_cpu_seconds_total")
                       .Help("Total user and system CPU time spent in seconds.")
                       .Register(registry_)
                       .Add({})),
      fleet_fetches_family_(prometheus::BuildCounter()
                                .Name("kvledger_fleet_rates_fetches_total")
                                .Help("Fetches of the fleet's live rates from Prometheus (--fleet_prometheus_url), "
                                      "by result: ok or error.")
                                .Register(registry_)),
      fleet_success_family_(prometheus::BuildGauge()
                                .Name("kvledger_fleet_rates_last_success_timestamp_seconds")
                                .Help("When the fleet's live rates were last read from Prometheus, in seconds "
                                      "since the Unix epoch.")
                                .Register(registry_)),
      dedup_entries_(prometheus::BuildGauge()
                         .Name("kvledger_batch_dedup_entries")
                         .Help("Batch ids remembered now to answer RecordBatch retries (--batch_dedup_entries).")
                         .Register(registry_)
                         .Add({})),
      dedup_bytes_(prometheus::BuildGauge()
                       .Name("kvledger_batch_dedup_bytes")
                       .Help("Bytes the remembered batch outcomes hold now (--batch_dedup_bytes).")
                       .Register(registry_)
                       .Add({})) {
  auto& evictions = prometheus::BuildCounter()
                        .Name("kvledger_batch_dedup_evictions_total")
                        .Help("Batch ids forgotten, by cause: age (--batch_dedup_seconds), or room for newer ones "
                              "(entries, bytes) before their age: a retry of those is counted again.")
                        .Register(registry_);
  for (const auto& [cause, label] : kDedupEvictionLabels) {
    dedup_evictions_[static_cast<size_t>(cause)] = &evictions.Add({{"cause", label}});
  }
  prometheus::BuildGauge()
      .Name("kvledger_build_info")
      .Help("Build facts, value 1.")
      .Register(registry_)
      .Add({{"version", version}, {"revision", KVLEDGER_GIT_REVISION}, {"grpc_version", grpc::Version()}})
      .Set(1);
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  prometheus::BuildGauge()
      .Name("process_start_time_seconds")
      .Help("Start time of the process since the Unix epoch, in seconds.")
      .Register(registry_)
      .Add({})
      .Set(now);
}

namespace {

struct ProcessSample {
  double cpu_seconds = 0, resident_bytes = 0, virtual_bytes = 0;
};

// /proc/self/stat: after the command's closing parenthesis come fields 3..; utime and stime (clock
// ticks) are fields 14 and 15, vsize (bytes) 23, rss (pages) 24.
std::optional<ProcessSample> ReadProcessStat() {
  std::ifstream in("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  const std::vector<std::string> fields = absl::StrSplit(text.substr(paren + 2), ' ', absl::SkipEmpty());
  double utime = 0, stime = 0, vsize = 0, rss = 0;
  if (fields.size() < 22 || !absl::SimpleAtod(fields[11], &utime) || !absl::SimpleAtod(fields[12], &stime) ||
      !absl::SimpleAtod(fields[20], &vsize) || !absl::SimpleAtod(fields[21], &rss)) {
    return std::nullopt;
  }
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  return ProcessSample{(utime + stime) / ticks, rss * static_cast<double>(sysconf(_SC_PAGESIZE)), vsize};
}

}  // namespace

void ServerMetrics::SampleProcess() {
  if (const auto sample = ReadProcessStat()) {
    resident_bytes_.Set(sample->resident_bytes);
    virtual_bytes_.Set(sample->virtual_bytes);
    MutexLock lock(&mu_);
    if (sample->cpu_seconds > cpu_seconds_seen_) {
      cpu_seconds_.Increment(sample->cpu_seconds - cpu_seconds_seen_);
      cpu_seconds_seen_ = sample->cpu_seconds;
    }
  }
  size_t fds = 0;
  std::error_code error;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    ++fds;
  }
  open_fds_.Set(static_cast<double>(fds));
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) max_fds_.Set(static_cast<double>(limit.rlim_cur));
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> ServerMetrics::NewInterceptorFactory() {
  return std::make_unique<RpcInterceptorFactory>(*this);
}

ServerMetrics::Method& ServerMetrics::ForMethod(const char* full_method,
                                                grpc::experimental::ServerRpcInfo::Type type) {
  // A client names the method it calls: only the served ones become label values, every other name
  // is the one "unknown" method (no client mints series).
  const absl::string_view asked = full_method == nullptr ? "" : full_method;
  const absl::string_view name = KnownMethod(asked) ? asked : kUnknownMethod;
  MutexLock lock(&mu_);
  auto [it, inserted] = methods_.try_emplace(name);
  if (inserted) {
    // "/kvledger.v1.Ledger/Record": service "kvledger.v1.Ledger", method "Record".
    const size_t slash = name.rfind('/');
    const absl::string_view service = slash == absl::string_view::npos ? "" : name.substr(1, slash - 1);
    const absl::string_view method = slash == absl::string_view::npos ? name : name.substr(slash + 1);
    auto m = std::make_unique<Method>();
    m->labels = {{"grpc_type", TypeName(type)}, {"grpc_service", std::string(service)},
                 {"grpc_method", std::string(method)}};
    m->started = &started_.Add(m->labels);
    m->seconds = &handling_seconds_.Add(m->labels, RpcBuckets());
    m->handled_family = &handled_;
    it->second = std::move(m);
  }
  return *it->second;
}

void ServerMetrics::Method::Handled(grpc::StatusCode code, double seconds_taken) {
  const int i = static_cast<int>(code) >= 0 && static_cast<int>(code) < 17 ? static_cast<int>(code) : 2;
  prometheus::Counter* counter = handled[i].load(std::memory_order_acquire);
  if (counter == nullptr) {  // Family::Add returns the same counter for the same labels, so a race is harmless
    prometheus::Labels with_code = labels;
    with_code.emplace("grpc_code", GrpcCodeName(static_cast<grpc::StatusCode>(i)));
    counter = &handled_family->Add(with_code);
    handled[i].store(counter, std::memory_order_release);
  }
  counter->Increment();
  seconds->Observe(seconds_taken);
}

void ServerMetrics::DedupWindow(size_t entries, size_t bytes, const std::array<uint64_t, 3>& evictions) {
  dedup_entries_.Set(static_cast<double>(entries));
  dedup_bytes_.Set(static_cast<double>(bytes));
  MutexLock lock(&mu_);
  for (size_t i = 0; i < evictions.size(); ++i) {
    if (evictions[i] <= dedup_evictions_seen_[i]) continue;  // a concurrent call reported newer totals
    dedup_evictions_[i]->Increment(static_cast<double>(evictions[i] - dedup_evictions_seen_[i]));
    dedup_evictions_seen_[i] = evictions[i];
  }
}

void ServerMetrics::FleetRatesFetched(bool ok) {
  MutexLock lock(&mu_);  // once per fetch: the lock is not on a hot path
  fleet_fetches_family_.Add({{"result", ok ? "ok" : "error"}}).Increment();
  fleet_fetches_family_.Add({{"result", ok ? "error" : "ok"}});  // both results exported from the first fetch
  if (ok) {
    fleet_success_family_.Add({}).Set(
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  }
}

void ServerMetrics::WatchdogChecked(int64_t queued_connections) {
  prometheus::Gauge* gauge = watchdog_queued_.load(std::memory_order_acquire);
  if (gauge == nullptr) {
    gauge = &watchdog_family_.Add({});
    watchdog_queued_.store(gauge, std::memory_order_release);
  }
  gauge->Set(static_cast<double>(queued_connections));
}

}  // namespace kvledger
