#include "lib/wire/proto_json.h"

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace kvledger {

std::string ProtoToJson(const google::protobuf::Message& message, bool null_unset) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!null_unset) return out;
  const auto* descriptor = message.GetDescriptor();
  const auto* reflection = message.GetReflection();
  std::string nulls;
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const auto* field = descriptor->field(i);
    if (field->is_repeated() || !field->has_presence() || reflection->HasField(message, field)) continue;
    absl::StrAppend(&nulls, ",\"", field->name(), "\":null");
  }
  if (nulls.empty() || out.size() < 2 || out.back() != '}') return out;
  if (out == "{}") nulls.erase(0, 1);
  out.insert(out.size() - 1, nulls);
  return out;
}

}  // namespace kvledger
