#include "server/ledger_service.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "lib/wire/advice_proto.h"
#include "lib/wire/capacity_proto.h"
#include "lib/wire/record_proto.h"
#include "lib/accounting/rejection.h"
#include "server/wire_admission.h"

namespace kvledger {
namespace {


// An absl::Status as the gRPC status of the same code (the two enumerations share their values): every
// refusal of the service is made as an absl::Status and leaves through here.
grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

// The same, with its reject reason, if it carries one, in the trailing metadata.
grpc::Status ToGrpcStatus(grpc::CallbackServerContext* context, const absl::Status& status) {
  if (const auto reason = RejectReasonOf(status)) context->AddTrailingMetadata(kRejectReasonMetadata, *reason);
  return ToGrpcStatus(status);
}

// The server's one conversion of a verdict to a gRPC status.
grpc::Status ToGrpcStatus(grpc::CallbackServerContext* context, const Verdict& verdict) {
  if (verdict.ok()) return grpc::Status::OK;
  context->AddTrailingMetadata(kRejectReasonMetadata, RejectReasonLabel(verdict.rejection().reason));
  if (!verdict.rejection().field.empty()) context->AddTrailingMetadata(kRejectFieldMetadata, verdict.rejection().field);
  return ToGrpcStatus(absl::InvalidArgumentError(verdict.rejection().message));
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
// A stream's summary lists rejections up to max_rejections and, across the whole stream, up to
// kSummaryListedBytes of them (`listed_bytes` counts them), so an open stream never holds more than
// that for its answer; the counts stay exact.
constexpr size_t kSummaryListedBytes = 32 << 10;

void AddToSummary(const v1::RecordBatchResponse& outcome, uint64_t index_offset, size_t max_rejections,
                  size_t* listed_bytes, v1::RecordBatchResponse* summary) {
  summary->set_accepted(summary->accepted() + outcome.accepted());
  summary->set_rejected(summary->rejected() + outcome.rejected());
  for (const v1::Rejection& rejection : outcome.rejections()) {
    if (static_cast<size_t>(summary->rejections_size()) >= max_rejections) break;
    v1::Rejection* listed = summary->add_rejections();
    *listed = rejection;
    listed->set_index(index_offset + rejection.index());
    const size_t bytes = listed->SpaceUsedLong();
    if (*listed_bytes + bytes > kSummaryListedBytes) {  // freed, not kept for reuse
      summary->mutable_rejections()->DeleteSubrange(summary->rejections_size() - 1, 1);
      break;
    }
    *listed_bytes += bytes;
  }
}

// The limits of a request type whose entries are the top-level fields `first` and `second`.
WireLimits LimitsOf(const google::protobuf::Descriptor* type, size_t max_entries, int first = 0, int second = 0) {
  WireLimits limits;
  limits.type = type;
  limits.entry_fields[0] = first;
  limits.entry_fields[1] = second;
  limits.max_entries = max_entries;
  return limits;
}

// A unary call whose request is `bytes`: admitted, parsed and handed to `handle` (which fills its
// reply), or refused (`too_many(entries)` when it carries too many entries); its status.
template <typename Request, typename Response, typename TooMany, typename Handle>
grpc::Status ApplyUnary(grpc::CallbackServerContext* context, const grpc::ByteBuffer& bytes, grpc::ByteBuffer* out,
                        const WireLimits& limits, PerPeerBudget& budget, TooMany too_many, Handle handle) {
  PartsHeld held;  // destroyed after `request`
  Request request;
  WireCount count;
  absl::Status refused;
  switch (Admit(bytes, limits, budget, PeerAddress(*context), held, &request, &count, &refused)) {
    case Admission::kTooManyEntries:
      return too_many(count.entries);
    case Admission::kRefused:
      return ToGrpcStatus(refused);
    case Admission::kAdmitted:
      break;
  }
  Response response;
  grpc::Status status = handle(request, &response);
  if (status.ok()) status = Reply(response, out);
  return status;
}

// Serves a unary call at once (ApplyUnary).
template <typename Request, typename Response, typename TooMany, typename Handle>
grpc::ServerUnaryReactor* ServeUnary(grpc::CallbackServerContext* context, const grpc::ByteBuffer& bytes,
                                     grpc::ByteBuffer* out, const WireLimits& limits, PerPeerBudget& budget,
                                     TooMany too_many, Handle handle) {
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ApplyUnary<Request, Response>(context, bytes, out, limits, budget, too_many, handle));
  return reactor;
}

// A unary call's refusal for too many entries is never reached where entries are not counted.
grpc::Status NoEntries(size_t) { return ToGrpcStatus(absl::InternalError("entries are not counted")); }

// A batch_id past kMaxBatchIdBytes: nothing of the `what` (batch, request) counted.
grpc::Status BatchIdTooLong(const std::string& id, absl::string_view what) {
  return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat("batch_id (", id.size(), " bytes): must be at most ",
                                                              kMaxBatchIdBytes, " bytes; nothing of the ", what,
                                                              " was counted")));
}

