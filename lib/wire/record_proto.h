// Conversions between the wire messages (kvledger.v1, protobuf only, no gRPC) and the domain.
#ifndef KVLEDGER_LIB_WIRE_RECORD_PROTO_H_
#define KVLEDGER_LIB_WIRE_RECORD_PROTO_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "kvledger/v1/record.pb.h"
#include "lib/accounting/derived_figures.h"
#include "lib/accounting/figure_schema.h"
#include "lib/accounting/record_facts.h"
#include "lib/wire/call_metadata.h"

namespace kvledger {

// The facts view into `record`, which must outlive them. Both are generated from the message
// (lib/wire/record_codegen.h).
RecordFacts FactsFromProto(const v1::Record& record);
// The record the facts describe: FactsFromProto's inverse (unset optional facts stay absent).
v1::Record FactsToProto(const RecordFacts& facts);

// Every derived figure, for Explain: the rows of ExplainFigures and ExplainGroupColumns, each set in
// its field (resolved by name once). `model` is the record's model name.
v1::DerivedFigures FiguresToProto(const RecordFigures& figures, absl::string_view model);

// The field an Explain row names (lib/accounting/figure_schema.h): `field` in `message`, and
// `parent`, the message field that holds it, for "parent.field". Both null when there is no such
// singular field.
struct ExplainFieldPath {
  const google::protobuf::FieldDescriptor* parent = nullptr;
  const google::protobuf::FieldDescriptor* field = nullptr;
};
ExplainFieldPath FindExplainField(const google::protobuf::Descriptor& message, absl::string_view path);
// Each row of ExplainFigures() and of ExplainGroupColumns(), at the same index, as its field of
// DerivedFigures or GroupFigures, resolved once.
absl::Span<const ExplainFieldPath> ExplainFigurePaths();
absl::Span<const ExplainFieldPath> ExplainGroupColumnPaths();
// Whether the field's type takes the value: int64/int32/uint32/enum an int64_t, double a double, bool
// a bool, string a string_view.
bool FieldTakes(const google::protobuf::FieldDescriptor& field, const ExplainValue& value);
// Sets the field `path` (of `message`'s type) to `value`; a value its type does not take aborts.
void SetExplainValue(google::protobuf::Message& message, const ExplainFieldPath& path, const ExplainValue& value);
// The value of the field `path` (of `message`'s type), or nothing when it is unset (a field with
// presence, or in an unset message field). A string is viewed in the message or in `scratch`.
std::optional<ExplainValue> GetExplainValue(const google::protobuf::Message& message, const ExplainFieldPath& path,
                                            std::string* scratch);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_WIRE_RECORD_PROTO_H_
