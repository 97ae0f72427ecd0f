// The record codegen (record_codegen.h): RecordFacts, the reject reasons and the wire mapping, as
// text, from a message's descriptor.
#include "lib/wire/record_codegen.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "kvledger/v1/record.pb.h"

namespace kvledger::codegen {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// A shape RecordCodegenProblem lets through but a function below cannot map: a bug here.
[[noreturn]] void Unmappable(const FieldDescriptor& f) {
  std::fprintf(stderr, "kvledger_record_codegen: %s: unmappable\n", f.full_name().c_str());
  std::abort();
}

std::string Camel(const std::string& snake) {
  std::string out;
  bool upper = true;
  for (char c : snake) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out;
}

// The C++ type of a scalar field's value.
std::string ScalarType(const FieldDescriptor& f) {
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: return "int32_t";
    case FieldDescriptor::CPPTYPE_INT64: return "int64_t";
    case FieldDescriptor::CPPTYPE_UINT32: return "uint32_t";
    case FieldDescriptor::CPPTYPE_UINT64: return "uint64_t";
    case FieldDescriptor::CPPTYPE_DOUBLE: return "double";
    case FieldDescriptor::CPPTYPE_FLOAT: return "float";
    case FieldDescriptor::CPPTYPE_BOOL: return "bool";
    default: Unmappable(f);
  }
}

std::string CppName(const std::string& proto_full_name) {
  std::string out = "::";
  for (char c : proto_full_name) out += c == '.' ? std::string("::") : std::string(1, c);
  return out;
}

std::string FactName(const FieldDescriptor& f) { return f.enum_type() != nullptr ? f.name() + "_value" : f.name(); }

bool IsSupported(const FieldDescriptor& f) {
  if (f.is_map()) return false;
  if (f.is_repeated()) return f.cpp_type() != FieldDescriptor::CPPTYPE_STRING && f.enum_type() == nullptr;
  return f.message_type() == nullptr;
}

// One member of a facts struct.
std::string Member(const FieldDescriptor& f) {
  if (!IsSupported(f)) Unmappable(f);
  if (f.is_repeated() && f.message_type() != nullptr) {
    return "  std::vector<" + f.message_type()->name() + "Fact> " + f.name() + ";\n";
  }
  if (f.is_repeated()) return "  absl::Span<const " + ScalarType(f) + "> " + f.name() + ";\n";
  if (f.cpp_type() == FieldDescriptor::CPPTYPE_STRING) return "  absl::string_view " + f.name() + ";\n";
  if (f.enum_type() != nullptr) {
    return "  int " + FactName(f) + " = 0;  // " + f.enum_type()->full_name() + ", raw\n";
  }
  if (f.has_presence()) return "  std::optional<" + ScalarType(f) + "> " + f.name() + ";  // unset: not reported\n";
  const std::string zero = f.cpp_type() == FieldDescriptor::CPPTYPE_BOOL ? "false" : "0";
  return "  " + ScalarType(f) + " " + f.name() + " = " + zero + ";\n";
}

std::string Struct(const Descriptor& message, const std::string& name) {
  std::string out = "// kvledger.v1." + message.name() + ", field by field.\nstruct " + name + " {\n";
  for (int i = 0; i < message.field_count(); ++i) out += Member(*message.field(i));
  return out + "};\n\n";
}


// The statements that copy one singular field between `from` (a message) and `to` (facts), or back.
std::string ScalarFromProto(const FieldDescriptor& f, const std::string& from, const std::string& to) {
  const std::string get = from + "." + f.name() + "()";
  if (f.has_presence() && f.cpp_type() != FieldDescriptor::CPPTYPE_STRING) {
    return "  if (" + from + ".has_" + f.name() + "()) " + to + "." + f.name() + " = " + get + ";\n";
  }
  return "  " + to + "." + FactName(f) + " = " + get + ";\n";
}

std::string ScalarToProto(const FieldDescriptor& f, const std::string& from, const std::string& to) {
  const std::string set = to + "->set_" + f.name() + "(";
  if (f.cpp_type() == FieldDescriptor::CPPTYPE_STRING) return "  " + set + "std::string(" + from + "." + f.name() + "));\n";
  if (f.enum_type() != nullptr) {
    return "  " + set + "static_cast<" + CppName(f.enum_type()->full_name()) + ">(" + from + "." + FactName(f) + "));\n";
  }
  if (f.has_presence()) return "  if (" + from + "." + f.name() + ") " + set + "*" + from + "." + f.name() + ");\n";
  return "  " + set + from + "." + f.name() + ");\n";
}

