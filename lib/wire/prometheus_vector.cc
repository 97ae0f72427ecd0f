#include "lib/wire/prometheus_vector.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace kvledger {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

// The field `name` of `s` when it has the kind `kind`, else null.
const Value* Field(const Struct& s, const std::string& name, Value::KindCase kind) {
  const auto it = s.fields().find(name);
  if (it == s.fields().end() || it->second.kind_case() != kind) return nullptr;
  return &it->second;
}

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("Prometheus answer: ", what));
}

absl::StatusOr<LabeledSample> Sample(const Value& result, size_t index) {
  const std::string at = absl::StrCat("result[", index, "]");
  if (result.kind_case() != Value::kStructValue) return Malformed(absl::StrCat(at, " is not an object"));
  const Value* metric = Field(result.struct_value(), "metric", Value::kStructValue);
  const Value* value = Field(result.struct_value(), "value", Value::kListValue);
  if (metric == nullptr || value == nullptr || value->list_value().values_size() != 2 ||
      value->list_value().values(1).kind_case() != Value::kStringValue) {
    return Malformed(absl::StrCat(at, ": needs \"metric\" {...} and \"value\" [time, \"number\"]"));
  }
  LabeledSample sample;
  for (const auto& [name, label] : metric->struct_value().fields()) {
    if (label.kind_case() != Value::kStringValue) return Malformed(absl::StrCat(at, ": label ", name, " is not a string"));
    sample.labels.emplace_back(name, label.string_value());
  }
  const std::string& number = value->list_value().values(1).string_value();
  if (!absl::SimpleAtod(number, &sample.value)) {
    return Malformed(absl::StrCat(at, ": value \"", number, "\" is not a number"));
  }
  return sample;
}

}  // namespace

absl::StatusOr<std::vector<LabeledSample>> ParsePrometheusVector(absl::string_view json) {
  Struct answer;
  if (!google::protobuf::util::JsonStringToMessage(std::string(json), &answer).ok()) return Malformed("not a JSON object");
  const Value* status = Field(answer, "status", Value::kStringValue);
  if (status == nullptr || status->string_value() != "success") {
    const Value* error = Field(answer, "error", Value::kStringValue);
    return Malformed(absl::StrCat("status ", status != nullptr ? status->string_value() : "missing",
                                  error != nullptr ? absl::StrCat(": ", error->string_value()) : ""));
  }
  const Value* data = Field(answer, "data", Value::kStructValue);
  const Value* type = data != nullptr ? Field(data->struct_value(), "resultType", Value::kStringValue) : nullptr;
  const Value* result = data != nullptr ? Field(data->struct_value(), "result", Value::kListValue) : nullptr;
  if (type == nullptr || type->string_value() != "vector" || result == nullptr) {
    return Malformed("not an instant vector (data.resultType \"vector\" with data.result [...])");
  }
  std::vector<LabeledSample> samples;
  for (int i = 0; i < result->list_value().values_size(); ++i) {
    absl::StatusOr<LabeledSample> sample = Sample(result->list_value().values(i), static_cast<size_t>(i));
    if (!sample.ok()) return sample.status();
    samples.push_back(*std::move(sample));
  }
  return samples;
}

std::string UrlQueryEscape(absl::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace kvledger
