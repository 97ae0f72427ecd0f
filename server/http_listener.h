// The one HTTP listener of a kvledger server (--metrics_address): /metrics for Prometheus, the JSON
// API and the explorer page for people and tools without gRPC. Read-only GET routes over civetweb;
// optional HTTP basic auth covers every route. Thread-safe: handlers run on civetweb's worker
// threads and must be safe to call concurrently.
#ifndef KVLEDGER_SERVER_HTTP_LISTENER_H_
#define KVLEDGER_SERVER_HTTP_LISTENER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace kvledger {

struct HttpRequest {
  std::string path;
  std::string query;  // raw query string, without '?'
  // The `occurrence`-th value of query parameter `name` (URL-decoded), if present.
  std::optional<std::string> Param(const std::string& name, int occurrence = 0) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // When set, the body is streamed instead (chunked transfer encoding): `stream` is called with a
  // writer and writes the body in pieces.
  using Writer = std::function<void(std::string& piece)>;
  std::function<void(const Writer& write)> stream;

  static HttpResponse Of(int status, std::string content_type, std::string body) {
    HttpResponse r;
    r.status = status;
    r.content_type = std::move(content_type);
    r.body = std::move(body);
    return r;
  }
};

class HttpListener {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;
  struct Route {
    std::string path;  // exact path, e.g. "/metrics"
    Handler handler;
  };
  struct BasicAuth {
    std::string user;
    std::string password;
  };

  // Binds `address` ("host:port", port 0 for any) and serves `routes`; other paths get 404.
  // UNAVAILABLE when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpListener>> Start(const std::string& address,
                                                             std::optional<BasicAuth> auth,
                                                             std::vector<Route> routes);
  ~HttpListener();  // stops serving, in milliseconds

  int port() const { return port_; }
  const std::string& address() const { return address_; }  // "host:port" with the bound port

 private:
  struct Impl;
  explicit HttpListener(std::unique_ptr<Impl> impl, std::string address, int port);
  std::unique_ptr<Impl> impl_;
  std::string address_;
  int port_;
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_HTTP_LISTENER_H_
