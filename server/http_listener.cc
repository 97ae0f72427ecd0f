#include "server/http_listener.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <arpa/inet.h>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <list>
#include <map>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/http_request_parser.h"

namespace kvledger {
namespace {

using Clock = std::chrono::steady_clock;

// One client connection. It is either waiting (owned by the event thread: idle between requests,
// or reading a request's line and headers) or in service (owned by one worker).
struct Connection {
  int fd = -1;
  std::string peer;     // the client's address, without its port: the unit of fairness
  std::string pending;  // bytes read and not yet consumed
  Clock::time_point deadline;
  bool started = false;  // the current request's first byte has arrived
};

// The sole reason text the responses need.
const char* ReasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

// Writes all of `data` (blocking, bounded by the socket's send timeout); false when the client is
// gone or did not read for HttpLimits::kWriteSeconds.
bool SendAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Writes `r` as one HTTP/1.1 response; false when the connection broke.
bool SendResponse(int fd, const HttpResponse& r, bool close, absl::string_view extra_headers = "") {
  const std::string head = absl::StrCat(
      "HTTP/1.1 ", r.status, " ", ReasonPhrase(r.status), "\r\nContent-Type: ", r.content_type,
      r.stream ? "\r\nTransfer-Encoding: chunked" : absl::StrCat("\r\nContent-Length: ", r.body.size()),
      "\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n", close ? "Connection: close\r\n" : "",
      extra_headers, "\r\n");
  if (!r.stream) return SendAll(fd, head) && SendAll(fd, r.body);
  bool ok = SendAll(fd, head);
  r.stream([&](std::string& piece) {
    if (ok && !piece.empty()) {
      ok = SendAll(fd, absl::StrCat(absl::Hex(piece.size()), "\r\n")) && SendAll(fd, piece) && SendAll(fd, "\r\n");
    }
  });
  return ok && SendAll(fd, "0\r\n\r\n");
}

HttpResponse Text(int status, std::string body) {
  return HttpResponse::Of(status, "text/plain; charset=utf-8", std::move(body));
}

// Binds and listens on "host:port" ("[v6]:port" too). -1 with `error` set when it cannot.
int Listen(const std::string& address, std::string* error) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    *error = "not host:port";
    return -1;
  }
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    *error = gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  *error = "no address to bind";
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 512) != 0) {
      *error = strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0) return 0;
  if (bound.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

std::string PeerAddress(const sockaddr_storage& peer) {
  char text[INET6_ADDRSTRLEN] = "";
  if (peer.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&peer)->sin6_addr, text, sizeof(text));
  } else if (peer.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&peer)->sin_addr, text, sizeof(text));
  }
  return text;
}

void SetBlocking(int fd, bool blocking) {
  const int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, blocking ? (flags & ~O_NONBLOCK) : (flags | O_NONBLOCK));
}

}  // namespace

std::optional<std::string> HttpRequest::Param(const std::string& name, int occurrence) const {
  return QueryParam(query, name, occurrence);
}

std::vector<std::string> HttpRequest::ParamNames() const { return QueryParamNames(query); }