std::string FromProto(const FieldDescriptor& f) {
  const std::string n = f.name();
  if (!f.is_repeated()) return ScalarFromProto(f, "r", "f");
  if (f.message_type() == nullptr) return "  f." + n + " = absl::MakeConstSpan(r." + n + "().data(), r." + n + "().size());\n";
  std::string out = "  f." + n + ".reserve(r." + n + "_size());\n  for (const auto& m : r." + n + "()) {\n";
  out += "    " + f.message_type()->name() + "Fact& e = f." + n + ".emplace_back();\n";
  for (int i = 0; i < f.message_type()->field_count(); ++i) {
    out += "  " + ScalarFromProto(*f.message_type()->field(i), "m", "e");
  }
  return out + "  }\n";
}

std::string ToProto(const FieldDescriptor& f) {
  const std::string n = f.name();
  if (!f.is_repeated()) return ScalarToProto(f, "f", "r");
  if (f.message_type() == nullptr) return "  r->mutable_" + n + "()->Add(f." + n + ".begin(), f." + n + ".end());\n";
  std::string out = "  for (const auto& e : f." + n + ") {\n    auto* m = r->add_" + n + "();\n";
  for (int i = 0; i < f.message_type()->field_count(); ++i) out += "  " + ScalarToProto(*f.message_type()->field(i), "e", "m");
  return out + "  }\n";
}

}  // namespace

std::string RecordCodegenProblem(const Descriptor& message) {
  for (int i = 0; i < message.field_count(); ++i) {
    const FieldDescriptor& f = *message.field(i);
    if (!IsSupported(f)) {
      return f.full_name() + ": no facts mapping for this shape (a singular message, a map or a repeated string "
             "or enum; lib/wire/record_codegen.h has the table)";
    }
    if (f.options().GetExtension(v1::flag_help).empty()) {
      return f.full_name() + ": no [(flag_help) = \"...\"]: every Record field is a CLI flag and says what it is";
    }
    if (f.message_type() != nullptr) {
      const Descriptor& nested = *f.message_type();
      for (int j = 0; j < nested.field_count(); ++j) {
        const FieldDescriptor& g = *nested.field(j);
        if (g.is_repeated() || g.message_type() != nullptr) {
          return g.full_name() + ": a repeated message's fields must be singular scalars or strings";
        }
      }
    }
  }
  return {};
}


std::string RecordFactsHeader(const Descriptor& record) {
  std::ostringstream out;
  out << "// Generated by kvledger_record_codegen (lib/wire/record_codegen.cc) from " << record.full_name()
      << " in " << record.file()->name() << ". Do not edit: change the message.\n"
      << "#ifndef KVLEDGER_GEN_LIB_ACCOUNTING_RECORD_FACTS_GEN_H_\n#define KVLEDGER_GEN_LIB_ACCOUNTING_RECORD_FACTS_GEN_H_\n\n"
      << "#include <cstdint>\n#include <optional>\n#include <vector>\n\n"
      << "#include \"absl/strings/string_view.h\"\n#include \"absl/types/span.h\"\n\nnamespace kvledger {\n\n";
  for (int i = 0; i < record.field_count(); ++i) {
    const FieldDescriptor& f = *record.field(i);
    if (f.is_repeated() && f.message_type() != nullptr) out << Struct(*f.message_type(), f.message_type()->name() + "Fact");
  }
  out << Struct(record, "RecordFacts");
  out << "// One reject reason per field, in field order: X(enumerator, label, field).\n"
      << "inline constexpr int kRecordFieldCount = " << record.field_count() << ";\n"
      << "#define KVLEDGER_RECORD_FIELD_REASONS(X) \\\n";
  for (int i = 0; i < record.field_count(); ++i) {
    const std::string& name = record.field(i)->name();
    out << "  X(kInvalid" << Camel(name) << ", \"invalid_" << name << "\", \"" << name << "\")"
        << (i + 1 < record.field_count() ? " \\\n" : "\n");
  }
  out << "\n}  // namespace kvledger\n\n#endif  // KVLEDGER_GEN_LIB_ACCOUNTING_RECORD_FACTS_GEN_H_\n";
  return out.str();
}

std::string RecordProtoSource(const Descriptor& record) {
  std::ostringstream out;
  out << "// Generated by kvledger_record_codegen (lib/wire/record_codegen.cc) from " << record.full_name()
      << ". Do not edit: change the message.\n#include <string>\n\n#include \"lib/wire/record_proto.h\"\n\n"
      << "namespace kvledger {\n\nRecordFacts FactsFromProto(const v1::Record& r) {\n  RecordFacts f;\n";
  for (int i = 0; i < record.field_count(); ++i) out << FromProto(*record.field(i));
  out << "  return f;\n}\n\nv1::Record FactsToProto(const RecordFacts& f) {\n  v1::Record record;\n  v1::Record* r = &record;\n";
  for (int i = 0; i < record.field_count(); ++i) out << ToProto(*record.field(i));
  out << "  return record;\n}\n\n}  // namespace kvledger\n";
  return out.str();
}

}  // namespace kvledger::codegen
