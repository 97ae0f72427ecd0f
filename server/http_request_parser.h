// HTTP/1.1 request heads and query strings, for server/http_listener: pure functions on strings.
#ifndef KVLEDGER_SERVER_HTTP_REQUEST_PARSER_H_
#define KVLEDGER_SERVER_HTTP_REQUEST_PARSER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/http_listener.h"

namespace kvledger {

struct ParsedHead {
  std::string method;
  HttpRequest request;        // the path, percent-decoded, and the raw query
  std::string authorization;  // the Authorization header, if any
  bool close = false;         // the connection ends after the answer (Connection: close, HTTP/1.0, a body)
};

// Whether `pending` holds a whole request line and headers (up to the blank line).
bool HeadComplete(absl::string_view pending);

// Parses the head at the start of `pending` and removes it from there (what follows stays, for the
// next request). INVALID_ARGUMENT naming what is wrong.
absl::Status ParseHead(std::string* pending, ParsedHead* head);

// The parameter names of a raw query string, decoded, in order (a name given twice appears twice).
std::vector<std::string> QueryParamNames(absl::string_view query);

// The `occurrence`-th value of parameter `name` in a raw query string, percent- and '+'-decoded.
std::optional<std::string> QueryParam(absl::string_view query, absl::string_view name, int occurrence);

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_HTTP_REQUEST_PARSER_H_
