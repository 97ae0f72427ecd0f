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

RecordFacts FactsFromProto(const v1::Record& r) {
  RecordFacts f;
  f.request_id = r.request_id();
  f.model = r.model();
  f.tier_value = r.tier();
  f.prompt_tokens = r.prompt_tokens();
  f.logical_match_tokens = r.logical_match_tokens();
  if (r.has_recoverable_tokens()) f.recoverable_tokens = r.recoverable_tokens();
  if (r.has_recompute_tokens()) f.recompute_tokens = r.recompute_tokens();
  if (r.has_reload_seconds()) f.reload_seconds = r.reload_seconds();
  if (r.has_suffix_prefill_seconds()) f.suffix_prefill_seconds = r.suffix_prefill_seconds();
  if (r.has_ttft_seconds()) f.ttft_seconds = r.ttft_seconds();
  if (r.has_predicted_match_tokens()) f.predicted_match_tokens = r.predicted_match_tokens();
  if (r.has_queue_seconds()) f.queue_seconds = r.queue_seconds();
  if (r.has_output_tokens()) f.output_tokens = r.output_tokens();
  if (r.has_decode_seconds()) f.decode_seconds = r.decode_seconds();
  f.prefix_block_ids = absl::MakeConstSpan(r.prefix_block_ids().data(), r.prefix_block_ids().size());
  if (r.has_block_tokens()) f.block_tokens = r.block_tokens();
  f.cache_id = r.cache_id();
  f.prefix_block_reuse_distances =
      absl::MakeConstSpan(r.prefix_block_reuse_distances().data(), r.prefix_block_reuse_distances().size());
  if (r.has_cache_capacity_blocks()) f.cache_capacity_blocks = r.cache_capacity_blocks();
  f.state_boundaries.reserve(r.state_boundaries_size());
  for (const auto& b : r.state_boundaries()) {
    f.state_boundaries.push_back(StateBoundaryFact{b.state_group(), b.boundary_tokens()});
  }
  return f;
}

v1::Record FactsToProto(const RecordFacts& f) {
  v1::Record r;
  r.set_request_id(std::string(f.request_id));
  r.set_model(std::string(f.model));
  r.set_tier(static_cast<v1::Tier>(f.tier_value));
  r.set_prompt_tokens(f.prompt_tokens);
  r.set_logical_match_tokens(f.logical_match_tokens);
  if (f.recoverable_tokens) r.set_recoverable_tokens(*f.recoverable_tokens);
  if (f.recompute_tokens) r.set_recompute_tokens(*f.recompute_tokens);
  if (f.reload_seconds) r.set_reload_seconds(*f.reload_seconds);
  if (f.suffix_prefill_seconds) r.set_suffix_prefill_seconds(*f.suffix_prefill_seconds);
  if (f.ttft_seconds) r.set_ttft_seconds(*f.ttft_seconds);
  if (f.predicted_match_tokens) r.set_predicted_match_tokens(*f.predicted_match_tokens);
  if (f.queue_seconds) r.set_queue_seconds(*f.queue_seconds);
  if (f.output_tokens) r.set_output_tokens(*f.output_tokens);
  if (f.decode_seconds) r.set_decode_seconds(*f.decode_seconds);
  r.mutable_prefix_block_ids()->Add(f.prefix_block_ids.begin(), f.prefix_block_ids.end());
  if (f.block_tokens) r.set_block_tokens(*f.block_tokens);
  r.set_cache_id(std::string(f.cache_id));
  r.mutable_prefix_block_reuse_distances()->Add(f.prefix_block_reuse_distances.begin(),
                                               f.prefix_block_reuse_distances.end());
  if (f.cache_capacity_blocks) r.set_cache_capacity_blocks(*f.cache_capacity_blocks);
  for (const StateBoundaryFact& b : f.state_boundaries) {
    v1::StateBoundary* out = r.add_state_boundaries();
    out->set_state_group(std::string(b.state_group));
    out->set_boundary_tokens(b.boundary_tokens);
  }
  return r;
}

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
