// `kvledger send`, `replay` and `explain`: records built from flags or read from a JSON-lines
// trace, sent over gRPC, or explained offline with the same lib/accounting code the server runs.
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"
#include "client/commands.h"
#include "lib/base/quote.h"
#include "client/connection.h"
#include "client/flag_set.h"
#include "grpcpp/grpcpp.h"
#include "kvledger/v1/ledger.grpc.pb.h"
#include "lib/accounting/figure_schema.h"
#include "lib/accounting/ledger.h"
#include "lib/accounting/rejection.h"
#include "lib/wire/calculators.h"
#include "lib/wire/record_proto.h"
#include "lib/profiles/model_registry.h"

namespace kvledger::cli {
namespace {

// What --help says of a record field's flag: its (flag_help) option in record.proto (every field has
// one: the build's record codegen refuses a field without it).
std::string RecordFlagHelp(const google::protobuf::FieldDescriptor& field) {
  return field.options().GetExtension(v1::flag_help);
}

// Record fields as flags, named after the proto fields (--prompt-tokens for prompt_tokens), made
// from the Record message's descriptor, as the HTTP API makes its parameters: a field added to
// record.proto is a flag of send and explain without a change here.
struct RecordFlags {
  std::string tier;  // empty: not given (SetTier's default)
  std::vector<std::string> state_boundaries;
  std::map<std::string, std::string> number_lists;  // repeated 64-bit fields, as N,N,...
  std::map<std::string, std::optional<int64_t>> ints;
  std::map<std::string, std::optional<double>> doubles;
  std::map<std::string, std::string> strings;
  std::map<std::string, bool> switches;  // bool fields: given or not

  const std::optional<int64_t>& Int(const std::string& field) { return ints[field]; }

  // With `with_alpha` (explain), --alpha may give the match instead of --logical-match-tokens.
  void Register(FlagSet& flags, bool with_alpha = false) {
    const google::protobuf::Descriptor* record = v1::Record::descriptor();
    for (int i = 0; i < record->field_count(); ++i) {
      const google::protobuf::FieldDescriptor* f = record->field(i);
      const std::string& field = f->name();
      const std::string flag = FlagName(field).substr(2), help = RecordFlagHelp(*f);
      const bool required = field == "model" || field == "prompt_tokens" || (field == "logical_match_tokens" && !with_alpha);
      if (field == "tier") {
        flags.String("tier", &tier, help.c_str());
      } else if (field == "state_boundaries") {
        flags.Repeated("state-boundary", &state_boundaries, help.c_str());
      } else if (f->is_repeated() && f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_UINT64) {
        flags.String(flag.c_str(), &number_lists[field], help.c_str());
      } else if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_INT64) {
        flags.Int64(flag.c_str(), &ints[field], help.c_str(), required);
      } else if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE) {
        flags.Double(flag.c_str(), &doubles[field], help.c_str(), required);
      } else if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_STRING && !f->is_repeated()) {
        flags.String(flag.c_str(), &strings[field], help.c_str(), required);
      } else if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_BOOL) {
        flags.Switch(flag.c_str(), &switches[field], help.c_str());
      }
    }
  }

  // INVALID_ARGUMENT naming the flag for a bad tier or state boundary.
  absl::StatusOr<v1::Record> ToProto() const {
    v1::Record r;
    const google::protobuf::Descriptor* record = v1::Record::descriptor();
    const google::protobuf::Reflection* set = r.GetReflection();
    for (const auto& [field, value] : ints) {
      if (value) set->SetInt64(&r, record->FindFieldByName(field), *value);
    }
    for (const auto& [field, value] : doubles) {
      if (value) set->SetDouble(&r, record->FindFieldByName(field), *value);
    }
    for (const auto& [field, value] : strings) set->SetString(&r, record->FindFieldByName(field), value);
    for (const auto& [field, value] : switches) set->SetBool(&r, record->FindFieldByName(field), value);
    if (absl::Status s = SetTier(r, tier, FlagName); !s.ok()) return s;
    for (const auto& [field, text] : number_lists) {
      for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
        uint64_t value;
        if (!absl::SimpleAtoi(item, &value)) {
          return absl::InvalidArgumentError(absl::StrCat(FlagName(field), " = ", Quoted(text), ": ", Quoted(item),
                                                         " is not a whole number in [0, 2^64)"));
        }
        set->AddUInt64(&r, record->FindFieldByName(field), value);
      }
    }
    for (const auto& text : state_boundaries) {
      std::pair<std::string, std::string> kv = absl::StrSplit(text, absl::MaxSplits('=', 1));
      int64_t tokens;
      if (kv.first.empty() || !absl::SimpleAtoi(kv.second, &tokens)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--state-boundary = ", Quoted(text), ": must be GROUP=TOKENS, e.g. kda=768"));
      }
      auto* b = r.add_state_boundaries();
      b->set_state_group(kv.first);
      b->set_boundary_tokens(tokens);
    }
    return r;
  }
};

