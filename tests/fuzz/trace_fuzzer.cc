// libFuzzer target: arbitrary bytes as a prefix-reuse trace (any format, told from its first line),
// through ReadTrace with small limits. Under ASan/UBSan no input crashes; every line is a request, a blank line or a
// counted problem, and no request outlives the limits.
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "lib/planning/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  const kvledger::TraceReadOptions options{kvledger::TraceFormat::kAuto, 0, kvledger::TraceLimits{4096, 1 << 16}};
  const kvledger::TraceReadResult read = kvledger::ReadTrace(in, options);
  if (read.errors.size() > read.error_count) std::abort();
  if (read.errors.size() > kvledger::TraceReadResult::kMaxListedErrors) std::abort();
  for (size_t i = 1; i < read.requests.size(); ++i) {
    if (read.requests[i].timestamp_ms < read.requests[i - 1].timestamp_ms) std::abort();  // order is checked
  }
  if (read.requests.size() * 2 > size + 2) std::abort();  // a request takes bytes of its own
  for (const kvledger::TraceRequest& r : read.requests) {  // every block of the prompt has its id
    if (r.hash_ids.size() * read.block_tokens < static_cast<uint64_t>(r.input_length)) std::abort();
  }
  return 0;
}
