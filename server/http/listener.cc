#include "server/http/listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <linux/sockios.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "server/http/request_parser.h"
#include "server/http/admission.h"
#include "server/http/transport.h"

namespace kvledger {
namespace {

using Clock = HttpClock;

// One client connection. It is either waiting (owned by the event thread: in its TLS handshake,
// idle between requests, or reading a request's line and headers) or in service (one worker's).
struct Connection {
  std::unique_ptr<Transport> io;
  std::string peer;     // the client's address, without its port: the unit of fairness
  std::string pending;  // bytes read and not yet consumed
  Clock::time_point deadline;
  bool started = false;      // the current request's first byte has arrived
  bool handshaking = false;  // TLS: the handshake is not done
  bool want_write = false;   // TLS: the handshake waits to write
  bool peer_done = false;    // the client half-closed: answer what it sent, then close
  // The rest of an answer the client was too slow to take from a worker, which the event thread
  // sends as the client reads (before `deadline`), then closes when `close_after`.
  std::string output;
  size_t output_sent = 0;
  size_t output_reserved = 0;  // of the parked budget
  bool close_after = false;
  // Told whether the answer last given reached the client whole (HttpResponse::delivered): pending
  // while its bytes are parked or not yet acknowledged by the client's TCP.
  std::function<void(bool whole)> delivered;
  bool writing() const { return output_sent < output.size(); }
  bool confirming() const { return !writing() && delivered != nullptr; }
  void Tell(bool whole) {
    if (delivered == nullptr) return;
    auto tell = std::move(delivered);
    delivered = nullptr;
    tell(whole);
  }
};

// Bytes written to the socket that the client's TCP has not acknowledged yet; -1 when the
// connection was reset or ended (what was queued will never be acknowledged) or cannot be read.
int Unacknowledged(int fd) {
  tcp_info info{};
  socklen_t length = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return -1;
  if (info.tcpi_state != TCP_ESTABLISHED && info.tcpi_state != TCP_CLOSE_WAIT) return -1;
  int queued = 0;
  return ioctl(fd, SIOCOUTQ, &queued) == 0 ? queued : -1;
}

// Where an answer's bytes go: straight to the socket while the client reads them; once it stalls
// for kStall, the rest is collected in the worker's memory and, at the end, parked whole with the
// event thread (MakeParkedBudget) to send as the client reads. An answer that cannot be parked whole is
// cut: a worker never waits on a slow reader longer than kStall per answer.
//
// Both waits (kStall and the answer's deadline) are read on the listener's clock; the socket is
// waited on in slices of kSlice of real time between readings, so a fake clock decides them too.
class AnswerSink {
 public:
  static constexpr auto kStall = std::chrono::milliseconds(100);
  static constexpr auto kSlice = std::chrono::milliseconds(5);
  AnswerSink(Transport& io, const HttpClockSource& clock, Clock::time_point deadline)
      : io_(io), clock_(clock), deadline_(deadline) {}

  bool Put(absl::string_view data) {
    if (broken_) return false;
    if (stalled_) {
      rest_.append(data.data(), data.size());
      return true;
    }
    const Clock::time_point until = std::min(deadline_, clock_() + kStall);
    while (!data.empty()) {
      const ssize_t n = io_.WriteSome(data, Clock::now() + kSlice);
      if (n < 0) return Fail();
      data.remove_prefix(static_cast<size_t>(n));
      if (n == 0 && clock_() >= until) break;
    }
    if (data.empty()) return true;
    stalled_ = true;
    rest_.assign(data.data(), data.size());
    return true;
  }
  // The answer asks for the connection to close after it (a failure answered 500).
  void CloseAfter() { close_after_ = true; }
  bool close_after() const { return close_after_; }
  // The unsent rest, parked whole within `budget` for `peer` (its reservation passes to the
  // caller); false when there is a rest and no room for it: the answer is cut.
  bool Park(PerPeerBudget& budget, const std::string& peer, std::string* rest, size_t* reserved) {
    *reserved = 0;
    rest->clear();
    if (broken_) return false;
    if (rest_.empty()) return true;
    if (!budget.TryTake(peer, rest_.size())) return Fail();
    *reserved = rest_.size();
    *rest = std::move(rest_);
    return true;
  }

