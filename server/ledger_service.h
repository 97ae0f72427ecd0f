// The gRPC face of the ledger (kvledger.v1.Ledger, callback API): converts messages to domain
// facts, hands them to lib/accounting, and maps absl::Status to grpc::Status in one place.
#ifndef KVLEDGER_SERVER_LEDGER_SERVICE_H_
#define KVLEDGER_SERVER_LEDGER_SERVICE_H_

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"
#include "kvledger/v1/ledger.grpc.pb.h"
#include "lib/accounting/ledger.h"

namespace kvledger {

// The single absl -> gRPC status conversion of the server.
grpc::Status ToGrpcStatus(const absl::Status& status);

// Rejection details a stream reports at most (counts stay exact).
inline constexpr size_t kMaxStreamRejections = 1000;

// Thread-safe; `ledger` must outlive the service. With discard_records every well-formed message
// is answered OK and nothing is validated or counted (the benchmark baseline).
class LedgerService final : public v1::Ledger::CallbackService {
 public:
  LedgerService(Ledger& ledger, bool discard_records) : ledger_(ledger), discard_(discard_records) {}

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
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_LEDGER_SERVICE_H_
