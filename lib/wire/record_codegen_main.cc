// kvledger_record_codegen OUT_DIR: writes OUT_DIR/lib/accounting/record_facts.gen.h and
// OUT_DIR/lib/wire/record_proto.gen.cc from kvledger.v1.Record (record_codegen.h); a field it cannot
// map stops the build with the field's name.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "kvledger/v1/record.pb.h"
#include "lib/wire/record_codegen.h"

namespace {

// Writes only when the text changed, so an unchanged message rebuilds nothing.
bool Write(const std::string& path, const std::string& text) {
  std::ifstream in(path);
  std::stringstream old;
  old << in.rdbuf();
  if (in && old.str() == text) return true;
  std::ofstream out(path, std::ios::trunc);
  out << text;
  return static_cast<bool>(out.flush());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kvledger_record_codegen OUT_DIR\n");
    return 2;
  }
  const google::protobuf::Descriptor& record = *kvledger::v1::Record::descriptor();
  if (const std::string problem = kvledger::codegen::RecordCodegenProblem(record); !problem.empty()) {
    std::fprintf(stderr, "kvledger_record_codegen: %s\n", problem.c_str());
    return 1;
  }
  const std::string dir = argv[1];
  const std::pair<std::string, std::string> files[] = {
      {dir + "/lib/accounting/record_facts.gen.h", kvledger::codegen::RecordFactsHeader(record)},
      {dir + "/lib/wire/record_proto.gen.cc", kvledger::codegen::RecordProtoSource(record)}};
  for (const auto& [path, text] : files) {
    if (!Write(path, text)) {
      std::fprintf(stderr, "kvledger_record_codegen: cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}