 private:
  bool Fail() {
    broken_ = true;
    std::string().swap(rest_);
    return false;
  }

  Transport& io_;
  const HttpClockSource& clock_;
  const Clock::time_point deadline_;
  std::string rest_;
  bool stalled_ = false;
  bool broken_ = false;
  bool close_after_ = false;
};

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 403: return "Forbidden";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Unknown";
  }
}

HttpResponse Text(int status, std::string body, std::string extra_headers = "") {
  HttpResponse r = HttpResponse::Of(status, "text/plain; charset=utf-8", std::move(body));
  r.extra_headers = std::move(extra_headers);
  return r;
}

// How often an answer waiting for its acknowledgement is looked at.
constexpr int kConfirmEveryMs = 2;

// A response too small to be worth compressing goes out as it is.
constexpr size_t kGzipMinBytes = 1024;

// Writes `r` as one HTTP/1.1 response: a whole body in one write with its head (one segment on the
// wire, no delayed ACK), a streamed one in chunks; gzip when the client asked; no body for HEAD.
bool SendResponse(AnswerSink& out, const HttpResponse& r, const ParsedHead& head, bool close);

// A handler's failure, as 500; the connection closes after it.
bool SendFailure(AnswerSink& out, const ParsedHead& head, absl::string_view what) {
  out.CloseAfter();
  return SendResponse(out, Text(500, absl::StrCat("internal error: ", what, "\n")), head, true);
}

std::string ResponseHead(const HttpResponse& r, bool gzip, bool close) {
  return absl::StrCat("HTTP/1.1 ", r.status, " ", ReasonPhrase(r.status), "\r\nContent-Type: ", r.content_type,
                      "\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nVary: Accept-Encoding\r\n",
                      gzip ? "Content-Encoding: gzip\r\n" : "", close ? "Connection: close\r\n" : "", r.extra_headers);
}

// A streamed body: the head goes out with the first piece, so that a stream that throws before it
// is answered 500 instead; one that throws later is cut (its client sees no last chunk).
bool SendStream(AnswerSink& out, const HttpResponse& r, const ParsedHead& head, bool gzip, bool close) {
  std::string pending = ResponseHead(r, gzip, close) + "Transfer-Encoding: chunked\r\n\r\n";
  if (head.method == "HEAD") return out.Put(pending);
  bool ok = true;
  bool begun = false;
  GzipStream z;
  auto chunk = [&](absl::string_view data) {
    if (!ok || data.empty()) return;
    absl::StrAppend(&pending, absl::Hex(data.size()), "\r\n", data, "\r\n");
    begun = true;
    ok = out.Put(pending);
    pending.clear();
  };
  try {
    r.stream([&](std::string& piece) {
      if (ok) chunk(gzip ? z.Add(piece) : piece);
      return ok;
    });
  } catch (const std::exception& e) {
    return !begun && SendFailure(out, head, e.what());
  } catch (...) {
    return !begun && SendFailure(out, head, "unknown exception");
  }
  if (gzip) chunk(z.Finish());
  return ok && out.Put(pending + "0\r\n\r\n");
}

bool SendResponse(AnswerSink& out, const HttpResponse& r, const ParsedHead& head, bool close) {
  const bool gzip = head.gzip && (r.stream || r.body.size() >= kGzipMinBytes);
  if (r.stream) return SendStream(out, r, head, gzip, close);
  std::string text = ResponseHead(r, gzip, close);
  std::string payload;
  if (gzip) {  // two statements: the order of Add and Finish matters
    GzipStream z;
    payload = z.Add(r.body);
    payload += z.Finish();
  }
  const std::string& sent = gzip ? payload : r.body;
  absl::StrAppend(&text, "Content-Length: ", sent.size(), "\r\n\r\n");
  if (head.method != "HEAD") text += sent;
  return out.Put(text);
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

// The limits as applied: HTTP connections held to a quarter of the descriptor limit (as the process
// has it: raising it is main's business), so they never take the descriptors gRPC needs.
HttpLimits Applied(HttpLimits limits) {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
    const auto quarter = static_cast<int>(std::min<rlim_t>(files.rlim_cur / 4, 1 << 20));
    limits.connections = std::max(8, std::min(limits.connections, quarter));
  }
  limits.connections_per_client = std::min(limits.connections_per_client, limits.connections);
  limits.in_flight_per_client = std::max(limits.in_flight_per_client, 1);
  return limits;
}