// A record field as the CLI's flag: --prompt-tokens for prompt_tokens, --state-boundary for the
// repeated state_boundaries.
std::string RecordFlagName(absl::string_view field) {
  return field == "state_boundaries" ? std::string("--state-boundary") : FlagName(field);
}

// A failed Record or Explain call's message, its leading field named as the flag when the server
// said which field it is (trailing metadata kvledger-reject-field); other failures as they are.
std::string RefusalText(const grpc::ClientContext& context, const grpc::Status& status, const Connection& connection) {
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto field = trailers.find(kRejectFieldMetadata);
  if (status.error_code() != grpc::StatusCode::INVALID_ARGUMENT || field == trailers.end()) {
    return DescribeRpcError(status, connection);
  }
  Rejection rejection{RejectReason::kInvalidModel, status.error_message(),
                      std::string(field->second.data(), field->second.size())};
  return rejection.Named(RecordFlagName);
}

// An enum value as the CLI says it: BOUNDARY_SOURCE_STATE_BOUNDARIES of BoundarySource is
// "state boundaries".
std::string EnumText(const google::protobuf::FieldDescriptor& field, int64_t number) {
  const google::protobuf::EnumValueDescriptor* value = field.enum_type()->FindValueByNumber(static_cast<int>(number));
  if (value == nullptr) return absl::StrCat(number);
  std::string prefix;  // BoundarySource: BOUNDARY_SOURCE_
  for (char c : field.enum_type()->name()) {
    if (absl::ascii_isupper(static_cast<unsigned char>(c)) && !prefix.empty()) prefix += '_';
    prefix += absl::ascii_toupper(static_cast<unsigned char>(c));
  }
  absl::string_view name = value->name();
  absl::ConsumePrefix(&name, absl::StrCat(prefix, "_"));
  return absl::StrReplaceAll(absl::AsciiStrToLower(name), {{"_", " "}});
}

// A value in its unit (the Explain rows of lib/accounting/figure_schema.h).
std::string ValueText(ExplainUnit unit, const ExplainValue& v, const google::protobuf::FieldDescriptor& field) {
  if (const auto* text = std::get_if<std::string_view>(&v)) return std::string(*text);
  if (const auto* flag = std::get_if<bool>(&v)) return *flag ? "yes" : "no";
  if (const auto* n = std::get_if<int64_t>(&v)) {
    if (unit == ExplainUnit::kEnum) return EnumText(field, *n);
    return unit == ExplainUnit::kTokens ? absl::StrCat(*n, " tokens") : absl::StrCat(*n);
  }
  const double x = std::get<double>(v);
  switch (unit) {
    case ExplainUnit::kFraction: return absl::StrFormat("%.6f", x);
    case ExplainUnit::kPercent: return absl::StrFormat("%.2f%%", 100 * x);
    case ExplainUnit::kSpeedup: return absl::StrFormat("%.4fx", x);
    case ExplainUnit::kFlops: return absl::StrFormat("%.4g FLOPs", x);
    case ExplainUnit::kBytes: return absl::StrFormat("%.0f bytes", x);
    case ExplainUnit::kByteSeconds: return absl::StrFormat("%.6g byte-seconds", x);
    case ExplainUnit::kSeconds: return absl::StrFormat("%.6g s", x);
    case ExplainUnit::kTokensPerSecond: return absl::StrFormat("%.6g tokens/s", x);
    default: return absl::StrFormat("%.6g", x);
  }
}

