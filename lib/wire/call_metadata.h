// The gRPC metadata keys of the wire contract, beside the messages: header-only and free of any
// dependency, so that the Reporter library (which knows nothing of the domain) shares them.
#ifndef KVLEDGER_LIB_WIRE_CALL_METADATA_H_
#define KVLEDGER_LIB_WIRE_CALL_METADATA_H_

namespace kvledger {

// A refused record's or request's reason (RejectReasonLabel) travels in this trailing metadata key,
// beside the INVALID_ARGUMENT message, as RecordBatch's rejections carry it in their `reason`.
// With a record's rejection, the field the message begins with, as data, in the second key: a
// client that names fields otherwise (the CLI's flags) renders the message from it.
inline constexpr char kRejectReasonMetadata[] = "kvledger-reject-reason";
inline constexpr char kRejectFieldMetadata[] = "kvledger-reject-field";
// A load generator's call (kvledger bench, the examples) carries this request metadata key with the
// value "1": its records are validated and derived like any, answered the same, and counted only in
// kvledger_synthetic_records_total, never in the ledger's families, live rates or dedup window.
inline constexpr char kSyntheticMetadata[] = "kvledger-synthetic";
// A call refused because the server is shutting down is answered UNAVAILABLE before anything of
// it is applied, with this trailing metadata key set to "1": a client retries it on another replica
// at once and sends that replica no new calls (it is leaving).
inline constexpr char kDrainingMetadata[] = "kvledger-draining";

}  // namespace kvledger

#endif  // KVLEDGER_LIB_WIRE_CALL_METADATA_H_