AdmissionLimits AdmissionOf(const HttpLimits& limits) {
  return {limits.connections, limits.connections_per_client, limits.max_in_flight, limits.in_flight_per_client,
          limits.served_per_client};
}

// The listener's threads never take SIGPIPE: OpenSSL writes to a socket the client closed with
// write(), and a blocked, thread-directed SIGPIPE stays pending instead of ending the process.
void BlockSigpipe() {
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
}

// A plain HTTP request on the TLS port gets what Go's servers answer, not a reset.
constexpr char kPlainHttpOnTls[] =
    "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
    "Client sent an HTTP request to an HTTPS server.\n";

// A refusal made at admission, as a whole answer with its status from HttpStatusOf.
std::string Refusal(const absl::Status& refused, absl::string_view extra = "") {
  const int status = HttpStatusOf(refused);
  const absl::string_view why = refused.message();
  return absl::StrCat("HTTP/1.1 ", status, " ", ReasonPhrase(status), "\r\nContent-Type: text/plain; charset=utf-8\r\n",
                      "Content-Length: ", why.size() + 1, "\r\n", extra, "Connection: close\r\n\r\n", why, "\n");
}

}  // namespace

std::optional<std::string> HttpRequest::Param(const std::string& name, int occurrence) const {
  return QueryParam(query, name, occurrence);
}

std::vector<std::string> HttpRequest::ParamNames() const { return QueryParamNames(query); }

struct HttpListener::Impl {
  Impl(int listen_fd, const HttpLimits& limits, HttpSecurity security, std::vector<Route> routes,
       HttpClockSource clock)
      : listen_fd(listen_fd), wake_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)), limits(limits),
        parked(MakeParkedBudget(limits.parked_bytes)), security(std::move(security)), routes(std::move(routes)),
        clock(std::move(clock)), connections(AdmissionOf(limits)), queue(AdmissionOf(limits)) {}
  ~Impl();

  using Waiting = std::list<std::unique_ptr<Connection>>;
  void Run();                  // the event thread
  bool PollOnce(std::vector<pollfd>& fds, std::vector<Waiting::iterator>& polled);
  void Event(Waiting::iterator it);
  bool Handshake(Waiting::iterator it);  // false: the connection is gone
  void TakeBackServed();       // the connections the workers are done with
  void TakeBackLocked(std::vector<std::unique_ptr<Connection>>& ready);  // with mu held
  Clock::time_point CloseExpired(Clock::time_point now);
  void Work();                 // a worker thread
  void Accept();
  absl::Status Admit(Connection& c);  // with mu held: a slot for the new connection
  bool ReadFrom(Connection& c, bool* complete);
  void Dispatch(std::unique_ptr<Connection> c);
  bool Serve(Connection& c);   // one request whose head is in c.pending; false: close
  void WriteParked(Waiting::iterator it);  // the event thread's part
  void Finish(Waiting::iterator it);       // an answer all on the socket: confirmed, then the next
  HttpResponse Answer(const ParsedHead& head, const std::string& peer) const;
  void Wake();
  void Close(std::unique_ptr<Connection> c);  // with mu held
  void CloseWaiting(Waiting::iterator it);    // takes mu

  const int listen_fd;
  const int wake_fd;
  const HttpLimits limits;
  mutable PerPeerBudget parked;
  const HttpSecurity security;
  const std::vector<Route> routes;
  // The connections' deadlines (head, idle, answer) are read on it; a socket write's wait is real time.
  const HttpClockSource clock;

  std::mutex mu;  // guards what follows, up to `waiting`
  std::condition_variable work_ready;
  bool stopping = false;
  std::vector<std::unique_ptr<Connection>> returned;  // served, to wait again
  std::set<Connection*> serving;                      // in a worker's hands (aborted on stop)
  ConnectionTable connections;                        // open connections per address
  FairQueue<std::unique_ptr<Connection>> queue;       // requests waiting for a worker or in service
  Waiting waiting;  // the event thread's own (but Admit may close one)
  Clock::time_point accept_paused_until;  // out of descriptors: accept again from then
  std::thread events;
  std::vector<std::thread> workers;
};