// Adds one engine-statistics entry's outcome to `response`.
void AddOutcome(const EngineStatsVerdict& verdict, int index, size_t max_rejections,
                v1::EngineStatsResponse* response) {
  if (verdict.ok()) {
    response->set_accepted(response->accepted() + 1);
    return;
  }
  response->set_rejected(response->rejected() + 1);
  if (static_cast<size_t>(response->rejections_size()) >= max_rejections) return;
  v1::Rejection* listed = response->add_rejections();
  listed->set_index(static_cast<uint64_t>(index));
  listed->set_reason(EngineStatsRejectReasonLabel(verdict.rejection().reason));
  listed->set_message(verdict.rejection().message);
}

}  // namespace

// A stream's batch is kept allocated for the next one to be parsed into only while it is small: at
// most this many records in at most this many bytes (SpaceUsedLong: strings and unknown fields
// included). Anything larger is freed, so an idle stream holds at most kReusedBytes of its batch and
// kSummaryListedBytes of its answer outside the parts budget (256 idle streams: 24 MiB).
constexpr int kReusedRecords = 1024;
constexpr size_t kReusedBytes = 64 << 10;

// One open StreamRecords call. Batches are accounted as they arrive; the summary is sent once, when
// the client half-closes or when the service ends open streams for shutdown, and nothing arriving
// after it is counted, so the summary is exactly what was counted.
class LedgerService::StreamReactor final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  StreamReactor(LedgerService& service, std::string peer, bool synthetic, grpc::ByteBuffer* response)
      : service_(service), peer_(std::move(peer)), synthetic_(synthetic), response_(response), last_read_(absl::Now()) {
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
    StartRead(&bytes_);
  }

  void OnReadDone(bool ok) override {
    MutexLock lock(&mu_);
    last_read_ = absl::Now();
    if (finished_) return;  // the summary went out already; the read was cancelled or is ignored
    if (!ok) {  // the client half-closed (or the call broke): answer with the summary
      FinishLocked(grpc::Status::OK);
      return;
    }
    BulkLane* lane = service_.bulk_.get();
    const size_t size = bytes_.Length();
    if (lane == nullptr || size < service_.options_.bulk_call_bytes) {
      ApplyReadLocked();
      return;
    }
    // A large batch is applied on the bulk lane (server/bulk_lane.h); the next read starts after it.
    in_lane_ = true;
    const bool queued = lane->Submit(peer_, size, [this] { ApplyFromTheLane(); });
    if (queued) {
      if (service_.metrics_ != nullptr) service_.metrics_->BulkCall(BulkOutcome::kQueued);
      return;
    }
    // The address's quarter of the lane is full: applied here rather than ending the stream (a stream
    // cannot retry one batch), as before the lane.
    in_lane_ = false;
    if (service_.metrics_ != nullptr) service_.metrics_->BulkCall(BulkOutcome::kInline);
    ApplyReadLocked();
  }

  bool IdleSince(absl::Time cutoff) {
    MutexLock lock(&mu_);
    return !finished_ && !in_lane_ && last_read_ < cutoff;
  }

  void EndWithSummary() {
    MutexLock lock(&mu_);
    if (in_lane_) {
      end_requested_ = true;  // the lane's task ends it: the reactor must outlive that task
      return;
    }
    if (!finished_) FinishLocked(grpc::Status::OK);
  }

  // The lane's task: applies the batch that waited (or, ended meanwhile, only sends the summary). It
  // runs on the lane's thread, where gRPC may run OnDone as soon as Finish is called: pinned as
  // EndStreams pins, so the reactor is deleted only once the task has let go of it.
  void ApplyFromTheLane() {
    {
      MutexLock lock(&service_.streams_mu_);
      ++pins_;
    }
    {
      MutexLock lane_lock(&mu_);
      in_lane_ = false;
      if (end_requested_) {  // ended while waiting: the batch was not counted, the summary says so
        FinishLocked(grpc::Status::OK);
      } else {
        ApplyReadLocked();
      }
    }
    bool finished;
    {
      MutexLock lock(&service_.streams_mu_);
      finished = --pins_ == 0 && done_;
    }
    if (finished) delete this;
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
  // Parses and applies the batch read into bytes_, adds its outcome to the summary and reads the next
  // (or ends the stream with the refusal).
  void ApplyReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    PartsHeld held;  // released once the batch is applied
    v1::RecordBatchRequest& batch = batch_;  // parsed into again: its records' memory is reused
    WireCount count;
    absl::Status refused;
    switch (Admit(bytes_, service_.batch_limits_, service_.parts_budget_, peer_, held, &batch, &count, &refused)) {
      case Admission::kTooManyEntries:
        FinishLocked(service_.Oversized(count.entries, absl::StrCat("nothing of it was counted; the stream's earlier "
                                                                    "batches were (", Earlier(), ")")));
        return;
      case Admission::kRefused:
        FinishLocked(ToGrpcStatus(absl::Status(refused.code(),
                                               absl::StrCat(refused.message(), " (this batch; the stream's earlier batches "
                                               "were counted: ", Earlier(), ")"))));
        return;
      case Admission::kAdmitted:
        break;
    }
    bytes_.Clear();
    v1::RecordBatchResponse outcome;
    const grpc::Status applied = service_.ApplyBatch(batch, synthetic_, &outcome);
    if (!applied.ok()) {
      FinishLocked(ToGrpcStatus(absl::Status(static_cast<absl::StatusCode>(applied.error_code()),
                                             absl::StrCat(applied.error_message(), " (this batch; the stream's "
                                                          "earlier batches were counted: ", Earlier(), ")"))));
      return;
    }
    AddToSummary(outcome, records_seen_, service_.options_.max_listed_rejections, &listed_bytes_, &summary_);
    records_seen_ += static_cast<uint64_t>(batch.records_size());
    // A small batch's records are kept for the next one to be parsed into; a large one's memory is
    // given back, so an open stream holds little between batches.
    if (batch.records_size() > kReusedRecords || batch.SpaceUsedLong() > kReusedBytes) batch_ = v1::RecordBatchRequest();
    StartRead(&bytes_);
  }

  // The summary goes out with an OK status only; an error carries its counts in its message.
  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    finished_ = true;
    Finish(status.ok() ? Reply(summary_, response_) : status);
  }

  std::string Earlier() const {
    return absl::StrCat(summary_.accepted(), " accepted, ", summary_.rejected(), " rejected");
  }

  LedgerService& service_;
  const std::string peer_;  // the client address, for its share of the parts budget
  const bool synthetic_;    // a load generator's stream (kSyntheticMetadata)
  grpc::ByteBuffer* response_;
  grpc::ByteBuffer bytes_;  // the batch being read
  v1::RecordBatchRequest batch_;  // and parsed
  v1::RecordBatchResponse summary_;
  size_t listed_bytes_ = 0;  // of summary_'s rejections
  uint64_t records_seen_ = 0;
  Mutex mu_;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool in_lane_ ABSL_GUARDED_BY(mu_) = false;        // a batch waits on the bulk lane
  bool end_requested_ ABSL_GUARDED_BY(mu_) = false;  // EndWithSummary came while it waited
  absl::Time last_read_ ABSL_GUARDED_BY(mu_);
};