// The event thread owns the listening socket and every waiting connection; it reads request heads
// without blocking, so a slow client costs a buffer, never a worker. A complete head is handed to
// the workers, at most HttpLimits::kServedPerClient at once per client address; the rest of that
// client's requests wait their turn, and other clients are served meanwhile.
struct HttpListener::Impl {
  Impl(int listen_fd, std::optional<BasicAuth> auth, std::vector<Route> routes)
      : listen_fd(listen_fd), wake_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)), auth(std::move(auth)),
        routes(std::move(routes)) {}
  ~Impl();

  void Run();  // the event thread
  void TakeBackServed();  // the connections the workers are done with
  void TakeBackLocked(std::vector<std::unique_ptr<Connection>>& pipelined);  // with mu held
  // Closes the waiting connections past their deadline; the next deadline (at most a second away).
  Clock::time_point CloseExpired(Clock::time_point now);
  void Work();  // a worker thread
  void Accept();
  // Reads what `c` sent; false when it is to be closed. Sets `complete` when a head has arrived.
  bool ReadFrom(Connection& c, bool* complete);
  void Dispatch(std::unique_ptr<Connection> c);
  // Serves one request whose head is in c.pending; false when the connection is to be closed.
  bool Serve(Connection& c);
  HttpResponse Answer(const ParsedHead& head, std::string* extra_headers) const;
  bool Authorized(const ParsedHead& head) const;
  void Wake();
  void Close(std::unique_ptr<Connection> c);  // with mu held

  const int listen_fd;
  const int wake_fd;
  const std::optional<BasicAuth> auth;
  const std::vector<Route> routes;

  std::mutex mu;  // guards what follows, up to `waiting`
  std::condition_variable work_ready;
  bool stopping = false;
  std::deque<std::unique_ptr<Connection>> work;       // heads ready for a worker
  std::vector<std::unique_ptr<Connection>> returned;  // served, to wait again
  std::map<std::string, int> open_per_client;
  std::map<std::string, int> served_per_client;  // dispatched, not yet returned
  std::map<std::string, std::deque<std::unique_ptr<Connection>>> queued;
  int open_total = 0;
  std::list<std::unique_ptr<Connection>> waiting;  // the event thread's own
  Clock::time_point accept_paused_until;  // out of descriptors: accept again from then
  std::thread events;
  std::vector<std::thread> workers;
};

void HttpListener::Impl::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = write(wake_fd, &one, sizeof(one));
}

void HttpListener::Impl::Close(std::unique_ptr<Connection> c) {
  if (--open_per_client[c->peer] == 0) open_per_client.erase(c->peer);
  --open_total;
  close(c->fd);
}

void HttpListener::Impl::Accept() {
  for (;;) {
    sockaddr_storage peer{};
    socklen_t length = sizeof(peer);
    const int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors: the listening socket stays readable, so stop polling it for a while
      // rather than spin; the pending connections wait in the kernel's queue.
      if (errno == EMFILE || errno == ENFILE) accept_paused_until = Clock::now() + std::chrono::milliseconds(100);
      return;
    }
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->peer = PeerAddress(peer);
    c->deadline = Clock::now() + std::chrono::seconds(HttpLimits::kHeadSeconds);
    std::lock_guard<std::mutex> lock(mu);
    if (open_total >= HttpLimits::kConnections || open_per_client[c->peer] >= HttpLimits::kConnectionsPerClient) {
      if (open_per_client[c->peer] == 0) open_per_client.erase(c->peer);
      SendAll(fd, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      close(fd);  // best effort: a non-blocking write of a short reply, then the door
      continue;
    }
    ++open_per_client[c->peer];
    ++open_total;
    waiting.push_back(std::move(c));
  }
}