void HttpListener::Impl::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = write(wake_fd, &one, sizeof(one));
}

void HttpListener::Impl::Close(std::unique_ptr<Connection> c) {
  c->Tell(false);  // the connection ends before its answer was acknowledged
  connections.Closed(c->peer);
  parked.Give(c->peer, c->output_reserved);
  c.reset();  // the transport closes the socket
}

void HttpListener::Impl::CloseWaiting(Waiting::iterator it) {
  std::lock_guard<std::mutex> lock(mu);
  Close(std::move(*it));
  waiting.erase(it);
}

absl::Status HttpListener::Impl::Admit(Connection& c) {
  std::optional<std::string> victim;
  if (absl::Status s = connections.MayOpen(c.peer, &victim); !s.ok()) return s;
  if (victim) {
    // Full: a waiting connection (idle, trickling a head, in its handshake) of the address holding
    // the most makes room; its client reconnects when it has a request.
    auto it = std::find_if(waiting.begin(), waiting.end(),
                           [&](const auto& w) { return w->peer == *victim && !w->writing(); });
    if (it == waiting.end()) return absl::ResourceExhaustedError("every connection is open and busy");
    Close(std::move(*it));
    waiting.erase(it);
  }
  connections.Opened(c.peer);
  return absl::OkStatus();
}

void HttpListener::Impl::Accept() {
  for (;;) {
    sockaddr_storage peer{};
    socklen_t length = sizeof(peer);
    const int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors: the listening socket stays readable, so stop polling it for a while
      // rather than spin; the pending connections wait in the kernel's queue.
      if (errno == EMFILE || errno == ENFILE) accept_paused_until = clock() + std::chrono::milliseconds(100);
      return;
    }
    const int on = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    auto c = std::make_unique<Connection>();
    c->io = Transport::Make(fd, security.tls ? security.tls->get() : nullptr);
    c->peer = PeerAddress(peer);
    c->handshaking = security.tls != nullptr;
    c->deadline = clock() + std::chrono::seconds(limits.head_seconds);
    std::lock_guard<std::mutex> lock(mu);
    if (absl::Status admitted = Admit(*c); !admitted.ok()) {
      if (!security.tls) c->io->Write(Refusal(admitted), Clock::now());  // one try, no wait
      continue;
    }
    waiting.push_back(std::move(c));
  }
}

bool HttpListener::Impl::ReadFrom(Connection& c, bool* complete) {
  char buffer[4096];
  for (;;) {
    const ssize_t n = c.io->Read(buffer, sizeof(buffer));
    if (n == Transport::kBroken) return false;
    if (n == Transport::kWouldBlock) break;
    if (n == 0) {  // the client half-closed: what it sent is still answered
      c.peer_done = true;
      break;
    }
    if (!c.started) {
      c.started = true;  // a request begins: its head must arrive in head_seconds
      c.deadline = clock() + std::chrono::seconds(limits.head_seconds);
    }
    c.pending.append(buffer, static_cast<size_t>(n));
    if (c.pending.size() > limits.head_bytes) break;
  }
  *complete = HeadEnd(c.pending) != std::string::npos || c.pending.size() > limits.head_bytes;
  return *complete || !c.peer_done;
}

void HttpListener::Impl::Dispatch(std::unique_ptr<Connection> c) {
  std::lock_guard<std::mutex> lock(mu);
  if (absl::Status s = queue.MayAdmit(c->peer); !s.ok()) {  // promhttp's MaxRequestsInFlight: a prompt 503
    c->io->Write(Refusal(s, "Retry-After: 1\r\n"), Clock::now());  // one try: never waits
    Close(std::move(c));
    return;
  }
  const std::string peer = c->peer;
  queue.Push(peer, std::move(c));
  work_ready.notify_one();
}

