#include "lib/planning/trace.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <iterator>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "lib/accounting/validation.h"
#include "lib/base/quote.h"

namespace kvledger {
namespace {

// A cursor over one line of JSON: just enough for a flat object of integers and integer arrays,
// skipping the values of fields it does not know.
class Cursor {
 public:
  explicit Cursor(absl::string_view text) : text_(text) {}

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\r')) ++pos_;
  }
  bool Eat(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ == text_.size();
  }
  char Peek() {
    SkipSpace();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  // A string's contents (escapes kept as written), or nullopt.
  std::optional<absl::string_view> String() {
    if (!Eat('"')) return std::nullopt;
    const size_t start = pos_;
    for (; pos_ < text_.size(); ++pos_) {
      if (text_[pos_] == '\\') {
        if (pos_ + 1 == text_.size()) break;  // a backslash ending the line escapes nothing
        ++pos_;
      } else if (text_[pos_] == '"') {
        return text_.substr(start, pos_++ - start);
      }
    }
    pos_ = text_.size();
    return std::nullopt;
  }
  // The characters of a number as written (possibly not an integer), or empty.
  absl::string_view NumberText() {
    SkipSpace();
    const size_t start = pos_;
    while (pos_ < text_.size() && InNumber(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }
  // Skips any JSON value; false when it is not one.
  bool SkipValue(int depth = 0) {
    const char c = Peek();
    if (c == '"') return String().has_value();
    if (c == '[' || c == '{') {
      if (depth > 32) return false;
      ++pos_;
      const char close = c == '[' ? ']' : '}';
      if (Eat(close)) return true;
      do {
        if (c == '{' && !(String() && Eat(':'))) return false;
        if (!SkipValue(depth + 1)) return false;
      } while (Eat(','));
      return Eat(close);
    }
    for (absl::string_view word : {"true", "false", "null"}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return true;
      }
    }
    return !NumberText().empty();
  }
  // What the cursor is looking at, for messages.
  std::string Here() const { return Quoted(text_.substr(pos_, 16)); }

 private:
  static bool InNumber(char c) {
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

absl::Status Problem(size_t line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", what));
}

// The integer `text` writes, or nullopt. Up to 18 plain digits are read here: a trace's millions of
// ids are mostly that.
std::optional<int64_t> IntegerOf(absl::string_view text) {
  int64_t value = 0;
  if (!text.empty() && text.size() <= 18 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    for (const char c : text) value = value * 10 + (c - '0');
    return value;
  }
  if (text.empty() || !absl::SimpleAtoi(text, &value)) return std::nullopt;
  return value;
}

absl::Status NotAnInteger(const Cursor& cursor, size_t line, absl::string_view field, absl::string_view text) {
  return Problem(line, absl::StrCat(field, " = ", text.empty() ? cursor.Here() : std::string(text),
                                    ": must be an integer"));
}

// An integer field's value; INVALID_ARGUMENT naming `field` otherwise.
absl::StatusOr<int64_t> Integer(Cursor& cursor, size_t line, absl::string_view field) {
  const absl::string_view text = cursor.NumberText();
  const std::optional<int64_t> value = IntegerOf(text);
  if (!value) return NotAnInteger(cursor, line, field, text);
  return *value;
}

// Calls `field` with each key of the object at the cursor: it reads the value, or returns false to
// have it skipped.
absl::Status ForEachField(Cursor& cursor, size_t line,
                          absl::FunctionRef<absl::StatusOr<bool>(absl::string_view key)> field) {
  if (!cursor.Eat('{')) return Problem(line, absl::StrCat("not a JSON object: starts ", cursor.Here()));
  if (cursor.Eat('}')) return absl::OkStatus();
  do {
    auto key = cursor.String();
    if (!key || !cursor.Eat(':')) return Problem(line, absl::StrCat("expected \"field\": at ", cursor.Here()));
    auto read = field(*key);
    if (!read.ok()) return read.status();
    if (!*read && !cursor.SkipValue()) return Problem(line, absl::StrCat(*key, ": not a JSON value at ", cursor.Here()));
  } while (cursor.Eat(','));
  if (!cursor.Eat('}')) return Problem(line, absl::StrCat("expected , or } at ", cursor.Here()));
  return absl::OkStatus();
}

// Calls `element` for each element of the array `field` at the cursor; it reads the element.
absl::Status ForEachElement(Cursor& cursor, size_t line, absl::string_view field,
                            absl::FunctionRef<absl::Status()> element) {
  if (!cursor.Eat('[')) return Problem(line, absl::StrCat(field, " = ", cursor.Here(), ": must be an array"));
  if (cursor.Eat(']')) return absl::OkStatus();
  do {
    if (absl::Status s = element(); !s.ok()) return s;
  } while (cursor.Eat(','));
  if (!cursor.Eat(']')) return Problem(line, absl::StrCat(field, ": ", cursor.Here(), ": expected , or ]"));
  return absl::OkStatus();
}

absl::Status HashIds(Cursor& cursor, size_t line, std::vector<int64_t>& ids) {
  return ForEachElement(cursor, line, "hash_ids", [&]() -> absl::Status {
    const absl::string_view text = cursor.NumberText();  // the element's name is built only for a message
    const std::optional<int64_t> id = IntegerOf(text);
    if (!id) return NotAnInteger(cursor, line, absl::StrCat("hash_ids[", ids.size(), "]"), text);
    if (*id < 0) return Problem(line, absl::StrCat("hash_ids[", ids.size(), "] = ", *id, ": must be >= 0"));
    ids.push_back(*id);
    return absl::OkStatus();
  });
}

// A number of seconds (as Bailian, LMCache and WEKA write them), in [0, 9e12].
absl::StatusOr<double> Seconds(Cursor& cursor, size_t line, absl::string_view field) {
  const absl::string_view text = cursor.NumberText();
  double seconds;
  if (text.empty() || !absl::SimpleAtod(text, &seconds) || !std::isfinite(seconds)) {
    return Problem(line, absl::StrCat(field, " = ", text.empty() ? cursor.Here() : std::string(text),
                                      ": must be a number of seconds"));
  }
  if (seconds < 0 || seconds > 9e12) {
    return Problem(line, absl::StrCat(field, " = ", text, ": must be in [0, 9e12] seconds"));
  }
  return seconds;
}

int64_t ToMilliseconds(double seconds) { return static_cast<int64_t>(std::llround(seconds * 1000)); }

absl::StatusOr<int64_t> Milliseconds(Cursor& cursor, size_t line, absl::string_view field) {
  auto seconds = Seconds(cursor, line, field);
  if (!seconds.ok()) return seconds.status();
  return ToMilliseconds(*seconds);
}

absl::Status Strings(Cursor& cursor, size_t line, absl::string_view field, std::vector<absl::string_view>& out) {
  return ForEachElement(cursor, line, field, [&]() -> absl::Status {
    auto text = cursor.String();
    if (!text || text->empty()) {
      return Problem(line, absl::StrCat(field, "[", out.size(), "] = ", cursor.Here(), ": must be a non-empty string"));
    }
    out.push_back(*text);
    return absl::OkStatus();
  });
}

// What a format calls its fields, and what its ids mean. One row per format; the reader, the
// detection and the messages all read it.
struct FormatSpec {
  TraceFormat format;
  bool seconds;  // timestamps in seconds (else integer milliseconds)
  absl::string_view input, output, ids, block, request_id;  // field names; empty: the format has none
  bool string_ids;  // ids are strings (hex hashes) rather than integers
  bool chained;     // an id names its block's whole prefix (else the block alone)
  uint64_t block_tokens;  // the format's block; 0: each line's `block` field says
  bool conversations;     // a line is a whole conversation of nested requests (WekaReader reads it)
};
constexpr FormatSpec kSpecs[] = {
    {TraceFormat::kMooncake, false, "input_length", "output_length", "hash_ids", "", "", false, true,
     kDefaultTraceBlockTokens, false},
    {TraceFormat::kBailian, true, "input_length", "output_length", "hash_ids", "", "", false, false, 16, false},
    {TraceFormat::kLmcacheLookups, true, "seq_len", "", "chunk_hashes", "chunk_size", "request_id", true, true, 0,
     false},
    {TraceFormat::kWekaConversations, true, "in", "out", "hash_ids", "block_size", "", false, true,
     kDefaultTraceBlockTokens, true},
};

const FormatSpec& SpecOf(TraceFormat format) {
  for (const FormatSpec& spec : kSpecs) {
    if (spec.format == format) return spec;
  }
  return kSpecs[0];
}

// One line as its format wrote it, before its ids are made comparable across formats.
struct RawLine {
  TraceRequest request;                    // hash_ids filled for integer ids
  std::vector<absl::string_view> hashes;   // string ids, views into the line
  int64_t block_tokens = 0;                // the line's own block size (LMCache)
  std::optional<absl::string_view> request_id;
};

enum Slot { kTimestamp, kInput, kOutput, kIds, kBlock, kRequestId, kSlotCount };

// Reads the value of `key` (slot `s`) into `raw`.
absl::Status ReadSlot(Slot s, absl::string_view key, Cursor& cursor, size_t line, const FormatSpec& spec,
                      RawLine& raw) {
  if (s == kIds) {
    return spec.string_ids ? Strings(cursor, line, key, raw.hashes) : HashIds(cursor, line, raw.request.hash_ids);
  }
  if (s == kRequestId) {
    raw.request_id = cursor.String();
    return raw.request_id ? absl::OkStatus() : Problem(line, absl::StrCat(key, " = ", cursor.Here(), ": must be a string"));
  }
  auto value = s == kTimestamp && spec.seconds ? Milliseconds(cursor, line, key) : Integer(cursor, line, key);
  if (!value.ok()) return value.status();
  (s == kTimestamp ? raw.request.timestamp_ms
   : s == kInput   ? raw.request.input_length
   : s == kOutput  ? raw.request.output_length
                   : raw.block_tokens) = *value;
  return absl::OkStatus();
}

constexpr absl::string_view kRecordHint =
    "; the line is a kvledger record (prompt_tokens, ...): kvledger replay reads record files, kvledger plan "
    "reads prefix-reuse traces (docs/trace-format.md)";

// One line of `spec`'s format, every field it needs present once with a value in range.
absl::StatusOr<RawLine> ParseLine(absl::string_view text, size_t line, const FormatSpec& spec) {
  RawLine raw;
  raw.request.line = line;
  const std::array<absl::string_view, kSlotCount> names = {"timestamp", spec.input, spec.output,
                                                           spec.ids,    spec.block, spec.request_id};
  std::array<bool, kSlotCount> seen{};
  bool record_like = false;  // a key of a kvledger record: the file is for replay
  Cursor cursor(text);
  absl::Status read = ForEachField(cursor, line, [&](absl::string_view key) -> absl::StatusOr<bool> {
    size_t s = 0;
    while (s < kSlotCount && (names[s].empty() || names[s] != key)) ++s;
    record_like = record_like || key == "prompt_tokens" || key == "logical_match_tokens";
    if (s == kSlotCount) return false;
    if (seen[s]) return Problem(line, absl::StrCat(key, ": given twice"));
    seen[s] = true;
    if (absl::Status st = ReadSlot(static_cast<Slot>(s), key, cursor, line, spec, raw); !st.ok()) return st;
    return true;
  });
  if (!read.ok()) return read;
  if (!cursor.AtEnd()) return Problem(line, absl::StrCat("text after the object: ", cursor.Here()));
  for (size_t s = 0; s < kSlotCount; ++s) {
    if (!seen[s] && !names[s].empty() && s != kRequestId) {
      return Problem(line, absl::StrCat(names[s], ": missing (required)", record_like ? kRecordHint : ""));
    }
  }
  const TraceRequest& r = raw.request;
  if (r.timestamp_ms < 0) return Problem(line, absl::StrCat("timestamp = ", r.timestamp_ms, ": must be >= 0"));
  if (r.input_length < 1) return Problem(line, absl::StrCat(spec.input, " = ", r.input_length, ": must be >= 1"));
  if (r.output_length < 0) return Problem(line, absl::StrCat(spec.output, " = ", r.output_length, ": must be >= 0"));
  if (!spec.block.empty() && (raw.block_tokens < 1 || raw.block_tokens > kMaxBlockTokens)) {
    return Problem(line, absl::StrCat(spec.block, " = ", raw.block_tokens, ": must be in [1, ", kMaxBlockTokens, "]"));
  }
  return raw;
}

// The ids a request of `input_length` tokens must carry at `block_tokens` a block: exactly one per
// block, the last possibly partial; LMCache's may leave out a partial last chunk (it hashes full chunks
// unless told to save partial ones), which then gets an id of its own.
absl::Status CheckBlockCount(const RawLine& raw, const FormatSpec& spec, uint64_t block_tokens) {
  const TraceRequest& r = raw.request;
  const size_t have = spec.string_ids ? raw.hashes.size() : r.hash_ids.size();
  const uint64_t need = (static_cast<uint64_t>(r.input_length) + block_tokens - 1) / block_tokens;
  const uint64_t full = static_cast<uint64_t>(r.input_length) / block_tokens;
  if (have == need || (spec.string_ids && have == full)) return absl::OkStatus();
  return Problem(r.line, absl::StrFormat("%s has %d blocks: must be ceil(%s %d / %d) = %d, one per block of the "
                                         "prompt (is %d tokens the trace's block size? kvledger plan's --block-tokens "
                                         "and kvledger-server's --trace_block_tokens set it)",
                                         spec.ids, have, spec.input, r.input_length, block_tokens, need, block_tokens));
}

// Makes every format's ids mean the same: equal ids, equal prefix up to that block.
class IdMapper {
 public:
  explicit IdMapper(const FormatSpec& spec) : spec_(spec) {}

  void Map(RawLine& raw, uint64_t block_tokens) {
    std::vector<int64_t>& ids = raw.request.hash_ids;
    if (spec_.string_ids) {  // numbered in order of first use; a partial last chunk left unhashed is new
      for (absl::string_view hash : raw.hashes) ids.push_back(Intern(hashes_, std::string(hash)));
      if (ids.size() * block_tokens < static_cast<uint64_t>(raw.request.input_length)) ids.push_back(next_++);
    } else if (!spec_.chained) {  // an id per (prefix, block) pair
      int64_t prefix = -1;
      for (int64_t& id : ids) id = prefix = Intern(chain_, std::pair{prefix, id});
    }
  }

 private:
  template <typename Map, typename Key>
  int64_t Intern(Map& map, Key&& key) {
    auto [it, added] = map.try_emplace(std::forward<Key>(key), next_);
    if (added) ++next_;
    return it->second;
  }

  const FormatSpec& spec_;
  absl::flat_hash_map<std::pair<int64_t, int64_t>, int64_t> chain_;
  absl::flat_hash_map<std::string, int64_t> hashes_;
  int64_t next_ = 0;
};

// WEKA's conversations: a line is {"id", "block_size", "requests": [request | sub-agent]}, a request
// {"t": seconds from the conversation's start, "in", "out", "hash_ids": [floor(in / block_size) ids]},
// a sub-agent {"t", "requests": [requests timed from its own start]}. Ids are chained and local to
// the conversation.
struct WekaRequest {
  double seconds = 0;
  std::optional<int64_t> in, out;
  std::vector<int64_t> ids;
};

struct WekaConversation {
  int64_t block_size = 0;
  std::vector<WekaRequest> requests;  // sub-agents' flattened in place, in the order written
};

absl::Status WekaRequests(Cursor& cursor, size_t line, int depth, std::vector<WekaRequest>& out) {
  return ForEachElement(cursor, line, "requests", [&]() -> absl::Status {
    WekaRequest r;
    std::vector<WekaRequest> nested;
    bool subagent = false;
    const std::string where = absl::StrCat(depth > 0 ? "a sub-agent's " : "", "requests[", out.size(), "]");
    absl::Status s = ForEachField(cursor, line, [&](absl::string_view key) -> absl::StatusOr<bool> {
      absl::Status read = absl::OkStatus();
      if (key == "t") {
        auto seconds = Seconds(cursor, line, absl::StrCat(where, ".t"));
        read = seconds.status();
        if (seconds.ok()) r.seconds = *seconds;
      } else if (key == "in" || key == "out") {
        auto value = Integer(cursor, line, absl::StrCat(where, ".", key));
        read = value.status();
        if (value.ok()) (key == "in" ? r.in : r.out) = *value;
      } else if (key == "hash_ids") {
        read = HashIds(cursor, line, r.ids);
      } else if (key == "requests") {
        if (depth > 0) return Problem(line, absl::StrCat(where, ": a sub-agent inside a sub-agent"));
        subagent = true;
        read = WekaRequests(cursor, line, depth + 1, nested);
      } else {
        return false;
      }
      if (!read.ok()) return read;
      return true;
    });
    if (!s.ok()) return s;
    if (subagent) {
      for (WekaRequest& q : nested) q.seconds += r.seconds;
      std::move(nested.begin(), nested.end(), std::back_inserter(out));
      return absl::OkStatus();
    }
    for (auto [value, name] : {std::pair{&r.in, "in"}, std::pair{&r.out, "out"}}) {
      if (!*value) return Problem(line, absl::StrCat(where, ".", name, ": missing (required)"));
      if (**value < 0) return Problem(line, absl::StrCat(where, ".", name, " = ", **value, ": must be >= 0"));
    }
    out.push_back(std::move(r));
    return absl::OkStatus();
  });
}

absl::StatusOr<WekaConversation> ParseWekaConversation(absl::string_view text, size_t line) {
  WekaConversation c;
  bool has_requests = false;
  Cursor cursor(text);
  absl::Status s = ForEachField(cursor, line, [&](absl::string_view key) -> absl::StatusOr<bool> {
    if (key == "block_size") {
      auto value = Integer(cursor, line, key);
      if (!value.ok()) return value.status();
      c.block_size = *value;
      return true;
    }
    if (key != "requests") return false;
    has_requests = true;
    if (absl::Status read = WekaRequests(cursor, line, 0, c.requests); !read.ok()) return read;
    return true;
  });
  if (!s.ok()) return s;
  if (!cursor.AtEnd()) return Problem(line, absl::StrCat("text after the object: ", cursor.Here()));
  if (!has_requests) return Problem(line, "requests: missing (required)");
  if (c.block_size < 1 || c.block_size > kMaxBlockTokens) {
    return Problem(line, absl::StrCat("block_size = ", c.block_size, ": must be in [1, ", kMaxBlockTokens, "]"));
  }
  return c;
}

// Conversations into requests as docs/planning.md says: the k-th starts at k x kWekaSessionGapSeconds,
// a block of the trace is named by its last source block's id (chained, so it names the prefix), ids
// of two conversations never meet, a partial last block gets an id of its own, and all requests are
// ordered by time at the end (conversations overlap).
class WekaReader {
 public:
  absl::Status Read(absl::string_view text, size_t line, uint64_t block_tokens, TraceReadResult& result) {
    auto c = ParseWekaConversation(text, line);
    if (!c.ok()) return c.status();
    const uint64_t source = static_cast<uint64_t>(c->block_size);
    if (block_tokens % source != 0) {
      return Problem(line, absl::StrCat("block_size = ", source, ": the trace's blocks of ", block_tokens,
                                        " tokens must be a multiple of it (--block-tokens)"));
    }
    const uint64_t per_block = block_tokens / source;
    const double start = static_cast<double>(conversations_) * kWekaSessionGapSeconds;
    std::vector<Pending> mine;
    size_t empty = 0;
    for (size_t i = 0; i < c->requests.size(); ++i) {
      const WekaRequest& q = c->requests[i];
      const uint64_t in = static_cast<uint64_t>(*q.in);
      if (in == 0) {
        ++empty;
        continue;
      }
      if (q.ids.size() != in / source) {
        return Problem(line, absl::StrFormat("requests[%d]: hash_ids has %d ids: must be floor(in %d / block_size %d) "
                                             "= %d (whole source blocks only)", i, q.ids.size(), in, source, in / source));
      }
      TraceRequest r;
      r.line = line;
      r.timestamp_ms = ToMilliseconds(start + q.seconds);
      r.input_length = *q.in;
      r.output_length = *q.out;
      for (uint64_t j = 0; j < in / block_tokens; ++j) r.hash_ids.push_back(Intern(q.ids[(j + 1) * per_block - 1]));
      if (in % block_tokens != 0) r.hash_ids.push_back(next_++);
      mine.push_back({conversations_, i, std::move(r)});
    }
    result.empty_prompts += empty;  // only for a conversation read whole
    std::move(mine.begin(), mine.end(), std::back_inserter(pending_));
    ++conversations_;
    return absl::OkStatus();
  }

  void Finish(TraceReadResult& result) {
    std::stable_sort(pending_.begin(), pending_.end(), [](const Pending& a, const Pending& b) {
      return std::tie(a.request.timestamp_ms, a.conversation, a.order) <
             std::tie(b.request.timestamp_ms, b.conversation, b.order);
    });
    for (Pending& p : pending_) result.requests.push_back(std::move(p.request));
    pending_.clear();
  }

 private:
  struct Pending {
    size_t conversation, order;
    TraceRequest request;
  };

  int64_t Intern(int64_t local) {
    auto [it, added] = ids_.try_emplace(std::pair{conversations_, local}, next_);
    if (added) ++next_;
    return it->second;
  }

  size_t conversations_ = 0;
  absl::flat_hash_map<std::pair<size_t, int64_t>, int64_t> ids_;
  int64_t next_ = 0;
  std::vector<Pending> pending_;
};

// The format a line's fields say it is in, or a problem listing what it holds.
absl::StatusOr<TraceFormat> DetectFormat(absl::string_view text, size_t line) {
  std::vector<std::string> keys;
  Cursor cursor(text);
  // A malformed line still names the keys before the fault; ParseLine then reports the fault.
  ForEachField(cursor, line, [&keys](absl::string_view key) -> absl::StatusOr<bool> {
    keys.emplace_back(key);
    return false;
  }).IgnoreError();
  auto has = [&keys](absl::string_view k) { return std::find(keys.begin(), keys.end(), k) != keys.end(); };
  if (has("chunk_hashes")) return TraceFormat::kLmcacheLookups;
  if (has("requests") && has("block_size")) return TraceFormat::kWekaConversations;
  if (has("hash_ids") && (has("chat_id") || has("parent_chat_id"))) return TraceFormat::kBailian;
  if (has("hash_ids")) return TraceFormat::kMooncake;
  const bool record_like = has("prompt_tokens") || has("logical_match_tokens");
  return Problem(line, absl::StrCat("cannot tell the trace's format from its fields (", absl::StrJoin(keys, ", "),
                                    "): Mooncake's lines have hash_ids, Bailian's chat_id and hash_ids, LMCache's "
                                    "lookup logs chunk_hashes, WEKA's conversations requests and block_size; "
                                    "--format names it",
                                    record_like ? kRecordHint : ""));
}

}  // namespace

absl::StatusOr<TraceFormat> ParseTraceFormat(absl::string_view flag, absl::string_view text) {
  if (const std::optional<TraceFormat> format = ValueOf(kTraceFormats, text)) return *format;
  std::vector<absl::string_view> labels;
  for (const auto& row : kTraceFormats) labels.push_back(row.label);
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " = ", Quoted(text), ": must be one of ", absl::StrJoin(labels, ", ")));
}

absl::StatusOr<TraceRequest> ParseTraceLine(absl::string_view text, size_t line, uint64_t block_tokens) {
  const FormatSpec& spec = SpecOf(TraceFormat::kMooncake);
  auto raw = ParseLine(text, line, spec);
  if (!raw.ok()) return raw.status();
  if (absl::Status s = CheckBlockCount(*raw, spec, block_tokens); !s.ok()) return s;
  return std::move(raw->request);
}

absl::Status TraceReadResult::Check(absl::string_view name) const {
  if (error_count == 0) {
    if (requests.empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": the trace holds no requests"));
    return absl::OkStatus();
  }
  std::string message =
      absl::StrCat(name, ": ", error_count, error_count == 1 ? " problem" : " problems", " in the trace");
  for (const std::string& error : errors) absl::StrAppend(&message, "\n  ", error);
  if (error_count > errors.size()) absl::StrAppend(&message, "\n  (", error_count - errors.size(), " more not listed)");
  return absl::InvalidArgumentError(message);
}

namespace {

enum class LineRead { kLine, kUnterminated, kEnd, kTooLong };

// A stream's lines, read a buffer at a time.
class LineSource {
 public:
  explicit LineSource(std::streambuf& in) : in_(in) {}