bool HttpListener::Impl::ReadFrom(Connection& c, bool* complete) {
  char buffer[4096];
  for (;;) {
    const ssize_t n = recv(c.fd, buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;  // EAGAIN: all there is for now
    if (n == 0) return false;  // the client closed
    if (!c.started) {
      c.started = true;  // a request begins: its head must arrive in kHeadSeconds
      c.deadline = Clock::now() + std::chrono::seconds(HttpLimits::kHeadSeconds);
    }
    c.pending.append(buffer, static_cast<size_t>(n));
    if (c.pending.size() > HttpLimits::kHeadBytes) break;
  }
  *complete = HeadComplete(c.pending) || c.pending.size() > HttpLimits::kHeadBytes;
  return true;
}

void HttpListener::Impl::Dispatch(std::unique_ptr<Connection> c) {
  std::lock_guard<std::mutex> lock(mu);
  if (served_per_client[c->peer] >= HttpLimits::kServedPerClient) {
    queued[c->peer].push_back(std::move(c));  // its turn comes when one of its client's is served
    return;
  }
  ++served_per_client[c->peer];
  work.push_back(std::move(c));
  work_ready.notify_one();
}

void HttpListener::Impl::TakeBackServed() {
  std::vector<std::unique_ptr<Connection>> pipelined;  // the next request is here already
  {
    std::lock_guard<std::mutex> lock(mu);
    TakeBackLocked(pipelined);
  }
  for (auto& c : pipelined) Dispatch(std::move(c));
}

void HttpListener::Impl::TakeBackLocked(std::vector<std::unique_ptr<Connection>>& pipelined) {
  for (auto& c : returned) {  // served: its client's next queued request may go, and it waits again
    const std::string peer = c->peer;
    if (--served_per_client[peer] == 0) served_per_client.erase(peer);
    if (auto q = queued.find(peer); q != queued.end()) {
      ++served_per_client[peer];
      work.push_back(std::move(q->second.front()));
      q->second.pop_front();
      if (q->second.empty()) queued.erase(q);
      work_ready.notify_one();
    }
    if (c->fd < 0) {  // the worker closed it
      if (--open_per_client[peer] == 0) open_per_client.erase(peer);
      --open_total;
      continue;
    }
    if (HeadComplete(c->pending)) {
      pipelined.push_back(std::move(c));
      continue;
    }
    waiting.push_back(std::move(c));
  }
  returned.clear();
}

Clock::time_point HttpListener::Impl::CloseExpired(Clock::time_point now) {
  Clock::time_point next = now + std::chrono::seconds(1);
  for (auto it = waiting.begin(); it != waiting.end();) {
    if ((*it)->deadline > now) {
      next = std::min(next, (*it)->deadline);
      ++it;
      continue;
    }
    std::lock_guard<std::mutex> lock(mu);  // too slow, or idle too long
    Close(std::move(*it));
    it = waiting.erase(it);
  }
  return next;
}

void HttpListener::Impl::Run() {
  std::vector<pollfd> fds;
  std::vector<std::list<std::unique_ptr<Connection>>::iterator> polled;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stopping) return;
    }
    TakeBackServed();
    const Clock::time_point now = Clock::now();
    const Clock::time_point next = CloseExpired(now);
    const bool accepting = now >= accept_paused_until;
    fds.assign({{accepting ? listen_fd : -1, POLLIN, 0}, {wake_fd, POLLIN, 0}});
    polled.clear();
    for (auto it = waiting.begin(); it != waiting.end(); ++it) {
      fds.push_back({(*it)->fd, POLLIN, 0});
      polled.push_back(it);
    }
    const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1;
    if (poll(fds.data(), fds.size(), static_cast<int>(timeout)) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) {
      uint64_t count;
      [[maybe_unused]] const ssize_t n = read(wake_fd, &count, sizeof(count));
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const auto it = polled[i - 2];
      bool complete = false;
      if (!ReadFrom(**it, &complete)) {
        std::lock_guard<std::mutex> lock(mu);
        Close(std::move(*it));
        waiting.erase(it);
      } else if (complete) {
        Dispatch(std::move(*it));
        waiting.erase(it);
      }
    }
    if (fds[0].revents != 0) Accept();
  }
}

void HttpListener::Impl::Work() {
  for (;;) {
    std::unique_ptr<Connection> c;
    {
      std::unique_lock<std::mutex> lock(mu);
      work_ready.wait(lock, [this] { return stopping || !work.empty(); });
      if (stopping) return;
      c = std::move(work.front());
      work.pop_front();
    }
    SetBlocking(c->fd, true);
    const bool keep = Serve(*c);
    SetBlocking(c->fd, false);
    if (!keep) {
      close(c->fd);
      c->fd = -1;
    }
    c->started = !c->pending.empty();
    c->deadline = Clock::now() + std::chrono::seconds(c->started ? HttpLimits::kHeadSeconds : HttpLimits::kIdleSeconds);
    {
      std::lock_guard<std::mutex> lock(mu);
      returned.push_back(std::move(c));
    }
    Wake();
  }
}