void HttpListener::Impl::TakeBackServed() {
  std::vector<std::unique_ptr<Connection>> ready;  // the next request is here already
  {
    std::lock_guard<std::mutex> lock(mu);
    TakeBackLocked(ready);
  }
  for (auto& c : ready) Dispatch(std::move(c));
}

void HttpListener::Impl::TakeBackLocked(std::vector<std::unique_ptr<Connection>>& ready) {
  for (auto& c : returned) {  // served: its address's next request may go, and it waits again
    queue.Done(c->peer);
    if (queue.HasNext()) work_ready.notify_one();
    if (c->io == nullptr) {  // the worker closed it
      Close(std::move(c));
      continue;
    }
    if (!c->writing() && !c->confirming() && HeadEnd(c->pending) != std::string::npos) {
      ready.push_back(std::move(c));
      continue;
    }
    waiting.push_back(std::move(c));
  }
  returned.clear();
}

Clock::time_point HttpListener::Impl::CloseExpired(Clock::time_point now) {
  Clock::time_point next = now + std::chrono::seconds(1);
  std::lock_guard<std::mutex> lock(mu);
  for (auto it = waiting.begin(); it != waiting.end();) {
    if ((*it)->deadline > now) {
      next = std::min(next, (*it)->deadline);
      ++it;
      continue;
    }
    Close(std::move(*it));  // too slow, or idle too long
    it = waiting.erase(it);
  }
  return next;
}

void HttpListener::Impl::WriteParked(Waiting::iterator it) {
  Connection& c = **it;
  const ssize_t n = c.io->WriteSome(absl::string_view(c.output).substr(c.output_sent), Clock::now());
  if (n >= 0) c.output_sent += static_cast<size_t>(n);
  if (n >= 0 && c.writing()) return;  // more when the client reads
  {
    std::lock_guard<std::mutex> lock(mu);
    parked.Give(c.peer, c.output_reserved);
    c.output_reserved = 0;
    std::string().swap(c.output);  // its memory goes back, not just its length
    c.output_sent = 0;
    if (n < 0) {
      Close(std::move(*it));
      waiting.erase(it);
      return;
    }
  }
  Finish(it);
}

// The answer is all on the socket. Its route is told once the client's TCP has acknowledged the
// last byte (looked at on each turn of the event thread until then, up to the answer's deadline);
// then the connection closes, or waits for its next request (dispatched at once if pipelined).
void HttpListener::Impl::Finish(Waiting::iterator it) {
  Connection& c = **it;
  if (c.delivered != nullptr) {
    const int unacknowledged = Unacknowledged(c.io->fd());
    if (unacknowledged > 0) return;
    c.Tell(unacknowledged == 0);
  }
  std::unique_lock<std::mutex> lock(mu);
  if (c.close_after) {
    Close(std::move(*it));
    waiting.erase(it);
    return;
  }
  c.started = !c.pending.empty();
  c.deadline = clock() + std::chrono::seconds(c.started ? limits.head_seconds : limits.idle_seconds);
  if (HeadEnd(c.pending) == std::string::npos) return;
  auto owned = std::move(*it);  // a pipelined request is here already
  waiting.erase(it);
  lock.unlock();
  Dispatch(std::move(owned));
}

bool HttpListener::Impl::Handshake(Waiting::iterator it) {
  Connection& c = **it;
  switch (c.io->Continue()) {
    case Transport::Handshake::kDone: c.handshaking = false; return true;
    case Transport::Handshake::kWantRead: c.want_write = false; return false;
    case Transport::Handshake::kWantWrite: c.want_write = true; return false;
    case Transport::Handshake::kPlainHttp:
      c.io->WritePlain(kPlainHttpOnTls);
      CloseWaiting(it);
      return false;
    case Transport::Handshake::kFailed: CloseWaiting(it); return false;
  }
  return false;
}