  // One line into `out` without its newline, reading at most `max` bytes of it.
  LineRead Next(std::string& out, size_t max) {
    out.clear();
    for (;;) {
      if (pos_ == end_) {
        end_ = static_cast<size_t>(in_.sgetn(buffer_.data(), static_cast<std::streamsize>(buffer_.size())));
        pos_ = 0;
        if (end_ == 0) return out.empty() ? LineRead::kEnd : LineRead::kUnterminated;
      }
      const char* start = buffer_.data() + pos_;
      const auto* newline = static_cast<const char*>(std::memchr(start, '\n', end_ - pos_));
      const size_t n = newline ? static_cast<size_t>(newline - start) : end_ - pos_;
      if (out.size() + n > max) return LineRead::kTooLong;
      out.append(start, n);
      pos_ += n;
      if (newline) {
        ++pos_;
        return LineRead::kLine;
      }
    }
  }

 private:
  std::streambuf& in_;
  std::vector<char> buffer_ = std::vector<char>(size_t{1} << 16);
  size_t pos_ = 0, end_ = 0;
};

// Reads the lines of one format into requests whose ids mean the same in every format.
class LineReader {
 public:
  LineReader(const TraceReadOptions& options, TraceReadResult& result) : options_(options), result_(result) {}

  // One non-blank line; a problem is returned, a request kept.
  absl::Status Read(absl::string_view text, size_t line) {
    if (!spec_) {
      TraceFormat format = options_.format;
      if (format == TraceFormat::kAuto) {
        auto detected = DetectFormat(text, line);
        if (!detected.ok()) return detected.status();
        format = *detected;
      }
      spec_ = &SpecOf(format);
      mapper_.emplace(*spec_);
      result_.format = format;
      result_.block_tokens = options_.block_tokens > 0 ? options_.block_tokens : spec_->block_tokens;
    }
    if (spec_->conversations) return weka_.Read(text, line, result_.block_tokens, result_);
    auto raw = ParseLine(text, line, *spec_);
    if (!raw.ok()) return raw.status();
    if (absl::Status s = CheckLineBlock(*raw); !s.ok()) return s;
    if (absl::Status s = CheckBlockCount(*raw, *spec_, result_.block_tokens); !s.ok()) return s;
    if (raw->request.timestamp_ms < last_timestamp_) {
      return Problem(line, absl::StrCat("timestamp = ", raw->request.timestamp_ms,
                                        ": out of order (must be >= the previous request's ", last_timestamp_, ")"));
    }
    last_timestamp_ = raw->request.timestamp_ms;
    if (raw->request_id && !raw->request_id->empty() && !request_ids_.emplace(*raw->request_id).second) {
      ++result_.repeated_lookups;
      return absl::OkStatus();
    }
    mapper_->Map(*raw, result_.block_tokens);
    result_.requests.push_back(std::move(raw->request));
    return absl::OkStatus();
  }