bool HttpListener::Impl::Serve(Connection& c) {
  const timeval write_timeout{HttpLimits::kWriteSeconds, 0};
  setsockopt(c.fd, SOL_SOCKET, SO_SNDTIMEO, &write_timeout, sizeof(write_timeout));
  if (!HeadComplete(c.pending)) {
    SendResponse(c.fd, Text(431, "request line and headers: more than 16384 bytes\n"), true);
    return false;
  }
  ParsedHead head;
  const absl::Status parsed = ParseHead(&c.pending, &head);
  if (!parsed.ok()) {
    SendResponse(c.fd, Text(400, absl::StrCat(parsed.message(), "\n")), true);
    return false;
  }
  std::string extra_headers;
  HttpResponse response;
  try {
    response = Answer(head, &extra_headers);
  } catch (const std::exception& e) {
    response = Text(500, absl::StrCat("internal error: ", e.what(), "\n"));
  }
  const bool close = head.close || head.method != "GET";
  return SendResponse(c.fd, response, close, extra_headers) && !close;
}

HttpResponse HttpListener::Impl::Answer(const ParsedHead& head, std::string* extra_headers) const {
  if (head.method != "GET") {  // every route is read-only
    *extra_headers = "Allow: GET\r\n";
    return Text(405, "only GET\n");
  }
  if (!Authorized(head)) {
    *extra_headers = "WWW-Authenticate: Basic realm=\"kvledger\"\r\n";
    return Text(401, "authentication required\n");
  }
  for (const Route& route : routes) {
    if (route.path != head.request.path) continue;
    return route.handler(head.request);
  }
  return Text(404, "not found\n");
}

bool HttpListener::Impl::Authorized(const ParsedHead& head) const {
  if (!auth) return true;
  const absl::string_view header = head.authorization;
  if (!absl::StartsWithIgnoreCase(header, "Basic ")) return false;
  std::string decoded;
  if (!absl::Base64Unescape(header.substr(6), &decoded)) return false;
  return decoded == absl::StrCat(auth->user, ":", auth->password);
}

HttpListener::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
  }
  work_ready.notify_all();
  Wake();
  if (events.joinable()) events.join();
  for (std::thread& worker : workers) worker.join();
  for (auto& c : waiting) close(c->fd);
  std::lock_guard<std::mutex> lock(mu);
  for (auto& c : work) close(c->fd);
  for (auto& c : returned) {
    if (c->fd >= 0) close(c->fd);
  }
  for (auto& [peer, q] : queued) {
    for (auto& c : q) close(c->fd);
  }
  close(listen_fd);
  close(wake_fd);
}

absl::StatusOr<std::unique_ptr<HttpListener>> HttpListener::Start(const std::string& address,
                                                                  std::optional<BasicAuth> auth,
                                                                  std::vector<Route> routes) {
  std::string error;
  const int fd = Listen(address, &error);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("--metrics_address = \"", address, "\": cannot listen (is the port in use?): ", error));
  }
  const int port = BoundPort(fd);
  auto impl = std::make_unique<Impl>(fd, std::move(auth), std::move(routes));
  impl->events = std::thread([raw = impl.get()] { raw->Run(); });
  for (int i = 0; i < HttpLimits::kWorkers; ++i) impl->workers.emplace_back([raw = impl.get()] { raw->Work(); });
  return std::unique_ptr<HttpListener>(
      new HttpListener(std::move(impl), absl::StrCat(address.substr(0, address.rfind(':')), ":", port), port));
}

HttpListener::HttpListener(std::unique_ptr<Impl> impl, std::string address, int port)
    : impl_(std::move(impl)), address_(std::move(address)), port_(port) {}

HttpListener::~HttpListener() = default;

}  // namespace kvledger
