// The gRPC face of the ledger (kvledger.v1.Ledger, callback API): converts messages to domain
// facts, hands them to a RecordSink, and maps a Rejection to a grpc::Status in one place. Every
// method takes its request as bytes and counts them before parsing (server/wire_admission.h): a
// request with too many records, candidates or entries, or with more nested messages and unknown
// fields than it may carry, is refused before any of it is materialised.
#ifndef KVLEDGER_SERVER_LEDGER_SERVICE_H_
#define KVLEDGER_SERVER_LEDGER_SERVICE_H_

#include <atomic>
#include <optional>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "lib/base/mutex.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/grpcpp.h"
#include "kvledger/v1/ledger.grpc.pb.h"
#include "lib/capacity/capacity_curves.h"
#include "lib/accounting/ledger.h"
#include "lib/accounting/engine_stats.h"
#include "lib/accounting/fleet_rates.h"
#include "lib/accounting/live_rates.h"
#include "lib/accounting/record_sink.h"
#include "server/batch_dedup.h"
#include "server/bulk_lane.h"
#include "server/server_metrics.h"
#include "server/server_options.h"
#include "lib/wire/wire_budget.h"
#include "server/wire_admission.h"

namespace kvledger {

// What the service takes from the server's options (server/server_options.h, where every default
// is); built only by From().
struct LedgerServiceOptions {
  // A RecordBatch, or one batch of a stream, with more records is refused whole.
  size_t max_batch_records;
  // Rejection details one reply lists at most (RecordBatch and StreamRecords); counts stay exact.
  size_t max_listed_rejections;
  // A stream that sends no batch for this long is ended with its summary (0 = never).
  absl::Duration stream_idle_timeout;
  // RecordBatch batch ids remembered: the most recent this many (0 = off) holding at most this many
  // bytes, at most this old.
  size_t dedup_entries;
  size_t dedup_bytes;
  absl::Duration dedup_age;
  // Parts (nested messages and unknown fields) of all requests being parsed at once; more are
  // refused with RESOURCE_EXHAUSTED. At kPartBytes each: 256 MiB of parsed messages in flight.
  size_t parsing_parts = size_t{1} << 20;
  // Record and RecordBatch calls of at least this many bytes are applied on the bulk lane
  // (server/bulk_lane.h), which holds at most bulk_lane_bytes of them waiting (0: no lane).
  size_t bulk_call_bytes = 0;
  size_t bulk_lane_bytes = 0;

  static LedgerServiceOptions From(const ServerOptions& options);
};

// Where records go: `real` counts them; `synthetic` takes a load generator's (a call marked with
// kSyntheticMetadata), kept out of every exported family.
struct RecordSinks {
  RecordSink& real;
  RecordSink& synthetic;
};

// Thread-safe; `sinks`, `registry` (for Explain and Advise), `rates` (for Advise; may be null) and
// `engine_stats` (for RecordEngineStats; null: entries are parsed and discarded, as a no-op sink
// does with records) and `metrics` (streams open, deduplicated and oversized batches; may be null)
// must outlive the service.
using RawLedgerService = v1::Ledger::WithRawCallbackMethod_Record<v1::Ledger::WithRawCallbackMethod_RecordBatch<
    v1::Ledger::WithRawCallbackMethod_StreamRecords<v1::Ledger::WithRawCallbackMethod_Explain<
        v1::Ledger::WithRawCallbackMethod_Advise<v1::Ledger::WithRawCallbackMethod_RecordEngineStats<
            v1::Ledger::WithRawCallbackMethod_ListProfiles<
                v1::Ledger::WithRawCallbackMethod_CapacityCurve<v1::Ledger::Service>>>>>>>>;

class LedgerService final : public RawLedgerService {
 public:
  LedgerService(RecordSinks sinks, const ModelRegistry& registry, const LedgerServiceOptions& options,
                const LiveRates* rates = nullptr, EngineStats* engine_stats = nullptr,
                ServerMetrics* metrics = nullptr, const FleetRates* fleet = nullptr,
                const CapacityCurves* curves = nullptr);
  ~LedgerService() override;