// One row of an explain table as the CLI prints it: the value of its field (`path`) in its unit,
// with its share of another field, or why there is none.
template <typename Row>
std::string RowText(const google::protobuf::Message& m, const Row& row, const ExplainFieldPath& path) {
  auto named = [&m](const char* field, std::string* scratch) {
    return GetExplainValue(m, FindExplainField(*m.GetDescriptor(), field), scratch);
  };
  std::string scratch, gate_scratch, whole_scratch;
  const std::optional<ExplainValue> value = GetExplainValue(m, path, &scratch);
  if (!value) return row.when_unset;
  if (row.only_if != nullptr) {
    const std::optional<ExplainValue> gate = named(row.only_if, &gate_scratch);
    if (!gate || !std::get_if<bool>(&*gate) || !std::get<bool>(*gate)) return row.when_unset;
  }
  std::string text = ValueText(row.unit, *value, *path.field);
  if (row.share_of != nullptr) {
    const std::optional<ExplainValue> whole = named(row.share_of, &whole_scratch);
    const double* part_value = std::get_if<double>(&*value);
    const double* whole_value = whole ? std::get_if<double>(&*whole) : nullptr;
    if (part_value != nullptr && whole_value != nullptr && *whole_value > 0) {
      absl::StrAppendFormat(&text, " (%.2f%%)", 100 * *part_value / *whole_value);
    }
  }
  return text;
}

// The layer groups as a table, one column per GroupFigures field.
void PrintGroups(const v1::DerivedFigures& d) {
  const auto columns = ExplainGroupColumns();
  std::vector<std::vector<std::string>> cells(1);
  for (const ExplainGroupColumn& column : columns) cells[0].push_back(column.label);
  for (const v1::GroupFigures& g : d.groups()) {
    std::vector<std::string>& line = cells.emplace_back();
    for (size_t i = 0; i < columns.size(); ++i) line.push_back(RowText(g, columns[i], ExplainGroupColumnPaths()[i]));
  }
  std::vector<size_t> widths(columns.size());
  for (const auto& line : cells) {
    for (size_t i = 0; i < line.size(); ++i) widths[i] = std::max(widths[i], line[i].size());
  }
  std::cout << "\nper layer group (resume boundary = minimum over groups):\n";
  for (const auto& line : cells) {
    std::string text;
    for (size_t i = 0; i < line.size(); ++i) {
      absl::StrAppend(&text, "  ", line[i], std::string(widths[i] - line[i].size(), ' '));
    }
    std::cout << absl::StripTrailingAsciiWhitespace(text) << "\n";
  }
}

void PrintFigures(const v1::DerivedFigures& d) {
  auto row = [](absl::string_view label, const std::string& value) {
    std::cout << absl::StrFormat("%-30s %s\n", label, value);
  };
  row("model", d.model());
  const absl::Span<const ExplainFigure> figures = ExplainFigures();
  for (size_t i = 0; i < figures.size(); ++i) row(figures[i].label, RowText(d, figures[i], ExplainFigurePaths()[i]));
  PrintGroups(d);
}


}  // namespace

