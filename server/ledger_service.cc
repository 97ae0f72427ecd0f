#include "server/ledger_service.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "lib/accounting/record_proto.h"
#include "lib/accounting/rejection.h"

namespace kvledger {
namespace {

// Accounts every record of `batch`; rejections are reported with index_offset + position.
void AccountBatch(Ledger& ledger, bool discard, const v1::RecordBatchRequest& batch,
                  uint64_t index_offset, size_t max_rejections, v1::RecordBatchResponse* response) {
  for (int i = 0; i < batch.records_size(); ++i) {
    const absl::Status status =
        discard ? absl::OkStatus() : ledger.Record(FactsFromProto(batch.records(i)));
    if (status.ok()) {
      response->set_accepted(response->accepted() + 1);
      continue;
    }
    response->set_rejected(response->rejected() + 1);
    if (static_cast<size_t>(response->rejections_size()) < max_rejections) {
      auto* rejection = response->add_rejections();
      rejection->set_index(index_offset + static_cast<uint64_t>(i));
      rejection->set_reason(RejectReasonLabel(ReasonOf(status)));
      rejection->set_message(std::string(status.message()));
    }
  }
}

// INVALID_ARGUMENT naming the limit when a batch has more records than it allows.
grpc::Status CheckBatchSize(const v1::RecordBatchRequest& batch, size_t max_records, const char* what) {
  if (static_cast<size_t>(batch.records_size()) <= max_records) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      absl::StrCat("records: ", batch.records_size(), " records in one batch: must be at most ",
                                   max_records, " (--max_batch_records); ", what));
}

class StreamReactor final : public grpc::ServerReadReactor<v1::RecordBatchRequest> {
 public:
  StreamReactor(Ledger& ledger, const LedgerServiceOptions& options, v1::RecordBatchResponse* response)
      : ledger_(ledger), options_(options), response_(response) {
    StartRead(&batch_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client half-closed (or the call broke): answer with the summary
      Finish(grpc::Status::OK);
      return;
    }
    if (auto status = CheckBatchSize(
            batch_, options_.max_batch_records,
            absl::StrCat("nothing of it was counted; the stream's earlier batches were (", response_->accepted(),
                         " accepted, ", response_->rejected(), " rejected)").c_str());
        !status.ok()) {
      Finish(status);
      return;
    }
    AccountBatch(ledger_, options_.discard_records, batch_, records_seen_, options_.max_listed_rejections, response_);
    records_seen_ += static_cast<uint64_t>(batch_.records_size());
    batch_.Clear();
    StartRead(&batch_);
  }
  void OnDone() override { delete this; }

 private:
  Ledger& ledger_;
  const LedgerServiceOptions& options_;
  v1::RecordBatchResponse* response_;
  v1::RecordBatchRequest batch_;
  uint64_t records_seen_ = 0;
};

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

grpc::ServerUnaryReactor* LedgerService::Record(grpc::CallbackServerContext* context,
                                                const v1::Record* request, v1::RecordResponse*) {
  auto* reactor = context->DefaultReactor();
  reactor->Finish(options_.discard_records ? grpc::Status::OK
                                           : ToGrpcStatus(ledger_.Record(FactsFromProto(*request))));
  return reactor;
}

grpc::ServerUnaryReactor* LedgerService::RecordBatch(grpc::CallbackServerContext* context,
                                                     const v1::RecordBatchRequest* request,
                                                     v1::RecordBatchResponse* response) {
  auto* reactor = context->DefaultReactor();
  const std::string& id = request->batch_id();
  if (auto status = CheckBatchSize(*request, options_.max_batch_records, "nothing of the batch was counted");
      !status.ok()) {
    reactor->Finish(status);
    return reactor;
  }
  if (id.size() > kMaxBatchIdBytes) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 absl::StrCat("batch_id (", id.size(), " bytes): must be at most ",
                                              kMaxBatchIdBytes, " bytes; nothing of the batch was counted")));
    return reactor;
  }
  switch (dedup_.Begin(id, response)) {
    case BatchDeduplicator::Claim::kApplied:  // a retry: the original outcome, nothing counted again
      reactor->Finish(grpc::Status::OK);
      return reactor;
    case BatchDeduplicator::Claim::kInProgress:
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                   "batch_id is being applied by another call; retry for its outcome"));
      return reactor;
    case BatchDeduplicator::Claim::kNew:
      break;
  }
  AccountBatch(ledger_, options_.discard_records, *request, 0, options_.max_listed_rejections, response);
  dedup_.Finish(id, *response);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerReadReactor<v1::RecordBatchRequest>* LedgerService::StreamRecords(
    grpc::CallbackServerContext*, v1::RecordBatchResponse* response) {
  return new StreamReactor(ledger_, options_, response);
}

grpc::ServerUnaryReactor* LedgerService::Explain(grpc::CallbackServerContext* context,
                                                 const v1::Record* request, v1::DerivedFigures* response) {
  auto* reactor = context->DefaultReactor();
  auto figures = Evaluate(FactsFromProto(*request), ledger_.registry());
  if (figures.ok()) *response = FiguresToProto(*figures, request->model());
  reactor->Finish(ToGrpcStatus(figures.status()));
  return reactor;
}

}  // namespace kvledger
