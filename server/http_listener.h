// The one HTTP listener of a kvledger server (--metrics_address): /metrics for Prometheus, the JSON
// API and the explorer page for people and tools without gRPC. Read-only GET routes over HTTP/1.1
// with keep-alive; optional HTTP basic auth covers every route. One event thread reads every
// request's line and headers without blocking, so a slow client holds a buffer, not a thread; the
// workers run handlers, at most HttpLimits::kServedPerClient at once for one client address, so no
// number of slow or greedy clients from one address keeps another address from being served.
// Thread-safe: handlers run on the worker threads and must be safe to call concurrently.
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

// The listener's bounds (docs/security.md).
struct HttpLimits {
  static constexpr int kWorkers = 8;               // handlers running at once
  static constexpr int kServedPerClient = 2;       // of them for one client address; its other requests wait
  static constexpr int kConnectionsPerClient = 64;  // open connections of one address; more get 503
  static constexpr int kConnections = 1024;        // open connections in all
  static constexpr size_t kHeadBytes = 16384;      // a request line and headers; more get 431
  static constexpr int kHeadSeconds = 5;           // from a request's first byte to its blank line
  static constexpr int kIdleSeconds = 60;          // a kept-alive connection without a request is closed
  static constexpr int kWriteSeconds = 10;         // a client that reads nothing of its answer this long is cut
};

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
