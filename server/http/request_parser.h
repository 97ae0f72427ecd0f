// HTTP/1.1 request heads (RFC 9112) and query strings, for server/http/listener: pure functions on
// strings.
#ifndef KVLEDGER_SERVER_HTTP_REQUEST_PARSER_H_
#define KVLEDGER_SERVER_HTTP_REQUEST_PARSER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/http/types.h"

namespace kvledger {

struct ParsedHead {
  std::string method;
  HttpRequest request;        // the path, percent-decoded, and the raw query
  std::string authorization;  // the Authorization header, if any
  bool close = false;         // the connection ends after the answer (Connection: close, HTTP/1.0, a body)
  bool gzip = false;          // Accept-Encoding allows gzip
};

// Where the request line and headers end (just after the empty line; CRLF or bare LF line ends, RFC
// 9112 §2.2), or npos while they have not all arrived.
size_t HeadEnd(absl::string_view pending);

// Parses the head at the start of `pending` (HeadEnd must have found its end) and removes it from
// there (what follows stays, for the next request). INVALID_ARGUMENT naming what is wrong: a request
// line that is not METHOD TARGET HTTP/1.x, a header without a name or with whitespace before its
// colon (§5.1), a folded header line (§5.2), HTTP/1.1 without exactly one Host (RFC 9110 §7.2).
absl::Status ParseHead(std::string* pending, ParsedHead* head);

// The parameter names of a raw query string, decoded, in order (a name given twice appears twice).
std::vector<std::string> QueryParamNames(absl::string_view query);

// The `occurrence`-th value of parameter `name` in a raw query string, percent- and '+'-decoded.
std::optional<std::string> QueryParam(absl::string_view query, absl::string_view name, int occurrence);

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_HTTP_REQUEST_PARSER_H_
