#include "lib/wire/prometheus_vector.h"

#include <functional>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kvledger {
namespace {

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("Prometheus answer: ", what));
}

// A single pass over JSON text (RFC 8259) that keeps only what it is asked for: nesting is bounded
// by kMaxPrometheusDepth and every string by kMaxPrometheusStringBytes, so any input costs time
// linear in its size and memory in what is kept.
class JsonReader {
 public:
  explicit JsonReader(absl::string_view text) : text_(text) {}

  absl::Status String(std::string* out) {
    Space();
    if (!Take('"')) return Error("a string");
    out->clear();
    while (at_ < text_.size() && text_[at_] != '"') {
      char c = text_[at_++];
      if (c == '\\') {
        if (at_ >= text_.size()) break;
        c = text_[at_++];
        if (c == 'u') {
          if (absl::Status s = Unicode(out); !s.ok()) return s;
          continue;
        }
        static constexpr absl::string_view kFrom = "\"\\/bfnrt", kTo = "\"\\/\b\f\n\r\t";
        const size_t which = kFrom.find(c);
        if (which == absl::string_view::npos) return Error("a string escape");
        c = kTo[which];
      } else if (static_cast<unsigned char>(c) < 0x20) {
        return Error("a string without control characters");
      }
      out->push_back(c);
      if (out->size() > kMaxPrometheusStringBytes) {
        return Malformed(absl::StrCat("a string longer than ", kMaxPrometheusStringBytes, " bytes"));
      }
    }
    return Take('"') ? absl::OkStatus() : Error("the end of a string");
  }

  // Calls `field` with each key of an object, the reader at its value (which `field` must read).
  absl::Status Object(const std::function<absl::Status(const std::string&)>& field) {
    Space();
    if (!Take('{')) return Error("an object");
    Nest nest(this);
    if (depth_ > kMaxPrometheusDepth) return TooDeep();
    if (Space(), Take('}')) return absl::OkStatus();
    std::string key;
    do {
      if (absl::Status s = String(&key); !s.ok()) return s;
      if (Space(), !Take(':')) return Error("':'");
      if (absl::Status s = field(key); !s.ok()) return s;
    } while (Space(), Take(','));
    return Take('}') ? absl::OkStatus() : Error("',' or '}'");
  }

  // Calls `element` with each element's index, the reader at it.
  absl::Status Array(const std::function<absl::Status(size_t)>& element) {
    Space();
    if (!Take('[')) return Error("an array");
    Nest nest(this);
    if (depth_ > kMaxPrometheusDepth) return TooDeep();
    if (Space(), Take(']')) return absl::OkStatus();
    size_t index = 0;
    do {
      if (absl::Status s = element(index++); !s.ok()) return s;
    } while (Space(), Take(','));
    return Take(']') ? absl::OkStatus() : Error("',' or ']'");
  }

  // Reads past any value.
  absl::Status Skip() {
    Space();
    if (at_ >= text_.size()) return Error("a value");
    switch (text_[at_]) {
      case '{': return Object([this](const std::string&) { return Skip(); });
      case '[': return Array([this](size_t) { return Skip(); });
      case '"': {
        std::string ignored;
        return String(&ignored);
      }
      default: break;
    }
    const size_t start = at_;
    while (at_ < text_.size() && (absl::ascii_isalnum(text_[at_]) || text_[at_] == '-' || text_[at_] == '+' ||
                                  text_[at_] == '.')) {
      ++at_;
    }
    const absl::string_view word = text_.substr(start, at_ - start);
    double number;
    if (word == "true" || word == "false" || word == "null" || absl::SimpleAtod(word, &number)) return absl::OkStatus();
    return Error("a value");
  }

  absl::Status End() {
    Space();
    return at_ == text_.size() ? absl::OkStatus() : Error("the end of the answer");
  }

