// libFuzzer target: arbitrary bytes as what a client sent on the HTTP port, through the request-head
// parser (server/http/request_parser) and the query-string readers. Under ASan/UBSan no input
// crashes; a head that parses has a method and a path, and is consumed from the pending bytes.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/http/request_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string pending(reinterpret_cast<const char*>(data), size);
  const size_t end = kvledger::HeadEnd(pending);
  if (end == std::string::npos) return 0;
  if (end > pending.size()) std::abort();
  kvledger::ParsedHead head;
  const size_t before = pending.size();
  if (!kvledger::ParseHead(&pending, &head).ok()) return 0;
  if (head.method.empty() || pending.size() >= before) std::abort();
  for (const std::string& name : kvledger::QueryParamNames(head.request.query)) {
    if (!kvledger::QueryParam(head.request.query, name, 0).has_value()) std::abort();
  }
  return 0;
}
