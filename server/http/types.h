// An HTTP request as a route sees it and the response it gives: plain values shared by the listener
// (server/http/listener), the head parser and the routes (server/http_api, /metrics).
#ifndef KVLEDGER_SERVER_HTTP_TYPES_H_
#define KVLEDGER_SERVER_HTTP_TYPES_H_

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace kvledger {

struct HttpRequest {
  std::string path;
  std::string query;  // raw query string, without '?'
  std::string peer;   // the client's address, without its port
  // The client says it is a scraper: it sent X-Prometheus-Scrape-Timeout-Seconds, as Prometheus (in
  // either mode) and the collectors built on its scrape code do on every scrape; curl, browsers and
  // probes do not.
  bool scraper = false;
  // The `occurrence`-th value of query parameter `name` (URL-decoded), if present.
  std::optional<std::string> Param(const std::string& name, int occurrence = 0) const;
  std::vector<std::string> ParamNames() const;  // every parameter given, in order
};

// The one mapping of a refusal to its HTTP status: INVALID_ARGUMENT, OUT_OF_RANGE and
// FAILED_PRECONDITION 400, UNAUTHENTICATED 401, PERMISSION_DENIED 403, NOT_FOUND 404, ALREADY_EXISTS
// and ABORTED 409, RESOURCE_EXHAUSTED 429, UNIMPLEMENTED 501, UNAVAILABLE and CANCELLED 503,
// DEADLINE_EXCEEDED 504, anything else 500 (OK is 200).
inline int HttpStatusOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk: return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition: return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kPermissionDenied: return 403;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted: return 409;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kUnimplemented: return 501;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kCancelled: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // When set, the body is streamed instead (chunked transfer encoding): `stream` is called with a
  // writer and writes the body in pieces; the writer returns false once the answer is cut (the client
  // is gone or too slow), after which the stream should stop. A stream that throws before its first
  // piece is answered 500; after it, the answer is cut.
  using Writer = std::function<bool(std::string& piece)>;
  std::function<void(const Writer& write)> stream;
  // When set, told once whether the whole answer reached the client: true when its last byte has
  // been acknowledged by the client's TCP (not just rendered, nor just handed to the socket), false
  // when it was cut, refused, or the connection ended first. Called on a listener thread.
  std::function<void(bool whole)> delivered;
  std::string extra_headers;  // whole lines, each ending in "\r\n"

  static HttpResponse Of(int status, std::string content_type, std::string body) {
    HttpResponse r;
    r.status = status;
    r.content_type = std::move(content_type);
    r.body = std::move(body);
    return r;
  }
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_HTTP_TYPES_H_
