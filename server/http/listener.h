// The one HTTP listener of a kvledger server (--metrics_address): /metrics for Prometheus, the JSON
// API and the explorer page for people and tools without gRPC. Read-only GET and HEAD routes over
// HTTP/1.1 with keep-alive, gzip when asked, optionally TLS and HTTP basic auth (server/http/security.h).
//
// One event thread accepts, drives TLS handshakes and reads every request's line and headers without
// blocking, so a slow client holds a buffer, not a thread. Workers run handlers and write answers.
// Who gets a connection, a place in line and a worker is decided per client address by the pure
// policies of server/http/admission.h: an address with nothing in flight is always admitted, N busy
// addresses share the connections and the workers equally, and a full table closes a waiting
// connection of the address holding the most. A worker waits on a slow reader at most 100 ms per
// answer: the unsent rest is then parked whole (its size reserved at once within parked_bytes, at
// most a quarter of it for one address) for the event thread to send by answer_seconds, or, when it
// cannot be parked whole, the connection is cut. Stopping takes milliseconds whatever the clients do.
// The listener's threads block SIGPIPE (a client that closes mid-answer never ends the process).
// Thread-safe: handlers run on the worker threads and must be safe to call concurrently.
#ifndef KVLEDGER_SERVER_HTTP_LISTENER_H_
#define KVLEDGER_SERVER_HTTP_LISTENER_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/http/clock.h"
#include "server/http/limits.h"
#include "server/http/security.h"
#include "server/http/types.h"

namespace kvledger {

struct HttpSecurity {
  std::shared_ptr<TlsContext> tls;            // TLS on every connection when set
  std::shared_ptr<BasicAuthenticator> auth;   // basic auth on every route when set
};

// Whether a TCP listener could bind HOST:PORT now: what a listener that reports its failure poorly
// (gRPC's) is checked with first, for a message that says the port is in use.
absl::Status ProbeListen(const std::string& address);

class HttpListener {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;
  struct Route {
    std::string path;  // exact path, e.g. "/metrics"
    Handler handler;
  };

  // Binds `address` ("host:port", port 0 for any) and serves `routes`; other paths get 404.
  // UNAVAILABLE when the address cannot be bound. The connections' deadlines (head_seconds,
  // idle_seconds, answer_seconds) are kept on `clock` (a test moves a fake one); the event thread
  // looks at them at least once a second.
  static absl::StatusOr<std::unique_ptr<HttpListener>> Start(const std::string& address, const HttpLimits& limits,
                                                             HttpSecurity security, std::vector<Route> routes,
                                                             HttpClockSource clock = SystemHttpClock());
  // Stops serving: closes every connection (a worker blocked on a slow reader returns) and joins the
  // threads; no client can hold it.
  ~HttpListener();

  int port() const { return port_; }
  const std::string& address() const { return address_; }  // "host:port" with the bound port
  const HttpLimits& limits() const;
  const char* scheme() const;  // "https" with TLS, else "http"  // as applied (connections capped by the descriptors)

 private:
  struct Impl;
  explicit HttpListener(std::unique_ptr<Impl> impl, std::string address, int port);
  std::unique_ptr<Impl> impl_;
  std::string address_;
  int port_;
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_HTTP_LISTENER_H_