LedgerServiceOptions LedgerServiceOptions::From(const ServerOptions& options) {
  LedgerServiceOptions o;
  o.max_batch_records = options.max_batch_records;
  o.max_listed_rejections = options.max_listed_rejections;
  o.stream_idle_timeout = absl::Seconds(options.stream_idle_seconds);
  o.dedup_entries = options.batch_dedup_entries;
  o.dedup_bytes = options.batch_dedup_bytes;
  o.dedup_age = absl::Seconds(options.batch_dedup_seconds);
  o.bulk_call_bytes = options.bulk_call_bytes;
  o.bulk_lane_bytes = options.bulk_lane_bytes;
  return o;
}

LedgerService::LedgerService(RecordSinks sinks, const ModelRegistry& registry, const LedgerServiceOptions& options,
                             const LiveRates* rates, EngineStats* engine_stats, ServerMetrics* metrics,
                             const FleetRates* fleet, const CapacityCurves* curves)
    : sinks_(sinks),
      registry_(registry),
      rates_(rates),
      fleet_(fleet),
      curves_(curves),
      engine_stats_(engine_stats),
      metrics_(metrics),
      options_(options),
      record_limits_(LimitsOf(v1::Record::descriptor(), 1)),
      batch_limits_(LimitsOf(v1::RecordBatchRequest::descriptor(), options.max_batch_records,
                             v1::RecordBatchRequest::kRecordsFieldNumber)),
      advice_limits_(LimitsOf(v1::AdviceRequest::descriptor(), kMaxAdviceCandidates,
                              v1::AdviceRequest::kCandidatesFieldNumber)),
      engine_stats_limits_(LimitsOf(v1::EngineStatsRequest::descriptor(), options.max_batch_records,
                                    v1::EngineStatsRequest::kTransfersFieldNumber,
                                    v1::EngineStatsRequest::kUnrecordedFieldNumber)),
      list_profiles_limits_(LimitsOf(v1::ListProfilesRequest::descriptor(), 1)),
      capacity_limits_(LimitsOf(v1::CapacityCurveRequest::descriptor(), 1)),
      parts_budget_(MakePartsBudget(options.parsing_parts)),
      dedup_(options.dedup_entries, options.dedup_bytes, options.dedup_age) {
  if (options_.bulk_call_bytes > 0) bulk_ = std::make_unique<BulkLane>(options_.bulk_lane_bytes);
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
                                                const grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
  return Recording(context, *request, [this, context, request, response] {
    return ApplyUnary<v1::Record, v1::RecordResponse>(
        context, *request, response, record_limits_, parts_budget_, NoEntries,
        [this, context](const v1::Record& record, v1::RecordResponse*) {
          if (std::optional<grpc::Status> refused = Draining(context)) return *refused;
          const bool synthetic = IsSynthetic(*context);
          const Verdict verdict = (synthetic ? sinks_.synthetic : sinks_.real).Record(FactsFromProto(record));
          if (synthetic && metrics_ != nullptr) metrics_->SyntheticRecords(verdict.ok() ? 1 : 0, verdict.ok() ? 0 : 1);
          return ToGrpcStatus(context, verdict);
        });
  });
}