  bool Detected() const { return spec_ != nullptr; }
  void Finish() { weka_.Finish(result_); }

 private:
  // A line's own block size (LMCache's chunk_size) must be the trace's: the first line's, or the one given.
  absl::Status CheckLineBlock(const RawLine& raw) {
    if (spec_->block.empty()) return absl::OkStatus();
    if (result_.block_tokens == 0) result_.block_tokens = static_cast<uint64_t>(raw.block_tokens);
    if (static_cast<uint64_t>(raw.block_tokens) == result_.block_tokens) return absl::OkStatus();
    return Problem(raw.request.line, absl::StrCat(spec_->block, " = ", raw.block_tokens, ": must be ",
                                                  result_.block_tokens, options_.block_tokens > 0
                                                                            ? " (--block-tokens)"
                                                                            : ", the first line's (one block size a trace)"));
  }

  const TraceReadOptions& options_;
  TraceReadResult& result_;
  const FormatSpec* spec_ = nullptr;
  std::optional<IdMapper> mapper_;
  WekaReader weka_;
  absl::flat_hash_set<std::string> request_ids_;
  int64_t last_timestamp_ = 0;
};

}  // namespace

TraceReadResult ReadTrace(std::istream& in, const TraceReadOptions& options,
                          const std::function<void(uint64_t bytes)>& progress) {
  TraceReadResult result;
  result.format = options.format;
  auto fail = [&](const absl::Status& status) {
    if (result.errors.size() < TraceReadResult::kMaxListedErrors) result.errors.emplace_back(status.message());
    ++result.error_count;
  };
  LineReader reader(options, result);
  const TraceLimits& limits = options.limits;
  std::string text;
  uint64_t bytes = 0;
  LineSource lines(*in.rdbuf());
  for (size_t line = 1;; ++line) {
    const LineRead read = lines.Next(text, limits.line_bytes);
    if (read == LineRead::kEnd) break;
    if (read == LineRead::kTooLong) {
      fail(Problem(line, absl::StrCat("longer than ", limits.line_bytes, " bytes (the trace reader's line limit); "
                                      "reading stopped here")));
      break;
    }
    const bool terminated = read == LineRead::kLine;
    bytes += text.size() + 1;
    if (bytes > limits.total_bytes) {
      fail(Problem(line, absl::StrCat("the trace is larger than ", limits.total_bytes,
                                      " bytes (the reader's limit); reading stopped here")));
      break;
    }
    if (progress && line % 1000 == 0) progress(bytes);
    if (text.find_first_not_of(" \t\r") == std::string::npos) {
      ++result.blank_lines;
      continue;
    }
    const absl::Status status = reader.Read(text, line);
    if (status.ok()) continue;
    const absl::string_view why = absl::StripPrefix(status.message(), absl::StrCat("line ", line, ": "));
    fail(terminated ? status
                    : Problem(line, absl::StrCat("truncated: the trace ends inside this line, without its newline (",
                                                 why, ")")));
    if (!reader.Detected()) break;  // no format, so no line after it can be read either
  }
  reader.Finish();
  if (progress) progress(bytes);
  return result;
}

std::vector<std::vector<uint64_t>> ReblockedIds(const std::vector<TraceRequest>& trace, uint64_t block) {
  const uint64_t split = kDefaultTraceBlockTokens / block;
  std::vector<std::vector<uint64_t>> out;
  out.reserve(trace.size());
  for (const TraceRequest& r : trace) {
    std::vector<uint64_t> ids;
    const auto blocks = (static_cast<uint64_t>(r.input_length) + block - 1) / block;
    for (uint64_t j = 0; j < blocks && j / split < r.hash_ids.size(); ++j) {
      ids.push_back(static_cast<uint64_t>(r.hash_ids[j / split]) * split + j % split);
    }
    out.push_back(std::move(ids));
  }
  return out;
}

}  // namespace kvledger