namespace {

// Explain offline: the catalog (built-in and --profiles) and the unknown-model policy given, the
// same PrepareExplain and Evaluate the server's JSON API runs. An exit code, or -1 with `figures` set.
int ExplainOffline(const v1::Record& request, const ExplainInputs& inputs, bool match_given,
                   const std::string& profiles, const std::string& unknown_model, v1::DerivedFigures* figures) {
  auto catalog = ProfileCatalog::LoadFile(profiles);
  if (!catalog.ok()) {
    std::cerr << "kvledger explain: " << catalog.status().message() << "\n";
    return kExitBadInput;
  }
  const std::optional<UnknownModelPolicy> policy = UnknownModelPolicyFromName(unknown_model);
  if (!policy) {
    std::cerr << "kvledger explain: --unknown-model = " << Quoted(unknown_model) << ": must be "
              << kUnknownModelPolicyNames << "\n";
    return kExitBadInput;
  }
  ModelRegistry registry(*catalog, 1, *policy);
  auto subject = PrepareExplain(request, inputs, registry, match_given, FlagName);
  if (!subject.ok()) {
    std::cerr << "kvledger explain: " << subject.status().message() << "\n";
    return kExitBadInput;
  }
  auto derived = Evaluate(FactsFromProto(subject->record), subject->model, OfflineEstimateSource());
  if (!derived.ok()) {
    std::cerr << "kvledger explain: " << derived.rejection().Named(RecordFlagName) << "\n";
    return kExitBadInput;
  }
  *figures = FiguresToProto(*derived, request.model());
  return -1;
}

// Explain through the server's Explain RPC (--alpha applied here first).
int ExplainRemote(v1::Record request, const ExplainInputs& inputs, bool match_given, const Connection& connection,
                  v1::DerivedFigures* figures) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const ModelRegistry registry(catalog, 1, UnknownModelPolicy::kGeneric);
  auto subject = PrepareExplain(std::move(request), inputs, registry, match_given, FlagName);
  if (!subject.ok()) {
    std::cerr << "kvledger explain: " << subject.status().message() << "\n";
    return kExitBadInput;
  }
  grpc::ClientContext context;
  connection.SetDeadline(context);
  const grpc::Status status = connection.Stub()->Explain(&context, subject->record, figures);
  if (!status.ok()) {
    std::cerr << "kvledger explain: " << RefusalText(context, status, connection) << "\n";
    return RpcExitCode(status);
  }
  return -1;
}

}  // namespace

int Explain(const Args& args) {
  RecordFlags record;
  Connection connection;
  connection.target.clear();  // offline unless --target is given
  std::string profiles, unknown_model = "reject", alpha;
  ExplainInputs inputs;
  bool json = false;
  FlagSet flags("explain",
                "Every derived figure for one record. Offline with the built-in catalog (and --profiles),\n"
                "or through the server's Explain RPC with --target.");
  record.Register(flags, /*with_alpha=*/true);
  connection.Register(flags);
  flags.String("profiles", &profiles, "offline: profile file adding or overriding built-in profiles");
  flags.String("unknown-model", &unknown_model, "offline: reject | generic");
  flags.String("alpha", &alpha, "the match as a hit ratio: --logical-match-tokens = floor(alpha N), exactly");
  flags.Uint64("kv-page-tokens", &inputs.kv_page_tokens, "offline: cost with this KV page size (what-if)");
  flags.Uint64("recurrent-checkpoint-tokens", &inputs.recurrent_checkpoint_tokens,
               "offline: cost with this recurrent checkpoint interval (what-if)");
  flags.Switch("json", &json, "print the RecordFigures message as JSON");
  if (int code = ParseOrExit(flags, args, "explain"); code >= 0) return code;
  if (!alpha.empty()) inputs.alpha = alpha;
  inputs.tier = record.tier;
  const bool match_given = record.Int("logical_match_tokens").has_value();
  if (!inputs.alpha && !match_given) {
    std::cerr << "kvledger explain: --logical-match-tokens or --alpha: required\n";
    return kExitBadInput;
  }
  if (inputs.what_if() && !connection.target.empty()) {
    std::cerr << "kvledger explain: --kv-page-tokens and --recurrent-checkpoint-tokens: offline only (the server "
                 "costs with its own profiles)\n";
    return kExitBadInput;
  }
  auto request = record.ToProto();
  if (!request.ok()) {
    std::cerr << "kvledger explain: " << request.status().message() << "\n";
    return kExitBadInput;
  }
  v1::DerivedFigures figures;
  const int code = connection.target.empty()
                       ? ExplainOffline(*request, inputs, match_given, profiles, unknown_model, &figures)
                       : ExplainRemote(*request, inputs, match_given, connection, &figures);
  if (code >= 0) return code;
  if (json) {
    std::cout << ProtoToJson(figures, /*null_unset=*/true) << "\n";
  } else {
    PrintFigures(figures);
  }
  return kExitOk;
}

