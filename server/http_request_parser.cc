#include "server/http_request_parser.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kvledger {
namespace {

constexpr absl::string_view kEnd = "\r\n\r\n";

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = absl::ascii_tolower(c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Percent-decodes `text`. In a query ('+' is a space there) a broken escape is kept as written; in a
// path it gives nullopt.
std::optional<std::string> Decode(absl::string_view text, bool query) {
  const bool plus = query;
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+' && plus) {
      out.push_back(' ');
    } else if (text[i] != '%') {
      out.push_back(text[i]);
    } else if (i + 2 < text.size() && HexDigit(text[i + 1]) >= 0 && HexDigit(text[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexDigit(text[i + 1]) * 16 + HexDigit(text[i + 2])));
      i += 2;
    } else if (query) {
      out.push_back('%');
    } else {
      return std::nullopt;
    }
  }
  return out;
}

absl::Status Bad(absl::string_view what) { return absl::InvalidArgumentError(what); }

// Applies one header line to `head`.
absl::Status Header(absl::string_view line, ParsedHead* head) {
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos || colon == 0) return Bad("a header line without a name and ':'");
  const absl::string_view name = line.substr(0, colon);
  const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
  if (absl::EqualsIgnoreCase(name, "Authorization")) head->authorization = std::string(value);
  if (absl::EqualsIgnoreCase(name, "Connection") && absl::StrContains(absl::AsciiStrToLower(value), "close")) head->close = true;
  if (absl::EqualsIgnoreCase(name, "Transfer-Encoding")) head->close = true;  // a body is never read
  if (absl::EqualsIgnoreCase(name, "Content-Length") && value != "0") head->close = true;
  return absl::OkStatus();
}

}  // namespace

bool HeadComplete(absl::string_view pending) { return absl::StrContains(pending, kEnd); }

absl::Status ParseHead(std::string* pending, ParsedHead* head) {
  const size_t end = absl::string_view(*pending).find(kEnd);
  if (end == std::string::npos) return Bad("the request line and headers do not end");
  const std::string text = pending->substr(0, end);
  pending->erase(0, end + kEnd.size());
  const std::vector<absl::string_view> lines = absl::StrSplit(text, "\r\n");
  const std::vector<absl::string_view> parts = absl::StrSplit(lines[0], ' ');
  if (parts.size() != 3 || parts[0].empty()) return Bad("the request line is not METHOD TARGET HTTP/1.x");
  if (parts[2] != "HTTP/1.1" && parts[2] != "HTTP/1.0") return Bad("only HTTP/1.0 and HTTP/1.1 are served");
  head->method = std::string(parts[0]);
  head->close = parts[2] == "HTTP/1.0";
  const absl::string_view target = parts[1];
  if (target.empty() || target[0] != '/') return Bad("the request target must be a path starting with '/'");
  const size_t question = target.find('?');
  const auto path = Decode(target.substr(0, question), false);
  if (!path) return Bad("the path has a broken %-escape");
  head->request.path = *path;
  head->request.query = question == absl::string_view::npos ? "" : std::string(target.substr(question + 1));
  for (size_t i = 1; i < lines.size(); ++i) {
    if (auto s = Header(lines[i], head); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::vector<std::string> QueryParamNames(absl::string_view query) {
  std::vector<std::string> names;
  for (absl::string_view pair : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    names.push_back(*Decode(pair.substr(0, pair.find('=')), true));  // a query name always decodes
  }
  return names;
}

std::optional<std::string> QueryParam(absl::string_view query, absl::string_view name, int occurrence) {
  int seen = 0;
  for (absl::string_view pair : absl::StrSplit(query, '&')) {
    const size_t equals = pair.find('=');
    const auto key = Decode(pair.substr(0, equals), true);
    if (!key || *key != name) continue;
    if (seen++ != occurrence) continue;
    return Decode(equals == absl::string_view::npos ? "" : pair.substr(equals + 1), true);
  }
  return std::nullopt;
}

}  // namespace kvledger
