// The gRPC face of the ledger (kvledger.v1.Ledger, callback API): converts messages to domain
// facts, hands them to lib/accounting, and maps absl::Status to grpc::Status in one place.
#ifndef KVLEDGER_SERVER_LEDGER_SERVICE_H_
#define KVLEDGER_SERVER_LEDGER_SERVICE_H_

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"
#include "kvledger/v1/ledger.grpc.pb.h"
#include "lib/accounting/ledger.h"
#include "server/batch_dedup.h"

namespace kvledger {

// The single absl -> gRPC status conversion of the server.
grpc::Status ToGrpcStatus(const absl::Status& status);

// Rejection details a stream reports at most (counts stay exact).
inline constexpr size_t kMaxStreamRejections = 1000;

// Thread-safe; `ledger` must outlive the service. With discard_records every well-formed message
// is answered OK and nothing is validated or counted (the benchmark baseline).
class LedgerService final : public v1::Ledger::CallbackService {
 public:
  // RecordBatch batch ids are remembered (dedup_entries most recent, 0 = off, at most dedup_age old).
  LedgerService(Ledger& ledger, bool discard_records, size_t dedup_entries = 65536,
                absl::Duration dedup_age = absl::Minutes(10))
      : ledger_(ledger), discard_(discard_records), dedup_(dedup_entries, dedup_age) {}

  grpc::ServerUnaryReactor* Record(grpc::CallbackServerContext* context, const v1::Record* request,
                                   v1::RecordResponse* response) override;
  grpc::ServerUnaryReactor* RecordBatch(grpc::CallbackServerContext* context,
                                        const v1::RecordBatchRequest* request,
                                        v1::RecordBatchResponse* response) override;
  grpc::ServerReadReactor<v1::RecordBatchRequest>* StreamRecords(
      grpc::CallbackServerContext* context, v1::RecordBatchResponse* response) override;
  grpc::ServerUnaryReactor* Explain(grpc::CallbackServerContext* context, const v1::Record* request,
                                    v1::DerivedFigures* response) override;

 private:
  Ledger& ledger_;
  const bool discard_;
  BatchDeduplicator dedup_;
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_LEDGER_SERVICE_H_