  grpc::ServerUnaryReactor* Record(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* RecordBatch(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerReadReactor<grpc::ByteBuffer>* StreamRecords(grpc::CallbackServerContext* context,
                                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Explain(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Advise(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* RecordEngineStats(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                              grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListProfiles(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* CapacityCurve(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;

  // From now on, Record, RecordBatch and RecordEngineStats are answered UNAVAILABLE (with
  // kDrainingMetadata) before anything of them is applied; calls being applied finish as usual.
  // For shutdown, before EndOpenStreams.
  void Drain() { draining_.store(true, std::memory_order_release); }
  // Ends every open StreamRecords call with its summary (status OK, the counts so far); batches
  // that arrive afterwards are not counted. New streams opened later end at their first batch.
  // For shutdown.
  void EndOpenStreams();
  // Ends, with their summaries, the open streams that sent nothing for options.stream_idle_timeout.
  // Called once a second by the service's own reaper thread; public for tests.
  void EndIdleStreams(absl::Time now);
  // The bulk lane (null without one); for tests, which hold it busy to see a call wait on it.
  BulkLane* bulk_lane_for_tests() { return bulk_.get(); }

  class StreamReactor;  // one open StreamRecords call

 private:
  friend class StreamReactor;
  // Applies one batch once per batch_id (see BatchDeduplicator): its outcome, indices within the batch.
  // A synthetic batch goes to the synthetic sink and is never remembered (its ids must not push a
  // real batch's out of the window).
  grpc::Status ApplyBatch(const v1::RecordBatchRequest& batch, bool synthetic, v1::RecordBatchResponse* outcome);
  // The refusal of a batch of `records` records, more than max_batch_records (counted as oversized).
  grpc::Status Oversized(size_t records, absl::string_view what);
  // A batch id's claim in the dedup window: the answer for a batch applied before (its outcome in
  // `remembered`) or being applied now, or nothing for a new one (apply it, then dedup_.Finish).
  std::optional<grpc::Status> Claim(const std::string& key, v1::RecordBatchResponse* remembered);
  // Engine statistics, once per batch_id (like ApplyBatch), then AccountEngineStats.
  grpc::Status ApplyEngineStats(const v1::EngineStatsRequest& request, v1::EngineStatsResponse* response);
  void AccountEngineStats(const v1::EngineStatsRequest& request, v1::EngineStatsResponse* response);
  // Answers a recording call with `apply`'s status: on the bulk lane when the call is large, else at once.
  grpc::ServerUnaryReactor* Recording(grpc::CallbackServerContext* context, const grpc::ByteBuffer& request,
                                      absl::AnyInvocable<grpc::Status()> apply);
  // Nothing when serving; the refusal of a call while draining (see Drain).
  std::optional<grpc::Status> Draining(grpc::CallbackServerContext* context) const;
  const RecordSinks sinks_;
  std::atomic<bool> draining_{false};
  const ModelRegistry& registry_;
  const LiveRates* const rates_;
  const FleetRates* const fleet_;  // --fleet_prometheus_url; null without
  const CapacityCurves* const curves_;  // --capacity_ladder; null without
  EngineStats* const engine_stats_;
  ServerMetrics* const metrics_;
  const LedgerServiceOptions options_;
  // What each request type may carry on the wire (see lib/wire/wire_budget.h).
  const WireLimits record_limits_, batch_limits_, advice_limits_, engine_stats_limits_, list_profiles_limits_,
      capacity_limits_;
  PerPeerBudget parts_budget_;
  BatchDeduplicator dedup_;
  Mutex streams_mu_;
  absl::flat_hash_set<StreamReactor*> streams_ ABSL_GUARDED_BY(streams_mu_);
  bool streams_ending_ ABSL_GUARDED_BY(streams_mu_) = false;
  // Ends the streams `which` selects (under streams_mu_), outside streams_mu_.
  template <typename Which>
  void EndStreams(Which which);
  absl::Notification stop_reaper_;
  std::thread reaper_;
  // Last, so destroyed first: its thread applies the calls still waiting while the rest is there.
  std::unique_ptr<BulkLane> bulk_;  // null with bulk_call_bytes 0
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_LEDGER_SERVICE_H_
