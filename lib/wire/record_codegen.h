// What follows from the kvledger.v1.Record message alone, generated at build time
// (record_codegen_main.cc, run by lib/CMakeLists.txt) so that a record input is declared once, in
// proto/kvledger/v1/record.proto:
//   lib/accounting/record_facts.gen.h  RecordFacts (and one facts struct per nested message) and the
//                                      reject reasons, one per field ("invalid_" and its name);
//   lib/wire/record_proto.gen.cc       FactsFromProto and FactsToProto.
// The mapping, field by field (docs/architecture.md, "Adding a record input"):
//   string            -> absl::string_view, a view into the message
//   enum              -> int <name>_value, the raw wire value (validation turns it into the domain enum)
//   scalar            -> the C++ scalar; `optional` (presence) -> std::optional: unset is "not reported"
//   repeated scalar   -> absl::Span<const T>, a view into the message
//   repeated message  -> std::vector<<Message>Fact>, each a struct of the same mapping (scalars, strings)
// Every field also carries its one line of CLI help, [(kvledger.v1.flag_help) = "..."].
#ifndef KVLEDGER_LIB_WIRE_RECORD_CODEGEN_H_
#define KVLEDGER_LIB_WIRE_RECORD_CODEGEN_H_

#include <string>

#include "google/protobuf/descriptor.h"

namespace kvledger::codegen {

// Why `message` cannot be generated, naming the field (a shape the table has no mapping for, or no
// flag help); empty when it can.
std::string RecordCodegenProblem(const google::protobuf::Descriptor& message);
// The texts of the two files, for a message without a problem.
std::string RecordFactsHeader(const google::protobuf::Descriptor& message);
std::string RecordProtoSource(const google::protobuf::Descriptor& message);

}  // namespace kvledger::codegen

#endif  // KVLEDGER_LIB_WIRE_RECORD_CODEGEN_H_