grpc::ServerUnaryReactor* LedgerService::Recording(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer& request,
                                                   absl::AnyInvocable<grpc::Status()> apply) {
  auto* reactor = context->DefaultReactor();
  const size_t bytes = request.Length();
  if (bulk_ == nullptr || bytes < options_.bulk_call_bytes) {
    reactor->Finish(apply());
    return reactor;
  }
  const bool queued = bulk_->Submit(PeerAddress(*context), bytes, [reactor, apply = std::move(apply)]() mutable {
    reactor->Finish(apply());
  });
  if (metrics_ != nullptr) metrics_->BulkCall(queued ? BulkOutcome::kQueued : BulkOutcome::kRefused);
  if (!queued) {
    reactor->Finish(ToGrpcStatus(absl::ResourceExhaustedError(absl::StrCat(
        "this address's calls of ", options_.bulk_call_bytes, " bytes or more (--bulk_call_bytes) already fill its "
        "quarter of the bulk lane (--bulk_lane_bytes ", options_.bulk_lane_bytes,
        "): nothing of this call was applied; retry it"))));
  }
  return reactor;
}

std::optional<grpc::Status> LedgerService::Draining(grpc::CallbackServerContext* context) const {
  if (!draining_.load(std::memory_order_acquire)) return std::nullopt;
  context->AddTrailingMetadata(kDrainingMetadata, "1");
  return ToGrpcStatus(absl::UnavailableError(
      "the server is shutting down: nothing of this call was applied; retry it on another replica"));
}

grpc::Status LedgerService::Oversized(size_t records, absl::string_view what) {
  if (metrics_ != nullptr) metrics_->BatchOversized(records);
  return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat("records: ", records,
                                                              " records in one batch: must be at most ",
                                                              options_.max_batch_records, " (--max_batch_records); ",
                                                              what)));
}