 private:
  struct Nest {
    explicit Nest(JsonReader* r) : r(r) { ++r->depth_; }
    ~Nest() { --r->depth_; }
    JsonReader* r;
  };
  void Space() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\n' || text_[at_] == '\r' || text_[at_] == '\t')) {
      ++at_;
    }
  }
  bool Take(char c) {
    if (at_ >= text_.size() || text_[at_] != c) return false;
    ++at_;
    return true;
  }
  absl::Status Error(absl::string_view expected) const {
    return Malformed(absl::StrCat("not JSON: ", expected, " expected at byte ", at_));
  }
  absl::Status TooDeep() const {
    return Malformed(absl::StrCat("nested deeper than ", kMaxPrometheusDepth, " at byte ", at_));
  }
  absl::Status Unicode(std::string* out) {  // after "\u": four hex digits (a pair for a surrogate)
    uint32_t code = 0;
    if (!Hex4(&code)) return Error("four hex digits");
    if (code >= 0xD800 && code < 0xDC00) {
      uint32_t low = 0;
      if (!(Take('\\') && Take('u') && Hex4(&low)) || low < 0xDC00 || low >= 0xE000) return Error("a surrogate pair");
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    }
    if (code < 0x80) {
      out->push_back(static_cast<char>(code));
    } else if (code < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (code >> 6)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else if (code < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (code >> 12)));
      out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (code >> 18)));
      out->push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    }
    return absl::OkStatus();
  }
  bool Hex4(uint32_t* code) {
    if (text_.size() - at_ < 4) return false;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[at_++];
      const int digit = absl::ascii_isdigit(c) ? c - '0' : absl::ascii_isxdigit(c) ? (c | 0x20) - 'a' + 10 : -1;
      if (digit < 0) return false;
      *code = *code * 16 + static_cast<uint32_t>(digit);
    }
    return true;
  }

  const absl::string_view text_;
  size_t at_ = 0;
  int depth_ = 0;
};

// One element of data.result: {"metric": {label: "value", ...}, "value": [time, "number"]}.
absl::Status ReadSample(JsonReader& json, size_t index, LabeledSample* sample) {
  const std::string at = absl::StrCat("result[", index, "]");
  bool has_metric = false;
  std::string number;
  bool has_number = false;
  absl::Status read = json.Object([&](const std::string& key) -> absl::Status {
    if (key == "metric") {
      has_metric = true;
      return json.Object([&](const std::string& name) {
        if (sample->labels.size() >= kMaxPrometheusLabels) {
          return Malformed(absl::StrCat(at, ": more than ", kMaxPrometheusLabels, " labels"));
        }
        std::string value;
        if (absl::Status s = json.String(&value); !s.ok()) {
          return absl::StrContains(s.message(), "longer than")
                     ? s
                     : Malformed(absl::StrCat(at, ": label ", name, " is not a string"));
        }
        sample->labels.emplace_back(name, std::move(value));
        return absl::OkStatus();
      });
    }
    if (key != "value") return json.Skip();
    return json.Array([&](size_t i) {
      if (i == 0) return json.Skip();
      if (i > 1) return Malformed(absl::StrCat(at, ": \"value\" has more than [time, \"number\"]"));
      has_number = true;
      return json.String(&number);
    });
  });
  if (!read.ok()) return read;
  if (!has_metric || !has_number) {
    return Malformed(absl::StrCat(at, ": needs \"metric\" {...} and \"value\" [time, \"number\"]"));
  }
  if (!absl::SimpleAtod(number, &sample->value)) {
    return Malformed(absl::StrCat(at, ": value \"", number, "\" is not a number"));
  }
  return absl::OkStatus();
}

// "data": {"resultType": "vector", "result": [...]}.
absl::Status ReadData(JsonReader& json, std::string* type, bool* has_result, std::vector<LabeledSample>* samples) {
  return json.Object([&](const std::string& key) -> absl::Status {
    if (key == "resultType") return json.String(type);
    if (key != "result") return json.Skip();
    *has_result = true;
    return json.Array([&](size_t index) {
      if (index >= kMaxPrometheusSamples) {
        return Malformed(absl::StrCat("more than ", kMaxPrometheusSamples, " samples"));
      }
      samples->emplace_back();
      return ReadSample(json, index, &samples->back());
    });
  });
}

}  // namespace

absl::StatusOr<std::vector<LabeledSample>> ParsePrometheusVector(absl::string_view text) {
  JsonReader json(text);
  std::string status, error, type;
  bool has_result = false;
  std::vector<LabeledSample> samples;
  absl::Status read = json.Object([&](const std::string& key) -> absl::Status {
    if (key == "status") return json.String(&status);
    if (key == "error") return json.String(&error);
    if (key == "data") return ReadData(json, &type, &has_result, &samples);
    return json.Skip();
  });
  if (read.ok()) read = json.End();
  if (!read.ok()) {
    if (status.empty() && absl::StrContains(read.message(), "an object expected at byte 0")) {
      return Malformed("not a JSON object");
    }
    return read;
  }
  if (status != "success") {
    return Malformed(absl::StrCat("status ", status.empty() ? "missing" : status, error.empty() ? "" : ": ", error));
  }
  if (type != "vector" || !has_result) {
    return Malformed("not an instant vector (data.resultType \"vector\" with data.result [...])");
  }
  return samples;
}

std::string UrlQueryEscape(absl::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace kvledger
