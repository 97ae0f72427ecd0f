#include "server/fleet_poller.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "lib/base/quote.h"
#include "lib/wire/prometheus_vector.h"
#include "server/server_metrics.h"

namespace kvledger {
namespace {

constexpr absl::Duration kMaxFetchTime = absl::Seconds(10);

// Milliseconds left until `deadline`, at least 0 and at most 100 (cancellation is checked as often).
int MillisLeft(absl::Time deadline) {
  return static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(deadline - absl::Now()), 0, 100));
}

// Waits for `events` until `deadline`; false when it passed, the socket broke or `cancel` was notified.
bool Await(int fd, short events, absl::Time deadline, const absl::Notification* cancel) {
  pollfd p{fd, events, 0};
  for (;;) {
    if (cancel != nullptr && cancel->HasBeenNotified()) return false;
    const int n = poll(&p, 1, MillisLeft(deadline));
    if (n > 0) return true;
    if ((n < 0 && errno != EINTR) || (n == 0 && absl::Now() >= deadline)) return false;
  }
}

// A connected non-blocking socket to one of `url`'s addresses, or -1 with `error` set.
int Connect(const PrometheusUrl& url, absl::Time deadline, const absl::Notification* cancel, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(url.host.c_str(), url.port.c_str(), &hints, &found); rc != 0) {
    error = absl::StrCat("cannot resolve ", url.host, ": ", gai_strerror(rc));
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int err = connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      socklen_t len = sizeof(err);
      err = Await(fd, POLLOUT, deadline, cancel) && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 ? err : ETIMEDOUT;
    }
    if (err != 0) {
      error = absl::StrCat("cannot connect to ", url.host, ":", url.port, ": ", std::strerror(err));
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  return fd;
}

// Sends `request` and reads until the server closes: the whole answer (at most kMaxFleetAnswerBytes,
// read as it comes: a larger one is refused at that size), or an error.
absl::StatusOr<std::string> Exchange(int fd, const std::string& request, absl::Time deadline,
                                     const absl::Notification* cancel) {
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (!(n < 0 && (errno == EAGAIN || errno == EINTR) && Await(fd, POLLOUT, deadline, cancel))) {
      return absl::UnavailableError("the request could not be sent");
    }
  }
  std::string answer;
  char buffer[16384];
  for (;;) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n == 0) return answer;
    if (n > 0) {
      answer.append(buffer, static_cast<size_t>(n));
      if (answer.size() > kMaxFleetAnswerBytes) {
        return absl::UnavailableError(absl::StrCat("the answer is larger than ", kMaxFleetAnswerBytes, " bytes"));
      }
    } else if (!((errno == EAGAIN || errno == EINTR) && Await(fd, POLLIN, deadline, cancel))) {
      if (cancel != nullptr && cancel->HasBeenNotified()) return absl::CancelledError("the server is stopping");
      return absl::UnavailableError(errno == EAGAIN ? "no whole answer in time" : "the connection broke");
    }
  }
}

}  // namespace

absl::StatusOr<PrometheusUrl> ParsePrometheusUrl(const std::string& flag, const std::string& url) {
  auto bad = [&](absl::string_view rule) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " = ", Quoted(url), ": ", rule));
  };
  constexpr absl::string_view kScheme = "http://";
  if (!absl::StartsWith(url, kScheme)) return bad("must be http://HOST[:PORT][/PATH] (https is not supported)");
  absl::string_view rest = absl::string_view(url).substr(kScheme.size());
  const size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  PrometheusUrl out;
  if (slash != absl::string_view::npos) out.path_prefix = std::string(rest.substr(slash));
  while (absl::EndsWith(out.path_prefix, "/")) out.path_prefix.pop_back();
  absl::string_view host = authority;
  if (absl::StartsWith(authority, "[")) {  // [v6]:port
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) return bad("an IPv6 host must be in brackets, e.g. http://[::1]:9090");
    host = authority.substr(1, close - 1);
    authority.remove_prefix(close + 1);
  } else {
    host = authority.substr(0, authority.find(':'));
    authority.remove_prefix(host.size());
  }
  if (!authority.empty()) {
    uint32_t port = 0;
    if (!absl::StartsWith(authority, ":") || !absl::SimpleAtoi(authority.substr(1), &port) || port == 0 ||
        port > 65535) {
      return bad("the port must be a number in [1, 65535]");
    }
    out.port = std::to_string(port);
  }
  if (host.empty() || absl::StrContains(host, '@')) return bad("needs a host (and no user information)");
  out.host = std::string(host);
  return out;
}

