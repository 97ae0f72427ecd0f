#include "server/http/request_parser.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kvledger {
namespace {

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

bool TokenChar(char c) {  // RFC 9110 §5.6.2 tchar
  return absl::ascii_isalnum(c) || absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
}

// Whether Accept-Encoding allows gzip: listed without q=0 (RFC 9110 §12.5.3).
bool AcceptsGzip(absl::string_view value) {
  for (absl::string_view coding : absl::StrSplit(value, ',')) {
    const std::vector<absl::string_view> parts = absl::StrSplit(coding, ';');
    const absl::string_view name = absl::StripAsciiWhitespace(parts[0]);
    if (!absl::EqualsIgnoreCase(name, "gzip") && name != "*") continue;
    bool zero = false;
    for (size_t i = 1; i < parts.size(); ++i) {
      const absl::string_view param = absl::StripAsciiWhitespace(parts[i]);
      double q = 1;
      if (absl::StartsWithIgnoreCase(param, "q=") && absl::SimpleAtod(param.substr(2), &q) && q <= 0) zero = true;
    }
    if (!zero) return true;
  }
  return false;
}

// Applies one header line to `head`; counts Host headers in `hosts`.
absl::Status Header(absl::string_view line, ParsedHead* head, int* hosts) {
  if (!line.empty() && (line[0] == ' ' || line[0] == '\t')) return Bad("a folded header line (obsolete line folding)");
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos || colon == 0) return Bad("a header line without a name and ':'");
  const absl::string_view name = line.substr(0, colon);
  if (!std::all_of(name.begin(), name.end(), TokenChar)) {
    return Bad("a header name with whitespace or another character a name cannot have (before its ':')");
  }
  const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
  if (absl::EqualsIgnoreCase(name, "Host")) ++*hosts;
  if (absl::EqualsIgnoreCase(name, "Authorization")) head->authorization = std::string(value);
  if (absl::EqualsIgnoreCase(name, "Accept-Encoding")) head->gzip = AcceptsGzip(value);
  if (absl::EqualsIgnoreCase(name, "X-Prometheus-Scrape-Timeout-Seconds")) head->request.scraper = true;
  if (absl::EqualsIgnoreCase(name, "Connection") && absl::StrContains(absl::AsciiStrToLower(value), "close")) head->close = true;
  if (absl::EqualsIgnoreCase(name, "Transfer-Encoding")) head->close = true;  // a body is never read
  if (absl::EqualsIgnoreCase(name, "Content-Length") && value != "0") head->close = true;
  return absl::OkStatus();
}

absl::Status RequestLine(absl::string_view line, ParsedHead* head) {
  const std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
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
  return absl::OkStatus();
}

}  // namespace

size_t HeadEnd(absl::string_view pending) {
  for (size_t at = pending.find('\n'); at != absl::string_view::npos; at = pending.find('\n', at + 1)) {
    if (at + 1 < pending.size() && pending[at + 1] == '\n') return at + 2;
    if (at + 2 < pending.size() && pending[at + 1] == '\r' && pending[at + 2] == '\n') return at + 3;
  }
  return absl::string_view::npos;
}

absl::Status ParseHead(std::string* pending, ParsedHead* head) {
  const size_t end = HeadEnd(*pending);
  if (end == absl::string_view::npos) return Bad("the request line and headers do not end");
  const std::string text = pending->substr(0, end);
  pending->erase(0, end);
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  for (auto& line : lines) absl::ConsumeSuffix(&line, "\r");
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (lines.empty()) return Bad("the request line is not METHOD TARGET HTTP/1.x");
  if (auto s = RequestLine(lines[0], head); !s.ok()) return s;
  const bool http11 = absl::EndsWith(lines[0], "HTTP/1.1");
  int hosts = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (auto s = Header(lines[i], head, &hosts); !s.ok()) return s;
  }
  if (http11 && hosts != 1) return Bad("HTTP/1.1 needs exactly one Host header");
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
