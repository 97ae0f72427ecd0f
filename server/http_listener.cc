#include "server/http_listener.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "CivetServer.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kvledger {
namespace {

// Connects to `address` and closes at once. civetweb's listener thread checks for a stop only when
// its poll returns (up to 2 s); a connection makes it return now.
void Knock(const std::string& address) {
  std::string host = address.substr(0, address.rfind(':'));
  const std::string port = address.substr(address.rfind(':') + 1);
  if (host == "0.0.0.0" || host.empty()) host = "127.0.0.1";
  if (host == "[::]") host = "::1";
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const bool connected = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    close(fd);
    if (connected) break;
  }
  freeaddrinfo(found);
}

void Send(mg_connection* conn, const HttpResponse& r, const char* extra_headers = "") {
  if (r.stream) {
    mg_printf(conn,
              "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\nCache-Control: no-store\r\n"
              "X-Content-Type-Options: nosniff\r\n%s\r\n",
              r.status, mg_get_response_code_text(conn, r.status), r.content_type.c_str(), extra_headers);
    r.stream([conn](std::string& piece) {
      if (!piece.empty()) mg_send_chunk(conn, piece.data(), static_cast<unsigned int>(piece.size()));
    });
    mg_send_chunk(conn, "", 0);
    return;
  }
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nCache-Control: no-store\r\n"
            "X-Content-Type-Options: nosniff\r\n%s\r\n",
            r.status, mg_get_response_code_text(conn, r.status), r.content_type.c_str(), r.body.size(),
            extra_headers);
  mg_write(conn, r.body.data(), r.body.size());
}

class RouteHandler final : public CivetHandler {
 public:
  RouteHandler(std::string path, HttpListener::Handler handler,
               const std::optional<HttpListener::BasicAuth>& auth)
      : path_(std::move(path)), handler_(std::move(handler)), auth_(auth) {}

  // Every route is read-only.
  bool handlePost(CivetServer*, mg_connection* conn) override { return NotAllowed(conn); }
  bool handlePut(CivetServer*, mg_connection* conn) override { return NotAllowed(conn); }
  bool handleDelete(CivetServer*, mg_connection* conn) override { return NotAllowed(conn); }
  bool handlePatch(CivetServer*, mg_connection* conn) override { return NotAllowed(conn); }
  bool handleHead(CivetServer*, mg_connection* conn) override { return NotAllowed(conn); }
  bool handleOptions(CivetServer*, mg_connection* conn) override { return NotAllowed(conn); }

  bool handleGet(CivetServer*, mg_connection* conn) override {
    if (!Authorized(conn)) {
      Send(conn, HttpResponse::Of(401, "text/plain; charset=utf-8", "authentication required\n"),
           "WWW-Authenticate: Basic realm=\"kvledger\"\r\n");
      return true;
    }
    const mg_request_info* info = mg_get_request_info(conn);
    HttpRequest request;
    request.path = info->local_uri != nullptr ? info->local_uri : "";
    request.query = info->query_string != nullptr ? info->query_string : "";
    HttpResponse response;
    if (request.path != path_) {  // civetweb also routes "<path>/anything" here
      Send(conn, HttpResponse::Of(404, "text/plain; charset=utf-8", "not found\n"));
      return true;
    }
    try {
      response = handler_(request);
    } catch (const std::exception& e) {
      response = HttpResponse::Of(500, "text/plain; charset=utf-8", absl::StrCat("internal error: ", e.what(), "\n"));
    }
    Send(conn, response);
    return true;
  }

 private:
  static bool NotAllowed(mg_connection* conn) {
    Send(conn, HttpResponse::Of(405, "text/plain; charset=utf-8", "only GET\n"), "Allow: GET\r\n");
    return true;
  }

  bool Authorized(mg_connection* conn) const {
    if (!auth_) return true;
    const char* header = mg_get_header(conn, "Authorization");
    if (header == nullptr || !absl::StartsWithIgnoreCase(header, "Basic ")) return false;
    std::string decoded;
    if (!absl::Base64Unescape(absl::string_view(header).substr(6), &decoded)) return false;
    return decoded == absl::StrCat(auth_->user, ":", auth_->password);
  }

  std::string path_;
  HttpListener::Handler handler_;
  std::optional<HttpListener::BasicAuth> auth_;
};

}  // namespace

std::optional<std::string> HttpRequest::Param(const std::string& name, int occurrence) const {
  std::string value(query.size() + 1, '\0');
  const int n = mg_get_var2(query.data(), query.size(), name.c_str(), value.data(), value.size(),
                            static_cast<size_t>(occurrence));
  if (n < 0) return std::nullopt;
  value.resize(static_cast<size_t>(n));
  return value;
}

struct HttpListener::Impl {
  std::vector<std::unique_ptr<RouteHandler>> handlers;  // outlive the server
  std::unique_ptr<CivetServer> server;
};

absl::StatusOr<std::unique_ptr<HttpListener>> HttpListener::Start(const std::string& address,
                                                                  std::optional<BasicAuth> auth,
                                                                  std::vector<Route> routes) {
  auto impl = std::make_unique<Impl>();
  try {
    // A request line and headers are bounded (16 KiB); a slow client is cut after 10 s.
    impl->server = std::make_unique<CivetServer>(std::vector<std::string>{
        "listening_ports", address, "num_threads", "4", "request_timeout_ms", "10000",
        "max_request_size", "16384"});
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("--metrics_address = \"", address, "\": cannot listen (is the port in use?); civetweb says: ", e.what()));
  }
  for (auto& route : routes) {
    impl->handlers.push_back(std::make_unique<RouteHandler>(route.path, std::move(route.handler), auth));
    impl->server->addHandler(route.path, impl->handlers.back().get());
  }
  const auto ports = impl->server->getListeningPorts();
  const int port = ports.empty() ? 0 : ports.front();
  return std::unique_ptr<HttpListener>(
      new HttpListener(std::move(impl), absl::StrCat(address.substr(0, address.rfind(':')), ":", port), port));
}

HttpListener::HttpListener(std::unique_ptr<Impl> impl, std::string address, int port)
    : impl_(std::move(impl)), address_(std::move(address)), port_(port) {}

HttpListener::~HttpListener() {
  std::atomic<bool> stopped{false};
  std::thread knocker([&] {
    while (!stopped.load()) {
      Knock(address_);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  impl_->server.reset();
  stopped.store(true);
  knocker.join();
}

}  // namespace kvledger