absl::StatusOr<std::string> HttpGet(const PrometheusUrl& url, const std::string& path, absl::Duration timeout,
                                    const absl::Notification* cancel) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string error;
  const int fd = Connect(url, deadline, cancel, error);
  if (fd < 0) return absl::UnavailableError(error);
  const std::string host = absl::StrContains(url.host, ':') ? absl::StrCat("[", url.host, "]") : url.host;
  absl::StatusOr<std::string> answer = Exchange(
      fd, absl::StrCat("GET ", url.path_prefix, path, " HTTP/1.0\r\nHost: ", host, ":", url.port,
                       "\r\nAccept: application/json\r\nUser-Agent: kvledger-server\r\n\r\n"),
      deadline, cancel);
  close(fd);
  if (!answer.ok()) {
    return absl::Status(answer.status().code(), absl::StrCat(url.host, ":", url.port, ": ", answer.status().message()));
  }
  const size_t head_end = answer->find("\r\n\r\n");
  const absl::string_view status_line = absl::string_view(*answer).substr(0, answer->find("\r\n"));
  if (head_end == std::string::npos || !absl::StartsWith(status_line, "HTTP/1.")) {
    return absl::UnavailableError(absl::StrCat(url.host, ":", url.port, ": not an HTTP answer"));
  }
  std::string body = answer->substr(head_end + 4);
  if (!absl::StrContains(status_line, " 200 ")) {
    // Prometheus says why in the body ({"status":"error","error":...}).
    auto parsed = ParsePrometheusVector(body);
    return absl::UnavailableError(absl::StrCat(url.host, ":", url.port, " answered ", status_line.substr(9),
                                               parsed.ok() ? "" : absl::StrCat(" (", parsed.status().message(), ")")));
  }
  return body;
}

FleetPoller::FleetPoller(PrometheusUrl url, std::string job, absl::Duration refresh, FleetRates& rates,
                         ServerMetrics* metrics)
    : url_(std::move(url)), job_(std::move(job)), refresh_(refresh), rates_(rates), metrics_(metrics) {
  thread_ = std::thread([this] { Run(); });
}

FleetPoller::~FleetPoller() {
  stop_.Notify();
  thread_.join();
}

absl::StatusOr<std::vector<LabeledSample>> FleetPoller::Query(const char* rule) const {
  const std::string query = absl::StrCat(rule, "{job=\"", job_, "\"}");
  auto body = HttpGet(url_, absl::StrCat("/api/v1/query?query=", UrlQueryEscape(query)),
                      std::min(refresh_, kMaxFetchTime), &stop_);
  if (!body.ok()) return body.status();
  return ParsePrometheusVector(*body);
}

absl::Status FleetPoller::PollOnce() {
  auto reload = Query(kFleetReloadRule);
  if (!reload.ok()) return reload.status();
  auto compute = Query(kFleetComputeRule);
  if (!compute.ok()) return compute.status();
  auto table = FleetRates::FromSamples(*reload, *compute);
  if (!table.ok()) return table.status();
  rates_.Update(*std::move(table));
  return absl::OkStatus();
}

void FleetPoller::Run() {
  bool failing = false;
  do {
    const absl::Status polled = PollOnce();
    if (metrics_ != nullptr) metrics_->FleetRatesFetched(polled.ok());
    if (!polled.ok() && !failing) {
      std::cerr << "kvledger-server: --fleet_prometheus_url: " << polled.message()
                << " (Advise answers from this replica's own rates while the fleet's are older than "
                << "4 refresh periods)" << std::endl;
    } else if (polled.ok() && failing) {
      std::cerr << "kvledger-server: --fleet_prometheus_url: answering again" << std::endl;
    }
    failing = !polled.ok();
  } while (!stop_.WaitForNotificationWithTimeout(refresh_));
}

}  // namespace kvledger