void HttpListener::Impl::Event(Waiting::iterator it) {
  Connection& c = **it;
  if (c.writing()) {
    WriteParked(it);
    return;
  }
  if (c.confirming()) {
    Finish(it);
    return;
  }
  if (c.handshaking && !Handshake(it)) return;
  bool complete = false;
  if (!ReadFrom(c, &complete)) {
    CloseWaiting(it);
  } else if (complete) {
    auto owned = std::move(*it);
    {
      std::lock_guard<std::mutex> lock(mu);
      waiting.erase(it);
    }
    Dispatch(std::move(owned));
  }
}

bool HttpListener::Impl::PollOnce(std::vector<pollfd>& fds, std::vector<Waiting::iterator>& polled) {
  TakeBackServed();
  const Clock::time_point now = clock();
  const Clock::time_point next = CloseExpired(now);
  fds.assign({{now >= accept_paused_until ? listen_fd : -1, POLLIN, 0}, {wake_fd, POLLIN, 0}});
  polled.clear();
  bool buffered = false;    // TLS holds decrypted bytes: no socket event will announce them
  bool confirming = false;  // an answer waits for its acknowledgement: no event announces it either
  for (auto it = waiting.begin(); it != waiting.end(); ++it) {
    const Connection& c = **it;
    buffered = buffered || (!c.handshaking && !c.writing() && !c.confirming() && !c.io->NeedsSocket());
    confirming = confirming || c.confirming();
    const bool out = c.writing() || (c.handshaking && c.want_write);
    const short events = c.confirming() ? 0 : out ? POLLOUT : POLLIN;
    fds.push_back({c.io->fd(), events, 0});
    polled.push_back(it);
  }
  auto timeout = buffered ? 0 : std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1;
  if (confirming) timeout = std::min<decltype(timeout)>(timeout, kConfirmEveryMs);
  if (poll(fds.data(), fds.size(), static_cast<int>(timeout)) < 0 && errno != EINTR) return false;
  if (fds[1].revents != 0) {
    uint64_t count;
    [[maybe_unused]] const ssize_t n = read(wake_fd, &count, sizeof(count));
  }
  for (size_t i = 2; i < fds.size(); ++i) {
    const Connection& c = *polled[i - 2]->get();
    if (fds[i].revents != 0 || c.confirming() || (!c.handshaking && !c.writing() && !c.io->NeedsSocket())) {
      Event(polled[i - 2]);
    }
  }
  if (fds[0].revents != 0) Accept();
  return true;
}

void HttpListener::Impl::Run() {
  BlockSigpipe();
  std::vector<pollfd> fds;
  std::vector<Waiting::iterator> polled;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stopping) return;
    }
    if (!PollOnce(fds, polled)) return;
  }
}

void HttpListener::Impl::Work() {
  BlockSigpipe();
  for (;;) {
    std::unique_ptr<Connection> c;
    {
      std::unique_lock<std::mutex> lock(mu);
      work_ready.wait(lock, [this] { return stopping || queue.HasNext(); });
      if (stopping) return;
      c = std::move(queue.Next()->second);
      serving.insert(c.get());
    }
    const bool keep = Serve(*c);
    std::unique_lock<std::mutex> lock(mu);
    serving.erase(c.get());
    if (!keep && !c->writing() && !c->confirming()) c->io.reset();
    c->started = !c->pending.empty();
    if (c->pending.capacity() > limits.head_bytes && c->pending.size() < 4096) c->pending.shrink_to_fit();
    if (!c->writing() && !c->confirming()) {
      c->deadline = clock() + std::chrono::seconds(c->started ? limits.head_seconds : limits.idle_seconds);
    }
    returned.push_back(std::move(c));
    lock.unlock();
    Wake();
  }
}

