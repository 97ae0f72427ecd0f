// libFuzzer target: arbitrary bytes as a prefix-reuse trace (Mooncake JSONL), through ReadTrace with
// small limits. Under ASan/UBSan no input crashes; every line is a request, a blank line or a
// counted problem, and no request outlives the limits.
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "lib/planning/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  const kvledger::TraceLimits limits{4096, 1 << 16};
  const kvledger::TraceReadResult read = kvledger::ReadTrace(in, 512, nullptr, limits);
  if (read.errors.size() > read.error_count) std::abort();
  if (read.errors.size() > kvledger::TraceReadResult::kMaxListedErrors) std::abort();
  for (size_t i = 1; i < read.requests.size(); ++i) {
    if (read.requests[i].timestamp_ms < read.requests[i - 1].timestamp_ms) std::abort();  // order is checked
  }
  if (read.requests.size() * 2 > size + 2) std::abort();  // a request takes bytes of its own
  return 0;
}
