// Protobuf messages as the JSON every kvledger surface prints (explain --json, /api/v1/explain,
// the profile definitions of /api/v1/profiles): proto field names, every field printed.
#ifndef KVLEDGER_LIB_WIRE_PROTO_JSON_H_
#define KVLEDGER_LIB_WIRE_PROTO_JSON_H_

#include <string>

#include "google/protobuf/message.h"

namespace kvledger {

// A protobuf message (e.g. DerivedFigures for explain) as JSON with the proto field names and
// every field printed. With null_unset, a top-level field with presence that is unset (a figure that was
// not measured or cannot be computed) is printed as null rather than left out.
std::string ProtoToJson(const google::protobuf::Message& message, bool null_unset = false);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_WIRE_PROTO_JSON_H_
