#include "server/ledger_service.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "lib/wire/advice_proto.h"
#include "lib/wire/record_proto.h"
#include "lib/accounting/rejection.h"

namespace kvledger {
namespace {

// The server's one conversion of a verdict to a gRPC status.
grpc::Status ToGrpcStatus(const Verdict& verdict) {
  if (verdict.ok()) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, verdict.rejection().message);
}

// Accounts every record of `batch` into `response` (indices within the batch).
void AccountBatch(RecordSink& sink, const v1::RecordBatchRequest& batch, size_t max_rejections,
                  v1::RecordBatchResponse* response) {
  for (int i = 0; i < batch.records_size(); ++i) {
    const Verdict verdict = sink.Record(FactsFromProto(batch.records(i)));
    if (verdict.ok()) {
      response->set_accepted(response->accepted() + 1);
      continue;
    }
    response->set_rejected(response->rejected() + 1);
    if (static_cast<size_t>(response->rejections_size()) < max_rejections) {
      auto* rejection = response->add_rejections();
      rejection->set_index(static_cast<uint64_t>(i));
      rejection->set_reason(RejectReasonLabel(verdict.rejection().reason));
      rejection->set_message(verdict.rejection().message);
    }
  }
}

// Adds one batch's outcome to a stream's summary, its rejection indices shifted by `index_offset`.
void AddToSummary(const v1::RecordBatchResponse& outcome, uint64_t index_offset, size_t max_rejections,
                  v1::RecordBatchResponse* summary) {
  summary->set_accepted(summary->accepted() + outcome.accepted());
  summary->set_rejected(summary->rejected() + outcome.rejected());
  for (const v1::Rejection& rejection : outcome.rejections()) {
    if (static_cast<size_t>(summary->rejections_size()) >= max_rejections) break;
    v1::Rejection* listed = summary->add_rejections();
    *listed = rejection;
    listed->set_index(index_offset + rejection.index());
  }
}

bool TooLarge(const v1::RecordBatchRequest& batch, size_t max_records) {
  return static_cast<size_t>(batch.records_size()) > max_records;
}

// The INVALID_ARGUMENT for a batch with more records than allowed, naming the limit.
grpc::Status TooLargeStatus(const v1::RecordBatchRequest& batch, size_t max_records, absl::string_view what) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      absl::StrCat("records: ", batch.records_size(), " records in one batch: must be at most ",
                                   max_records, " (--max_batch_records); ", what));
}

// Adds one engine-statistics entry's outcome to `response`.
void AddOutcome(const std::optional<EngineStatsRejection>& rejected, int index, size_t max_rejections,
                v1::EngineStatsResponse* response) {
  if (!rejected) {
    response->set_accepted(response->accepted() + 1);
    return;
  }
  response->set_rejected(response->rejected() + 1);
  if (static_cast<size_t>(response->rejections_size()) >= max_rejections) return;
  v1::Rejection* listed = response->add_rejections();
  listed->set_index(static_cast<uint64_t>(index));
  listed->set_reason(EngineStatsRejectReasonLabel(rejected->reason));
  listed->set_message(rejected->message);
}

}  // namespace

// One open StreamRecords call. Batches are accounted as they arrive; the summary is sent once, when
// the client half-closes or when the service ends open streams for shutdown, and nothing arriving
// after it is counted, so the summary is exactly what was counted.
class LedgerService::StreamReactor final : public grpc::ServerReadReactor<v1::RecordBatchRequest> {
 public:
  StreamReactor(LedgerService& service, v1::RecordBatchResponse* response)
      : service_(service), response_(response), last_read_(absl::Now()) {
    bool ending;
    {
      MutexLock lock(&service_.streams_mu_);
      service_.streams_.insert(this);
      ending = service_.streams_ending_;
    }
    if (service_.metrics_ != nullptr) service_.metrics_->StreamOpened();
    if (ending) {
      EndWithSummary();  // shutting down: an empty summary, nothing read
      return;
    }
    StartRead(&batch_);
  }

