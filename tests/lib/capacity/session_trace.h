// A generated trace for the what-if's tests: sessions whose turns extend their prefix.
#ifndef KVLEDGER_TESTS_LIB_CAPACITY_SESSION_TRACE_H_
#define KVLEDGER_TESTS_LIB_CAPACITY_SESSION_TRACE_H_

#include <cstdint>
#include <random>
#include <vector>

#include "lib/planning/trace.h"

namespace kvledger {

// A trace of sessions whose turns extend their prefix: chained ids, shared system prompts, partial
// last blocks, and misses.
inline std::vector<TraceRequest> SessionTrace(uint64_t seed, int requests, uint64_t block) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int64_t>> sessions(40);
  int64_t next_id = 1000;
  std::vector<TraceRequest> trace;
  for (int r = 0; r < requests; ++r) {
    auto& chain = sessions[rng() % sessions.size()];
    if (chain.empty()) chain.push_back(static_cast<int64_t>(rng() % 3));  // one of three system prompts
    if (rng() % 8 == 0) chain.resize(1);                                  // a new conversation
    for (uint64_t grow = 1 + rng() % 4; grow > 0; --grow) chain.push_back(next_id++);
    TraceRequest request;
    request.input_length = static_cast<int64_t>(chain.size() * block - rng() % block);
    request.output_length = static_cast<int64_t>(rng() % 50);
    request.hash_ids = chain;
    request.line = static_cast<size_t>(r + 1);
    trace.push_back(request);
  }
  return trace;
}

}  // namespace kvledger

#endif  // KVLEDGER_TESTS_LIB_CAPACITY_SESSION_TRACE_H_
