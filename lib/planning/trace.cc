#include "lib/planning/trace.h"

#include <array>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
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
    while (pos_ < text_.size() && absl::string_view("+-0123456789.eE").find(text_[pos_]) != absl::string_view::npos) {
      ++pos_;
    }
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
  absl::string_view text_;
  size_t pos_ = 0;
};

absl::Status Problem(size_t line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", what));
}

// An integer field's value; INVALID_ARGUMENT naming `field` otherwise.
absl::StatusOr<int64_t> Integer(Cursor& cursor, size_t line, absl::string_view field) {
  const absl::string_view text = cursor.NumberText();
  int64_t value;
  if (text.empty() || !absl::SimpleAtoi(text, &value)) {
    return Problem(line, absl::StrCat(field, " = ", text.empty() ? cursor.Here() : std::string(text),
                                      ": must be an integer"));
  }
  return value;
}

absl::Status HashIds(Cursor& cursor, size_t line, std::vector<int64_t>& ids) {
  if (!cursor.Eat('[')) return Problem(line, absl::StrCat("hash_ids = ", cursor.Here(), ": must be an array"));
  if (cursor.Eat(']')) return absl::OkStatus();
  do {
    auto id = Integer(cursor, line, absl::StrCat("hash_ids[", ids.size(), "]"));
    if (!id.ok()) return id.status();
    if (*id < 0) return Problem(line, absl::StrCat("hash_ids[", ids.size(), "] = ", *id, ": must be >= 0"));
    ids.push_back(*id);
  } while (cursor.Eat(','));
  if (!cursor.Eat(']')) return Problem(line, absl::StrCat("hash_ids: ", cursor.Here(), ": expected , or ]"));
  return absl::OkStatus();
}

enum Field { kTimestamp, kInput, kOutput, kHashIds, kFieldCount };
constexpr std::array<absl::string_view, kFieldCount> kFieldNames = {"timestamp", "input_length", "output_length",
                                                                    "hash_ids"};

absl::Status CheckRanges(const TraceRequest& r, size_t line, uint64_t block_tokens) {
  if (r.timestamp_ms < 0) return Problem(line, absl::StrCat("timestamp = ", r.timestamp_ms, ": must be >= 0"));
  if (r.input_length < 1) return Problem(line, absl::StrCat("input_length = ", r.input_length, ": must be >= 1"));
  if (r.output_length < 0) return Problem(line, absl::StrCat("output_length = ", r.output_length, ": must be >= 0"));
  const uint64_t need = (static_cast<uint64_t>(r.input_length) + block_tokens - 1) / block_tokens;
  if (r.hash_ids.size() != need) {
    return Problem(line, absl::StrFormat("hash_ids has %d blocks: must be ceil(input_length %d / %d) = %d, one per "
                                         "block of the prompt (is %d tokens the trace's block size? kvledger plan's "
                                         "--block-tokens and kvledger-server's --trace_block_tokens set it)",
                                         r.hash_ids.size(), r.input_length, block_tokens, need, block_tokens));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TraceRequest> ParseTraceLine(absl::string_view text, size_t line, uint64_t block_tokens) {
  TraceRequest r;
  r.line = line;
  Cursor cursor(text);
  if (!cursor.Eat('{')) return Problem(line, absl::StrCat("not a JSON object: starts ", cursor.Here()));
  std::array<bool, kFieldCount> seen{};
  bool record_like = false;  // a key of a kvledger record: the file is for replay
  if (!cursor.Eat('}')) {
    do {
      auto key = cursor.String();
      if (!key || !cursor.Eat(':')) return Problem(line, absl::StrCat("expected \"field\": at ", cursor.Here()));
      size_t f = 0;
      while (f < kFieldCount && kFieldNames[f] != *key) ++f;
      record_like = record_like || *key == "prompt_tokens" || *key == "logical_match_tokens";
      if (f == kFieldCount) {
        if (!cursor.SkipValue()) return Problem(line, absl::StrCat(*key, ": not a JSON value at ", cursor.Here()));
        continue;
      }
      if (seen[f]) return Problem(line, absl::StrCat(*key, ": given twice"));
      seen[f] = true;
      if (f == kHashIds) {
        if (absl::Status s = HashIds(cursor, line, r.hash_ids); !s.ok()) return s;
        continue;
      }
      auto value = Integer(cursor, line, *key);
      if (!value.ok()) return value.status();
      (f == kTimestamp ? r.timestamp_ms : f == kInput ? r.input_length : r.output_length) = *value;
    } while (cursor.Eat(','));
    if (!cursor.Eat('}')) return Problem(line, absl::StrCat("expected , or } at ", cursor.Here()));
  }
  if (!cursor.AtEnd()) return Problem(line, absl::StrCat("text after the object: ", cursor.Here()));
  for (size_t f = 0; f < kFieldCount; ++f) {
    if (!seen[f]) {
      return Problem(line, absl::StrCat(kFieldNames[f], ": missing (required)",
                                        record_like ? "; the line is a kvledger record (prompt_tokens, ...): "
                                                      "kvledger replay reads record files, kvledger plan reads "
                                                      "prefix-reuse traces (docs/trace-format.md)"
                                                    : ""));
    }
  }
  if (absl::Status s = CheckRanges(r, line, block_tokens); !s.ok()) return s;
  return r;
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

// One line into `out` without its newline, reading at most `max` bytes of it.
LineRead ReadLine(std::streambuf& in, std::string& out, size_t max) {
  out.clear();
  for (;;) {
    const int c = in.sbumpc();
    if (c == std::char_traits<char>::eof()) return out.empty() ? LineRead::kEnd : LineRead::kUnterminated;
    if (c == '\n') return LineRead::kLine;
    if (out.size() >= max) return LineRead::kTooLong;
    out.push_back(static_cast<char>(c));
  }
}

}  // namespace

TraceReadResult ReadTrace(std::istream& in, uint64_t block_tokens, const std::function<void(uint64_t bytes)>& progress,
                          TraceLimits limits) {
  TraceReadResult result;
  auto fail = [&](const absl::Status& status) {
    if (result.errors.size() < TraceReadResult::kMaxListedErrors) result.errors.emplace_back(status.message());
    ++result.error_count;
  };
  std::string text;
  uint64_t bytes = 0;
  int64_t last_timestamp = 0;
  for (size_t line = 1;; ++line) {
    const LineRead read = ReadLine(*in.rdbuf(), text, limits.line_bytes);
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
    auto request = ParseTraceLine(text, line, block_tokens);
    if (!request.ok()) {
      const absl::string_view why = absl::StripPrefix(request.status().message(), absl::StrCat("line ", line, ": "));
      fail(terminated ? request.status()
                      : Problem(line, absl::StrCat("truncated: the trace ends inside this line, without its newline (",
                                                   why, ")")));
      continue;
    }
    if (request->timestamp_ms < last_timestamp) {
      fail(Problem(line, absl::StrCat("timestamp = ", request->timestamp_ms,
                                      ": out of order (must be >= the previous request's ", last_timestamp, ")")));
      continue;
    }
    last_timestamp = request->timestamp_ms;
    result.requests.push_back(std::move(*request));
  }
  if (progress) progress(bytes);
  return result;
}

}  // namespace kvledger