  void OnReadDone(bool ok) override {
    MutexLock lock(&mu_);
    last_read_ = absl::Now();
    if (finished_) return;  // the summary went out already; the read was cancelled or is ignored
    if (!ok) {  // the client half-closed (or the call broke): answer with the summary
      FinishLocked(grpc::Status::OK);
      return;
    }
    if (TooLarge(batch_, service_.options_.max_batch_records)) {
      if (service_.metrics_ != nullptr) service_.metrics_->BatchOversized(static_cast<size_t>(batch_.records_size()));
      FinishLocked(TooLargeStatus(batch_, service_.options_.max_batch_records,
                                  absl::StrCat("nothing of it was counted; the stream's earlier batches were (",
                                               response_->accepted(), " accepted, ", response_->rejected(),
                                               " rejected)")));
      return;
    }
    v1::RecordBatchResponse outcome;
    const grpc::Status applied = service_.ApplyBatch(batch_, &outcome);
    if (!applied.ok()) {
      FinishLocked(grpc::Status(applied.error_code(),
                                absl::StrCat(applied.error_message(), " (this batch; the stream's earlier batches were "
                                             "counted: ", response_->accepted(), " accepted, ",
                                             response_->rejected(), " rejected)")));
      return;
    }
    AddToSummary(outcome, records_seen_, service_.options_.max_listed_rejections, response_);
    records_seen_ += static_cast<uint64_t>(batch_.records_size());
    batch_.Clear();
    StartRead(&batch_);
  }

  bool IdleSince(absl::Time cutoff) {
    MutexLock lock(&mu_);
    return !finished_ && last_read_ < cutoff;
  }

  void EndWithSummary() {
    MutexLock lock(&mu_);
    if (!finished_) FinishLocked(grpc::Status::OK);
  }

  void OnDone() override {
    if (service_.metrics_ != nullptr) service_.metrics_->StreamClosed();
    {
      MutexLock lock(&service_.streams_mu_);
      service_.streams_.erase(this);
      done_ = true;
      if (pins_ > 0) return;  // EndStreams is using it and deletes it when done
    }
    delete this;
  }

  // Pins keep the reactor alive while EndStreams works on it outside streams_mu_.
  int pins_ = 0;       // guarded by service_.streams_mu_
  bool done_ = false;  // guarded by service_.streams_mu_

 private:
  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    finished_ = true;
    Finish(status);
  }

  LedgerService& service_;
  v1::RecordBatchResponse* response_;
  v1::RecordBatchRequest batch_;
  uint64_t records_seen_ = 0;
  Mutex mu_;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_read_ ABSL_GUARDED_BY(mu_);
};

LedgerService::LedgerService(RecordSink& sink, const ModelRegistry& registry, const LedgerServiceOptions& options,
                             const LiveRates* rates, EngineStats* engine_stats, ServerMetrics* metrics)
    : sink_(sink),
      registry_(registry),
      rates_(rates),
      engine_stats_(engine_stats),
      metrics_(metrics),
      options_(options), dedup_(options.dedup_entries, options.dedup_bytes, options.dedup_age) {
  if (options_.stream_idle_timeout > absl::ZeroDuration()) {
    reaper_ = std::thread([this] {
      while (!stop_reaper_.WaitForNotificationWithTimeout(absl::Seconds(1))) EndIdleStreams(absl::Now());
    });
  }
}

LedgerService::~LedgerService() {
  stop_reaper_.Notify();
  if (reaper_.joinable()) reaper_.join();
}

template <typename Which>
void LedgerService::EndStreams(Which which) {
  std::vector<StreamReactor*> chosen;
  {
    MutexLock lock(&streams_mu_);
    for (StreamReactor* stream : streams_) {
      if (!which(stream)) continue;
      ++stream->pins_;
      chosen.push_back(stream);
    }
  }
  for (StreamReactor* stream : chosen) {
    stream->EndWithSummary();  // outside streams_mu_: gRPC may run OnDone on this thread
    bool finished;
    {
      MutexLock lock(&streams_mu_);
      finished = --stream->pins_ == 0 && stream->done_;
    }
    if (finished) delete stream;
  }
}

void LedgerService::EndIdleStreams(absl::Time now) {
  const absl::Time cutoff = now - options_.stream_idle_timeout;
  EndStreams([cutoff](StreamReactor* stream) { return stream->IdleSince(cutoff); });
}

void LedgerService::EndOpenStreams() {
  {
    MutexLock lock(&streams_mu_);
    streams_ending_ = true;
  }
  EndStreams([](StreamReactor*) { return true; });
}

grpc::ServerUnaryReactor* LedgerService::Record(grpc::CallbackServerContext* context,
                                                const v1::Record* request, v1::RecordResponse*) {
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(sink_.Record(FactsFromProto(*request))));
  return reactor;
}