bool HttpListener::Impl::Serve(Connection& c) {
  AnswerSink out(*c.io, clock, clock() + std::chrono::seconds(limits.answer_seconds));
  ParsedHead head;
  bool close = true;
  bool ok = false;
  std::function<void(bool)> delivered;
  const size_t end = HeadEnd(c.pending);
  if (end == std::string::npos || end > limits.head_bytes) {
    ok = SendResponse(out, Text(431, absl::StrCat("request line and headers: more than ", limits.head_bytes,
                                                  " bytes\n")), head, true);
  } else if (const absl::Status parsed = ParseHead(&c.pending, &head); !parsed.ok()) {
    ok = SendResponse(out, Text(400, absl::StrCat(parsed.message(), "\n")), head, true);
  } else {
    close = head.close || c.peer_done || (head.method != "GET" && head.method != "HEAD");
    try {
      HttpResponse response = Answer(head, c.peer);
      delivered = std::move(response.delivered);
      ok = SendResponse(out, response, head, close);
    } catch (const std::exception& e) {
      ok = SendFailure(out, head, e.what());
    } catch (...) {
      ok = SendFailure(out, head, "unknown exception");
    }
    close = close || out.close_after();
  }
  // The rest, parked whole for the event thread to send by the deadline, or the answer is cut.
  ok = out.Park(parked, c.peer, &c.output, &c.output_reserved) && ok;
  c.output_sent = 0;
  c.close_after = close || !ok;
  c.deadline = clock() + std::chrono::seconds(limits.answer_seconds);
  if (!ok) {
    parked.Give(c.peer, c.output_reserved);
    c.output_reserved = 0;
    std::string().swap(c.output);
    if (delivered) delivered(false);
  } else {
    c.delivered = std::move(delivered);  // told once the event thread sees the last byte acknowledged
  }
  return ok && !close;
}

HttpResponse HttpListener::Impl::Answer(const ParsedHead& head, const std::string& peer) const {
  if (head.method != "GET" && head.method != "HEAD") return Text(405, "only GET and HEAD\n", "Allow: GET, HEAD\r\n");
  if (security.auth) {
    std::string why;
    switch (security.auth->Check(head.authorization, peer, &why)) {
      case BasicAuthenticator::Verdict::kAllowed: break;
      case BasicAuthenticator::Verdict::kDenied:
        return Text(401, "authentication required\n", "WWW-Authenticate: Basic realm=\"kvledger\"\r\n");
      case BasicAuthenticator::Verdict::kThrottled:
        return Text(429, absl::StrCat(why, "; retry in a second\n"), "Retry-After: 1\r\n");
    }
  }
  for (const Route& route : routes) {
    if (route.path == head.request.path) {
      HttpRequest request = head.request;
      request.peer = peer;
      return route.handler(request);
    }
  }
  return Text(404, "not found\n");
}

HttpListener::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
    for (Connection* c : serving) c->io->Abort();  // a worker blocked on a slow reader returns at once
  }
  work_ready.notify_all();
  Wake();
  if (events.joinable()) events.join();
  for (std::thread& worker : workers) worker.join();
  queue.TakeWaiting();  // their transports close
  close(listen_fd);
  close(wake_fd);
}  // the connections close with their transports

absl::StatusOr<std::unique_ptr<HttpListener>> HttpListener::Start(const std::string& address, const HttpLimits& limits,
                                                                  HttpSecurity security, std::vector<Route> routes,
                                                                  HttpClockSource clock) {
  std::string error;
  const int fd = Listen(address, &error);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("--metrics_address = \"", address, "\": cannot listen (is the port in use?): ", error));
  }
  const int port = BoundPort(fd);
  auto impl = std::make_unique<Impl>(fd, Applied(limits), std::move(security), std::move(routes), std::move(clock));
  impl->events = std::thread([raw = impl.get()] { raw->Run(); });
  for (int i = 0; i < impl->limits.workers; ++i) impl->workers.emplace_back([raw = impl.get()] { raw->Work(); });
  return std::unique_ptr<HttpListener>(
      new HttpListener(std::move(impl), absl::StrCat(address.substr(0, address.rfind(':')), ":", port), port));
}

HttpListener::HttpListener(std::unique_ptr<Impl> impl, std::string address, int port)
    : impl_(std::move(impl)), address_(std::move(address)), port_(port) {}

HttpListener::~HttpListener() = default;

const HttpLimits& HttpListener::limits() const { return impl_->limits; }

const char* HttpListener::scheme() const { return impl_->security.tls ? "https" : "http"; }

absl::Status ProbeListen(const std::string& address) {
  std::string error;
  const int fd = Listen(address, &error);
  if (fd < 0) return absl::UnavailableError(error);
  close(fd);
  return absl::OkStatus();
}

}  // namespace kvledger