std::optional<grpc::Status> LedgerService::Claim(const std::string& key, v1::RecordBatchResponse* remembered) {
  switch (dedup_.Begin(key, remembered)) {
    case BatchDeduplicator::Claim::kApplied:  // a retry: the original outcome, nothing counted again
      if (metrics_ != nullptr) metrics_->BatchDeduplicated();
      return grpc::Status::OK;
    case BatchDeduplicator::Claim::kInProgress:
      return ToGrpcStatus(absl::UnavailableError("batch_id is being applied by another call; retry for its outcome"));
    case BatchDeduplicator::Claim::kNew:
      break;
  }
  return std::nullopt;
}

grpc::Status LedgerService::ApplyBatch(const v1::RecordBatchRequest& batch, bool synthetic,
                                       v1::RecordBatchResponse* outcome) {
  const std::string& id = batch.batch_id();
  if (id.size() > kMaxBatchIdBytes) {
    return BatchIdTooLong(id, "batch");
  }
  if (batch.records_size() == 0) return grpc::Status::OK;  // nothing to count twice: not remembered
  if (synthetic) {
    AccountBatch(sinks_.synthetic, batch, options_.max_listed_rejections, outcome);
    if (metrics_ != nullptr) metrics_->SyntheticRecords(outcome->accepted(), outcome->rejected());
    return grpc::Status::OK;
  }
  if (std::optional<grpc::Status> answered = Claim(id, outcome)) return *answered;
  AccountBatch(sinks_.real, batch, options_.max_listed_rejections, outcome);
  dedup_.Finish(id, *outcome);
  if (metrics_ != nullptr && !id.empty()) {
    const BatchDeduplicator::Stats stats = dedup_.stats();
    metrics_->DedupWindow(stats.entries, stats.bytes, stats.evictions);
  }
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* LedgerService::RecordBatch(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
  return Recording(context, *request, [this, context, request, response] {
    return ApplyUnary<v1::RecordBatchRequest, v1::RecordBatchResponse>(
        context, *request, response, batch_limits_, parts_budget_,
        [this](size_t records) { return Oversized(records, "nothing of the batch was counted"); },
        [this, context](const v1::RecordBatchRequest& batch, v1::RecordBatchResponse* outcome) {
          if (std::optional<grpc::Status> refused = Draining(context)) return *refused;
          return ApplyBatch(batch, IsSynthetic(*context), outcome);
        });
  });
}

grpc::ServerReadReactor<grpc::ByteBuffer>* LedgerService::StreamRecords(grpc::CallbackServerContext* context,
                                                                        grpc::ByteBuffer* response) {
  return new StreamReactor(*this, PeerAddress(*context), IsSynthetic(*context), response);
}

grpc::ServerUnaryReactor* LedgerService::Explain(grpc::CallbackServerContext* context,
                                                 const grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
  return ServeUnary<v1::Record, v1::DerivedFigures>(
      context, *request, response, record_limits_, parts_budget_, NoEntries,
      [this, context](const v1::Record& record, v1::DerivedFigures* figures_out) {
        const RecordFacts facts = FactsFromProto(record);
        const absl::StatusOr<Resolution> model = registry_.Resolve(facts.model);
        auto figures = Evaluate(facts, model, LiveEstimateSource(model, rates_));
        if (figures.ok()) *figures_out = FiguresToProto(*figures, record.model());
        return ToGrpcStatus(context, figures.verdict());
      });
}

grpc::ServerUnaryReactor* LedgerService::Advise(grpc::CallbackServerContext* context,
                                                const grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
  return ServeUnary<v1::AdviceRequest, v1::Advice>(
      context, *request, response, advice_limits_, parts_budget_,
      [](size_t candidates) {
        return ToGrpcStatus(absl::InvalidArgumentError(TooManyCandidatesMessage(candidates)));
      },
      [this, context](const v1::AdviceRequest& asked, v1::Advice* answer) {
        auto advice = kvledger::Advise(AdviceRequestFromProto(asked), registry_, rates_, fleet_);
        if (!advice.ok()) return ToGrpcStatus(context, advice.status());
        *answer = AdviceToProto(*advice);
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* LedgerService::RecordEngineStats(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  return ServeUnary<v1::EngineStatsRequest, v1::EngineStatsResponse>(
      context, *request, response, engine_stats_limits_, parts_budget_,
      [this](size_t entries) {
        return ToGrpcStatus(absl::InvalidArgumentError(
            absl::StrCat("transfers + unrecorded: ", entries, " entries in one request: must be at most ",
                         options_.max_batch_records, " (--max_batch_records); nothing of it was counted")));
      },
      [this, context](const v1::EngineStatsRequest& stats, v1::EngineStatsResponse* outcome) {
        if (IsSynthetic(*context)) {  // they would feed the live rates, which synthetic calls never move
          return ToGrpcStatus(absl::InvalidArgumentError(
              absl::StrCat(kSyntheticMetadata, " = \"1\": engine statistics cannot be synthetic (they feed the "
                           "live rates); nothing of the request was counted")));
        }
        if (std::optional<grpc::Status> refused = Draining(context)) return *refused;
        return ApplyEngineStats(stats, outcome);
      });
}

grpc::ServerUnaryReactor* LedgerService::ListProfiles(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
  return ServeUnary<v1::ListProfilesRequest, v1::ProfileCatalog>(
      context, *request, response, list_profiles_limits_, parts_budget_, NoEntries,
      [this](const v1::ListProfilesRequest&, v1::ProfileCatalog* catalog) {
        for (const std::string& name : registry_.catalog().Names()) {
          *catalog->add_profiles() = registry_.catalog().Find(name)->definition();
        }
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* LedgerService::CapacityCurve(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
  return ServeUnary<v1::CapacityCurveRequest, v1::CapacityCurve>(
      context, *request, response, capacity_limits_, parts_budget_, NoEntries,
      [this, context](const v1::CapacityCurveRequest& asked, v1::CapacityCurve* answer) {
        if (curves_ == nullptr) return ToGrpcStatus(context, NoCurvesStatus());
        auto curve = CurveToProto(*curves_, registry_, asked.model());
        if (!curve.ok()) return ToGrpcStatus(context, curve.status());
        *answer = *std::move(curve);
        return grpc::Status::OK;
      });
}

grpc::Status LedgerService::ApplyEngineStats(const v1::EngineStatsRequest& request,
                                             v1::EngineStatsResponse* response) {
  const std::string& id = request.batch_id();
  if (id.size() > kMaxBatchIdBytes) {
    return BatchIdTooLong(id, "request");
  }
  if (request.transfers_size() + request.unrecorded_size() == 0) return grpc::Status::OK;
  // Remembered in the one batch-id window, apart from RecordBatch's ids; the outcomes have the same
  // shape (accepted, rejected, rejections).
  const std::string key = id.empty() ? id : absl::StrCat("engine-stats\n", id);
  v1::RecordBatchResponse remembered;
  if (std::optional<grpc::Status> answered = Claim(key, &remembered)) {
    response->set_accepted(remembered.accepted());
    response->set_rejected(remembered.rejected());
    *response->mutable_rejections() = remembered.rejections();
    return *answered;
  }
  AccountEngineStats(request, response);
  remembered.set_accepted(response->accepted());
  remembered.set_rejected(response->rejected());
  *remembered.mutable_rejections() = response->rejections();
  dedup_.Finish(key, remembered);
  return grpc::Status::OK;
}

void LedgerService::AccountEngineStats(const v1::EngineStatsRequest& request, v1::EngineStatsResponse* response) {
  const size_t max_listed = options_.max_listed_rejections;
  for (int i = 0; i < request.transfers_size(); ++i) {
    const v1::TransferObservation& t = request.transfers(i);
    if (engine_stats_ == nullptr) {
      AddOutcome(EngineStatsVerdict(), i, max_listed, response);
      continue;
    }
    AddOutcome(engine_stats_->AddTransfer({t.model(), t.tier(), t.bytes(), t.seconds(), t.transfers()},
                                          absl::StrCat("transfers[", i, "].")),
               i, max_listed, response);
  }
  for (int i = 0; i < request.unrecorded_size(); ++i) {
    const v1::UnrecordedRequests& u = request.unrecorded(i);
    if (engine_stats_ == nullptr) {
      AddOutcome(EngineStatsVerdict(), i, max_listed, response);
      continue;
    }
    AddOutcome(engine_stats_->AddUnrecorded({u.model(), u.reason(), u.requests(), u.logical_match_tokens()},
                                            absl::StrCat("unrecorded[", i, "].")),
               i, max_listed, response);
  }
}

}  // namespace kvledger