grpc::Status LedgerService::ApplyBatch(const v1::RecordBatchRequest& batch, v1::RecordBatchResponse* outcome) {
  const std::string& id = batch.batch_id();
  if (id.size() > kMaxBatchIdBytes) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("batch_id (", id.size(), " bytes): must be at most ", kMaxBatchIdBytes,
                                     " bytes; nothing of the batch was counted"));
  }
  if (batch.records_size() == 0) return grpc::Status::OK;  // nothing to count twice: not remembered
  switch (dedup_.Begin(id, outcome)) {
    case BatchDeduplicator::Claim::kApplied:  // a retry: the original outcome, nothing counted again
      if (metrics_ != nullptr) metrics_->BatchDeduplicated();
      return grpc::Status::OK;
    case BatchDeduplicator::Claim::kInProgress:
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "batch_id is being applied by another call; retry for its outcome");
    case BatchDeduplicator::Claim::kNew:
      break;
  }
  AccountBatch(sink_, batch, options_.max_listed_rejections, outcome);
  dedup_.Finish(id, *outcome);
  if (metrics_ != nullptr && !id.empty()) {
    const BatchDeduplicator::Stats stats = dedup_.stats();
    metrics_->DedupWindow(stats.entries, stats.bytes, stats.evictions);
  }
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* LedgerService::RecordBatch(grpc::CallbackServerContext* context,
                                                     const v1::RecordBatchRequest* request,
                                                     v1::RecordBatchResponse* response) {
  auto* reactor = context->DefaultReactor();
  if (TooLarge(*request, options_.max_batch_records)) {
    if (metrics_ != nullptr) metrics_->BatchOversized(static_cast<size_t>(request->records_size()));
    reactor->Finish(TooLargeStatus(*request, options_.max_batch_records, "nothing of the batch was counted"));
    return reactor;
  }
  reactor->Finish(ApplyBatch(*request, response));
  return reactor;
}

grpc::ServerReadReactor<v1::RecordBatchRequest>* LedgerService::StreamRecords(
    grpc::CallbackServerContext*, v1::RecordBatchResponse* response) {
  return new StreamReactor(*this, response);
}

grpc::ServerUnaryReactor* LedgerService::Explain(grpc::CallbackServerContext* context,
                                                 const v1::Record* request, v1::DerivedFigures* response) {
  auto* reactor = context->DefaultReactor();
  auto figures = Evaluate(FactsFromProto(*request), registry_);
  if (figures.ok()) *response = FiguresToProto(*figures, request->model());
  reactor->Finish(ToGrpcStatus(figures.verdict()));
  return reactor;
}

grpc::ServerUnaryReactor* LedgerService::Advise(grpc::CallbackServerContext* context,
                                                const v1::AdviceRequest* request, v1::Advice* response) {
  auto* reactor = context->DefaultReactor();
  auto advice = kvledger::Advise(AdviceRequestFromProto(*request), registry_, rates_);
  if (!advice.ok()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(advice.status().message())));
    return reactor;
  }
  *response = AdviceToProto(*advice);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* LedgerService::RecordEngineStats(grpc::CallbackServerContext* context,
                                                           const v1::EngineStatsRequest* request,
                                                           v1::EngineStatsResponse* response) {
  auto* reactor = context->DefaultReactor();
  const size_t entries = static_cast<size_t>(request->transfers_size() + request->unrecorded_size());
  if (entries > options_.max_batch_records) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 absl::StrCat("transfers + unrecorded: ", entries, " entries in one request: must be "
                                              "at most ", options_.max_batch_records,
                                              " (--max_batch_records); nothing of it was counted")));
    return reactor;
  }
  const size_t max_listed = options_.max_listed_rejections;
  for (int i = 0; i < request->transfers_size(); ++i) {
    const v1::TransferObservation& t = request->transfers(i);
    if (engine_stats_ == nullptr) {
      AddOutcome(std::nullopt, i, max_listed, response);
      continue;
    }
    AddOutcome(engine_stats_->AddTransfer({t.model(), t.tier(), t.bytes(), t.seconds(), t.transfers()},
                                          absl::StrCat("transfers[", i, "].")),
               i, max_listed, response);
  }
  for (int i = 0; i < request->unrecorded_size(); ++i) {
    const v1::UnrecordedRequests& u = request->unrecorded(i);
    if (engine_stats_ == nullptr) {
      AddOutcome(std::nullopt, i, max_listed, response);
      continue;
    }
    AddOutcome(engine_stats_->AddUnrecorded({u.model(), u.reason(), u.requests(), u.logical_match_tokens()},
                                            absl::StrCat("unrecorded[", i, "].")),
               i, max_listed, response);
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace kvledger