int Send(const Args& args) {
  RecordFlags record;
  Connection connection;
  FlagSet flags("send", "Send one record through the Record RPC.");
  record.Register(flags);
  connection.Register(flags);
  if (int code = ParseOrExit(flags, args, "send"); code >= 0) return code;
  auto request = record.ToProto();
  if (!request.ok()) {
    std::cerr << "kvledger send: " << request.status().message() << "\n";
    return 2;
  }
  grpc::ClientContext context;
  connection.SetDeadline(context);
  v1::RecordResponse response;
  const grpc::Status status = connection.Stub()->Record(&context, *request, &response);
  if (!status.ok()) {
    std::cerr << "kvledger send: " << (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? "rejected: " : "")
              << RefusalText(context, status, connection) << "\n";
    return RpcExitCode(status);
  }
  std::cout << "accepted\n";
  return 0;
}

namespace {

// What a replay counted: rejected records from the server's counts (a reply lists at most
// --max_listed_rejections of them) plus lines that are not records; the listed ones give the
// reasons and the first examples.
struct ReplayTally {
  uint64_t accepted = 0, rejected = 0, blank = 0;
  std::map<std::string, uint64_t> reasons;
  std::vector<std::string> examples;

  void Note(size_t line_number, const std::string& reason, const std::string& message) {
    ++reasons[reason];
    if (examples.size() < 10) examples.push_back(absl::StrCat("line ", line_number, ": ", message));
  }
  void Add(const v1::RecordBatchResponse& response, const std::vector<size_t>& line_of) {
    accepted += response.accepted();
    rejected += response.rejected();
    if (static_cast<uint64_t>(response.rejections_size()) < response.rejected()) {
      reasons["(not listed by the server)"] += response.rejected() - static_cast<uint64_t>(response.rejections_size());
    }
    for (const auto& r : response.rejections()) {
      Note(r.index() < line_of.size() ? line_of[r.index()] : 0, r.reason(), r.message());
    }
  }
  void Print(const std::string& file) const {
    std::cout << "replayed " << file << ": " << accepted << " accepted, " << rejected << " rejected";
    if (blank) std::cout << ", " << blank << " blank lines skipped";
    std::cout << "\n";
    for (const auto& [reason, count] : reasons) std::cout << "  " << reason << ": " << count << "\n";
    for (const auto& example : examples) std::cout << "  " << example << "\n";
  }
};

// Why a line is not a Record, in the trace's terms: a tier written as its label ("host") is named with
// the enum name to write instead (docs/trace-format.md).
std::string UnparseableLine(const std::string& parser_message) {
  const std::string kInvalid = "(tier): invalid value \"";
  const size_t at = parser_message.find(kInvalid);
  if (at != std::string::npos) {
    const size_t start = at + kInvalid.size();
    const std::string value = parser_message.substr(start, parser_message.find('"', start) - start);
    const std::optional<Tier> tier = TierFromLabel(value);
    if (tier == Tier::kNone) return "tier = \"none\": a miss has no tier; leave the field out";
    if (tier) {
      return absl::StrCat("tier = \"", value, "\": write the Tier enum's name, \"TIER_", absl::AsciiStrToUpper(value),
                          "\" (or its number); a miss has no tier");
    }
  }
  if (absl::StrContains(parser_message, "hash_ids") || absl::StrContains(parser_message, "input_length")) {
    return absl::StrCat("not a Record in JSON: ", absl::StripSuffix(parser_message, "."),
                        "; the line is a prefix-reuse trace request (input_length, hash_ids): kvledger plan reads "
                        "traces, kvledger replay reads record files (docs/trace-format.md)");
  }
  return absl::StrCat("not a Record in JSON: ", parser_message);
}

// Lines [start, end) as a batch; `line_of` maps its indices to 1-based line numbers.
v1::RecordBatchRequest ParseLines(const std::vector<std::string>& lines, size_t start, size_t end,
                                  std::vector<size_t>* line_of, ReplayTally& tally) {
  v1::RecordBatchRequest batch;
  for (size_t i = start; i < end; ++i) {
    if (lines[i].find_first_not_of(" \t\r") == std::string::npos) {
      ++tally.blank;
      continue;
    }
    v1::Record record;
    auto status = google::protobuf::util::JsonStringToMessage(lines[i], &record);
    if (!status.ok()) {
      ++tally.rejected;
      tally.Note(i + 1, "unparseable", UnparseableLine(std::string(status.message())));
      continue;
    }
    *batch.add_records() = std::move(record);
    line_of->push_back(i + 1);
  }
  return batch;
}

void ShowProgress(size_t done, size_t total) {
  const int width = 40, filled = static_cast<int>(width * done / total);
  std::cerr << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] " << done << "/" << total
            << " lines" << std::flush;
}

}  // namespace

