#include "lib/wire/record_proto.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace kvledger {

namespace {

// A row's field that the message does not have, or a value its type does not take: a build that
// cannot work (the explain-figures test holds every row to the message).
[[noreturn]] void BadRow(const google::protobuf::Descriptor& message, absl::string_view path, const char* what) {
  std::fprintf(stderr, "kvledger: %s field %s: %s\n", message.full_name().c_str(), std::string(path).c_str(), what);
  std::abort();
}

// Each row's field, resolved once: a row without one is a build that cannot work.
template <typename Row>
const std::vector<ExplainFieldPath>* Resolve(const google::protobuf::Descriptor& message, absl::Span<const Row> rows) {
  auto* paths = new std::vector<ExplainFieldPath>;
  for (const Row& row : rows) {
    paths->push_back(FindExplainField(message, row.field));
    if (paths->back().field == nullptr) BadRow(message, row.field, "no such field");
  }
  return paths;
}

}  // namespace

ExplainFieldPath FindExplainField(const google::protobuf::Descriptor& message, absl::string_view path) {
  ExplainFieldPath found;
  const google::protobuf::Descriptor* holder = &message;
  if (const size_t dot = path.find('.'); dot != absl::string_view::npos) {
    found.parent = message.FindFieldByName(std::string(path.substr(0, dot)));
    if (found.parent == nullptr || found.parent->message_type() == nullptr || found.parent->is_repeated()) return {};
    holder = found.parent->message_type();
    path.remove_prefix(dot + 1);
  }
  found.field = holder->FindFieldByName(std::string(path));
  if (found.field == nullptr || found.field->is_repeated()) return {};
  return found;
}

absl::Span<const ExplainFieldPath> ExplainFigurePaths() {
  static const std::vector<ExplainFieldPath>* paths = Resolve(*v1::DerivedFigures::descriptor(), ExplainFigures());
  return *paths;
}

absl::Span<const ExplainFieldPath> ExplainGroupColumnPaths() {
  static const std::vector<ExplainFieldPath>* paths = Resolve(*v1::GroupFigures::descriptor(), ExplainGroupColumns());
  return *paths;
}

bool FieldTakes(const google::protobuf::FieldDescriptor& field, const ExplainValue& value) {
  using F = google::protobuf::FieldDescriptor;
  switch (field.cpp_type()) {
    case F::CPPTYPE_INT64:
    case F::CPPTYPE_INT32:
    case F::CPPTYPE_UINT32:
    case F::CPPTYPE_ENUM: return std::holds_alternative<int64_t>(value);
    case F::CPPTYPE_DOUBLE: return std::holds_alternative<double>(value);
    case F::CPPTYPE_BOOL: return std::holds_alternative<bool>(value);
    case F::CPPTYPE_STRING: return std::holds_alternative<std::string_view>(value);
    default: return false;
  }
}

void SetExplainValue(google::protobuf::Message& message, const ExplainFieldPath& found, const ExplainValue& value) {
  if (!FieldTakes(*found.field, value)) BadRow(*message.GetDescriptor(), found.field->name(), "its type does not fit");
  google::protobuf::Message* holder = &message;
  if (found.parent != nullptr) holder = message.GetReflection()->MutableMessage(&message, found.parent);
  const google::protobuf::Reflection& r = *holder->GetReflection();
  const google::protobuf::FieldDescriptor* f = found.field;
  using F = google::protobuf::FieldDescriptor;
  switch (f->cpp_type()) {
    case F::CPPTYPE_INT64: r.SetInt64(holder, f, std::get<int64_t>(value)); break;
    case F::CPPTYPE_INT32: r.SetInt32(holder, f, static_cast<int32_t>(std::get<int64_t>(value))); break;
    case F::CPPTYPE_UINT32: r.SetUInt32(holder, f, static_cast<uint32_t>(std::get<int64_t>(value))); break;
    case F::CPPTYPE_ENUM: r.SetEnumValue(holder, f, static_cast<int>(std::get<int64_t>(value))); break;
    case F::CPPTYPE_DOUBLE: r.SetDouble(holder, f, std::get<double>(value)); break;
    case F::CPPTYPE_BOOL: r.SetBool(holder, f, std::get<bool>(value)); break;
    default: r.SetString(holder, f, std::string(std::get<std::string_view>(value))); break;
  }
}

std::optional<ExplainValue> GetExplainValue(const google::protobuf::Message& message, const ExplainFieldPath& found,
                                            std::string* scratch) {
  const google::protobuf::Message* holder = &message;
  if (found.parent != nullptr) {
    if (!message.GetReflection()->HasField(message, found.parent)) return std::nullopt;
    holder = &message.GetReflection()->GetMessage(message, found.parent);
  }
  const google::protobuf::Reflection& r = *holder->GetReflection();
  const google::protobuf::FieldDescriptor* f = found.field;
  if (f->has_presence() && !r.HasField(*holder, f)) return std::nullopt;
  using F = google::protobuf::FieldDescriptor;
  switch (f->cpp_type()) {
    case F::CPPTYPE_INT64: return r.GetInt64(*holder, f);
    case F::CPPTYPE_INT32: return int64_t{r.GetInt32(*holder, f)};
    case F::CPPTYPE_UINT32: return int64_t{r.GetUInt32(*holder, f)};
    case F::CPPTYPE_ENUM: return int64_t{r.GetEnumValue(*holder, f)};
    case F::CPPTYPE_DOUBLE: return r.GetDouble(*holder, f);
    case F::CPPTYPE_BOOL: return r.GetBool(*holder, f);
    default: return std::string_view(r.GetStringReference(*holder, f, scratch));
  }
}

// FactsFromProto and FactsToProto are generated from the message (record_proto.gen.cc).

v1::DerivedFigures FiguresToProto(const RecordFigures& d, absl::string_view model) {
  v1::DerivedFigures p;
  p.set_model(std::string(model));
  const absl::Span<const ExplainFigure> rows = ExplainFigures();
  const absl::Span<const ExplainFieldPath> row_paths = ExplainFigurePaths();
  for (size_t i = 0; i < rows.size(); ++i) {
    if (const std::optional<ExplainValue> value = rows[i].value(d)) SetExplainValue(p, row_paths[i], *value);
  }
  const absl::Span<const ExplainGroupColumn> columns = ExplainGroupColumns();
  const absl::Span<const ExplainFieldPath> column_paths = ExplainGroupColumnPaths();
  for (const GroupFigure& g : d.groups) {
    v1::GroupFigures* out = p.add_groups();
    for (size_t i = 0; i < columns.size(); ++i) {
      if (const std::optional<ExplainValue> value = columns[i].value(g)) SetExplainValue(*out, column_paths[i], *value);
    }
  }
  return p;
}

}  // namespace kvledger
