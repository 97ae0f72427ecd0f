// A prefix-reuse request trace, one JSON object a line, in one of the formats operators can export
// (docs/planning.md, "The trace"): Mooncake's {"timestamp": ms, "input_length", "output_length",
// "hash_ids": [block ids]}, Alibaba Bailian's (timestamps in seconds, 16-token blocks whose ids name the
// block alone, not its prefix), LMCache's lookup-hash logs (one line per lookup: seconds, request id,
// chunk size, sequence length, hex chunk hashes), or WEKA's agentic-coding conversations (a whole
// conversation a line, its requests and sub-agents' requests nested, 64-token chained ids local to it). Each becomes TraceRequests whose equal ids are the same
// reusable prefix, block by block. Every problem is named by its line, its field, the value and the rule.
#ifndef KVLEDGER_LIB_PLANNING_TRACE_H_
#define KVLEDGER_LIB_PLANNING_TRACE_H_

#include <cstdint>
#include <functional>
#include <istream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/base/enum_table.h"

namespace kvledger {

inline constexpr uint64_t kDefaultTraceBlockTokens = 512;  // Mooncake's block

enum class TraceFormat { kAuto, kMooncake, kBailian, kLmcacheLookups, kWekaConversations };
inline constexpr EnumTable<TraceFormat, 5> kTraceFormats = {{
    {TraceFormat::kAuto, "auto"},
    {TraceFormat::kMooncake, "mooncake"},
    {TraceFormat::kBailian, "bailian"},
    {TraceFormat::kLmcacheLookups, "lmcache-lookups"},
    {TraceFormat::kWekaConversations, "weka-conversations"},
}};
// WEKA's conversations carry no start time: the k-th conversation read starts at k times this.
inline constexpr double kWekaSessionGapSeconds = 60;
static_assert(IsDense(kTraceFormats));

// A format named by its label; INVALID_ARGUMENT "FLAG = "TEXT": must be one of auto, mooncake, ..." else.
absl::StatusOr<TraceFormat> ParseTraceFormat(absl::string_view flag, absl::string_view text);

struct TraceRequest {
  int64_t timestamp_ms = 0;
  int64_t input_length = 0;   // >= 1
  int64_t output_length = 0;  // >= 0
  std::vector<int64_t> hash_ids;  // ceil(input_length / block_tokens) ids, each >= 0
  size_t line = 0;                // 1-based line of the trace it came from
};

// One Mooncake line (without its newline) as a request, checked on its own: every field present once with an
// integer in range, hash_ids exactly as many blocks as the input needs. Unknown fields are skipped.
// INVALID_ARGUMENT "line N: FIELD = VALUE: RULE" otherwise.
absl::StatusOr<TraceRequest> ParseTraceLine(absl::string_view text, size_t line, uint64_t block_tokens);

struct TraceReadResult {
  std::vector<TraceRequest> requests;
  std::vector<std::string> errors;  // the first kMaxListedErrors problems, in line order
  size_t error_count = 0;           // all of them
  size_t blank_lines = 0;
  TraceFormat format = TraceFormat::kAuto;  // the format read: given, or told from the first line's fields
  uint64_t block_tokens = 0;                // tokens per block of every request's ids
  // LMCache: lookups of a request id already read (a scheduler asks again while the request waits).
  // The first lookup is the request; the repeats are counted here, not planned.
  size_t repeated_lookups = 0;
  size_t empty_prompts = 0;  // WEKA: requests with no input tokens (nothing to plan), counted here
  static constexpr size_t kMaxListedErrors = 10;

  // OK when there is at least one request and no problem; else INVALID_ARGUMENT "NAME: N problems in
  // the trace", then the listed ones a line each (or "NAME: the trace holds no requests").
  absl::Status Check(absl::string_view name) const;
};

// What a trace may cost to read: a line past line_bytes or a trace past total_bytes stops the reading
// with a problem naming the limit, before the memory is spent. The defaults fit the largest shared
// traces many times over (the converted WEKA trace, 26 MB with lines up to ~80 kB; its conversation
// files, each one line, under 4 MiB apiece); the server holds less.
struct TraceLimits {
  size_t line_bytes = size_t{64} << 20;  // a WEKA conversation is one line
  uint64_t total_bytes = uint64_t{4} << 30;
};

struct TraceReadOptions {
  TraceFormat format = TraceFormat::kAuto;  // kAuto: told from the first line's fields
  // Tokens per block; 0: the format's own (Mooncake and WEKA 512, Bailian 16, LMCache each line's
  // chunk_size).
  uint64_t block_tokens = 0;
  TraceLimits limits;
};

// Reads a whole trace. Besides each line's own checks: timestamps must not go backwards, and a last
// line without its newline that does not parse is reported as truncated. Bailian's ids are chained
// (a block's id becomes one for its whole prefix) and LMCache's hashes numbered, so that equal ids mean
// an equal prefix in every format. `progress`, when given, is called with the bytes read so far about
// every 1,000 lines.
TraceReadResult ReadTrace(std::istream& in, const TraceReadOptions& options,
                          const std::function<void(uint64_t bytes)>& progress = nullptr);

// Each request's ids at `block` tokens a block, `block` dividing kDefaultTraceBlockTokens: a
// 512-token block's id becomes that many ids chained under it, as an engine with smaller blocks would
// hash the same prompt (one id per started block of the prompt).
std::vector<std::vector<uint64_t>> ReblockedIds(const std::vector<TraceRequest>& trace, uint64_t block);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_PLANNING_TRACE_H_