int Replay(const Args& args) {
  Connection connection;
  std::optional<uint64_t> batch_size;
  FlagSet flags("replay",
                "Send a trace file: one Record per line as JSON (proto field names), in batches.\n"
                "usage: kvledger replay [flags] FILE");
  connection.Register(flags);
  flags.Uint64("batch-size", &batch_size, "records per RecordBatch RPC (default 256)");
  std::vector<std::string> files;
  if (int code = ParseOrExit(flags, args, "replay", &files); code >= 0) return code;
  if (files.size() != 1) {
    std::cerr << "kvledger replay: needs exactly one FILE (see kvledger replay --help)\n";
    return kExitBadInput;
  }
  const size_t per_batch = batch_size.value_or(256);
  if (per_batch < 1 || per_batch > 100000) {
    std::cerr << "kvledger replay: --batch-size = " << per_batch << ": must be in [1, 100000]\n";
    return kExitBadInput;
  }
  std::ifstream in(files[0]);
  if (!in) {
    std::cerr << "kvledger replay: " << files[0] << ": cannot be read\n";
    return kExitBadInput;
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  auto stub = connection.Stub();
  const bool progress = isatty(STDERR_FILENO);
  ReplayTally tally;
  for (size_t start = 0; start < lines.size(); start += per_batch) {
    const size_t end = std::min(lines.size(), start + per_batch);
    std::vector<size_t> line_of;
    const v1::RecordBatchRequest batch = ParseLines(lines, start, end, &line_of, tally);
    if (batch.records_size() > 0) {
      grpc::ClientContext context;
      connection.SetDeadline(context);
      v1::RecordBatchResponse response;
      const grpc::Status status = stub->RecordBatch(&context, batch, &response);
      if (!status.ok()) {
        if (progress) std::cerr << "\n";
        std::cerr << "kvledger replay: " << DescribeRpcError(status, connection) << " (after "
                  << tally.accepted << " accepted; lines from " << start + 1 << " not sent)\n";
        return kExitFailed;
      }
      tally.Add(response, line_of);
    }
    if (progress) ShowProgress(end, lines.size());
  }
  if (progress) std::cerr << "\n";
  tally.Print(files[0]);
  return tally.rejected == 0 ? kExitOk : kExitBadInput;
}

}  // namespace kvledger::cli
