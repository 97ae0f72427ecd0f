// Conversions between the wire messages (kvledger.v1, protobuf only, no gRPC) and the domain.
#ifndef KVLEDGER_LIB_WIRE_RECORD_PROTO_H_
#define KVLEDGER_LIB_WIRE_RECORD_PROTO_H_

#include "kvledger/v1/record.pb.h"
#include "lib/accounting/derived_figures.h"
#include "lib/accounting/record_facts.h"

namespace kvledger {

// A refused record's or request's reason (RejectReasonLabel) travels in this trailing metadata key,
// beside the INVALID_ARGUMENT message, as RecordBatch's rejections carry it in their `reason`.
// With a record's rejection, the field the message begins with, as data, in the second key: a
// client that names fields otherwise (the CLI's flags) renders the message from it.
inline constexpr char kRejectReasonMetadata[] = "kvledger-reject-reason";
inline constexpr char kRejectFieldMetadata[] = "kvledger-reject-field";

// The facts view into `record`, which must outlive them.
RecordFacts FactsFromProto(const v1::Record& record);
// The record the facts describe: FactsFromProto's inverse (unset optional facts stay absent).
v1::Record FactsToProto(const RecordFacts& facts);

// Every derived figure, for Explain. `model` is the record's model name.
v1::DerivedFigures FiguresToProto(const RecordFigures& figures, absl::string_view model);

// DerivedFigures' per-boundary fields are named after the boundary labels: `alpha_<boundary>`,
// `attention_avoided_<boundary>_flops`, `prefill_avoided_<boundary>_flops`. The field `prefix` +
// label + `suffix`, read or written by name, so a boundary is never a bare index.
double PerBoundary(const v1::DerivedFigures& figures, absl::string_view prefix, Boundary boundary,
                   absl::string_view suffix = "");
void SetPerBoundary(v1::DerivedFigures& figures, absl::string_view prefix, Boundary boundary, absl::string_view suffix,
                    double value);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_WIRE_RECORD_PROTO_H_
