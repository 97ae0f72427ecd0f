// An HTTP request as a route sees it and the response it gives: plain values shared by the listener
// (server/http/listener), the head parser and the routes (server/http_api, /metrics).
#ifndef KVLEDGER_SERVER_HTTP_TYPES_H_
#define KVLEDGER_SERVER_HTTP_TYPES_H_

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kvledger {

struct HttpRequest {
  std::string path;
  std::string query;  // raw query string, without '?'
  // The `occurrence`-th value of query parameter `name` (URL-decoded), if present.
  std::optional<std::string> Param(const std::string& name, int occurrence = 0) const;
  std::vector<std::string> ParamNames() const;  // every parameter given, in order
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // When set, the body is streamed instead (chunked transfer encoding): `stream` is called with a
  // writer and writes the body in pieces.
  using Writer = std::function<void(std::string& piece)>;
  std::function<void(const Writer& write)> stream;
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
