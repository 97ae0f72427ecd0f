// The HTTP listener in process, through real sockets on 127.0.0.1: routes and 404, HEAD, keep-alive
// answers in order, a streamed (chunked) answer, gzip, the head-size bound (431), per-address
// connection limit (503), a stop that does not wait for a client that never reads, an answer told
// delivered only once the client's TCP acknowledged it, a stream that throws, and the stall and the
// answer deadline on an injected clock.
#include "server/http/listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvledger {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// A blocking client socket to the listener, from `source` (any 127.0.0.0/8 address).
class Client {
 public:
  explicit Client(int port, const char* source = "127.0.0.1") : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    inet_pton(AF_INET, source, &from.sin_addr);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from), 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
    timeval timeout{30, 0};  // a hang fails the test instead of stalling it
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  }
  ~Client() { close(fd_); }
  void Send(const std::string& bytes) {
    ASSERT_EQ(send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  // Reads until `done` holds for what was read, or the peer closes.
  std::string ReadUntil(const std::function<bool(const std::string&)>& done) {
    std::string got;
    char buffer[65536];
    while (!done(got)) {
      const ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      got.append(buffer, static_cast<size_t>(n));
    }
    return got;
  }
  // One whole answer with a Content-Length body.
  std::string ReadAnswer() {
    return ReadUntil([](const std::string& s) {
      const size_t head = s.find("\r\n\r\n");
      if (head == std::string::npos) return false;
      const size_t at = s.find("Content-Length: ");
      if (at == std::string::npos || at > head) return true;
      return s.size() >= head + 4 + std::stoul(s.substr(at + 16));
    });
  }
  std::string ReadToClose() { return ReadUntil([](const std::string&) { return false; }); }
  // Nothing arrives (no byte, no close) for `ms` of real time.
  bool QuietFor(int ms) {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, ms) == 0;
  }

 private:
  const int fd_;
};

// A client whose receive buffer is as small as the kernel allows, set before it connects (so the
// window it offers stays small).
int SmallWindowSocket(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const int small = 1;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  return fd;
}

// Closes with a reset (SO_LINGER 0), as a client that gives up does.
void Reset(int fd) {
  linger now{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof now);
  close(fd);
}

// What the routes' `delivered` callbacks were told, in order.
struct Told {
  std::mutex mu;
  std::vector<bool> whole;
  std::function<void(bool)> Callback() {
    return [this](bool w) {
      std::lock_guard<std::mutex> lock(mu);
      whole.push_back(w);
    };
  }
  std::vector<bool> Get() {
    std::lock_guard<std::mutex> lock(mu);
    return whole;
  }
  // Polls (real time, with a deadline) until `n` answers were told.
  std::vector<bool> Await(size_t n) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (Get().size() < n && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return Get();
  }
};

std::string Get(const std::string& path, const std::string& headers = "") {
  return absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: test\r\n", headers, "\r\n");
}

std::string Gunzip(const std::string& in) {
  z_stream z{};
  inflateInit2(&z, 16 + MAX_WBITS);
  std::string out(1 << 20, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  inflate(&z, Z_FINISH);
  out.resize(z.total_out);
  inflateEnd(&z);
  return out;
}

class HttpListenerTest : public ::testing::Test {
 protected:
  void Start(HttpLimits limits = {}, HttpClockSource clock = SystemHttpClock()) {
    std::vector<HttpListener::Route> routes;
    routes.push_back({"/hello", [](const HttpRequest& r) {
                        return HttpResponse::Of(200, "text/plain", absl::StrCat("hello ", r.Param("name").value_or("")));
                      }});
    routes.push_back(
        {"/big", [](const HttpRequest&) { return HttpResponse::Of(200, "text/plain", std::string(200000, 'k')); }});
    routes.push_back({"/stream", [](const HttpRequest&) {
                        HttpResponse r = HttpResponse::Of(200, "text/plain", "");
                        r.stream = [](const HttpResponse::Writer& write) {
                          for (int i = 0; i < 3; ++i) {
                            std::string piece = absl::StrCat("piece", i, ";");
                            write(piece);
                          }
                        };
                        return r;
                      }});
    routes.push_back({"/told", [this](const HttpRequest& request) {
                        const size_t bytes = std::stoul(request.Param("bytes").value_or("10"));
                        HttpResponse r = HttpResponse::Of(200, "text/plain", std::string(bytes, 't'));
                        r.delivered = told_.Callback();
                        return r;
                      }});
    routes.push_back({"/throws", [this](const HttpRequest& request) {
                        HttpResponse r = HttpResponse::Of(200, "text/plain", "");
                        const bool late = request.Param("late").has_value();
                        r.stream = [late](const HttpResponse::Writer& write) {
                          std::string piece = "first piece;";
                          if (late) write(piece);
                          throw std::runtime_error("the page could not be rendered");
                        };
                        r.delivered = told_.Callback();
                        return r;
                      }});
    auto started = HttpListener::Start("127.0.0.1:0", limits, {}, std::move(routes), std::move(clock));
    ASSERT_TRUE(started.ok()) << started.status();
    listener_ = *std::move(started);
  }
  Told told_;  // before the listener: its threads call into it until the listener is gone
  std::unique_ptr<HttpListener> listener_;
};

TEST_F(HttpListenerTest, RoutesHeadAndNotFound) {
  Start();
  Client c(listener_->port());
  c.Send(Get("/hello?name=w%20x"));
  std::string answer = c.ReadAnswer();
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 200"));
  EXPECT_TRUE(absl::EndsWith(answer, "\r\n\r\nhello w x")) << answer;
  c.Send(Get("/nope"));
  EXPECT_THAT(c.ReadAnswer(), StartsWith("HTTP/1.1 404"));
  c.Send("HEAD /hello HTTP/1.1\r\nHost: test\r\n\r\n");
  answer = c.ReadUntil([](const std::string& s) { return absl::StrContains(s, "\r\n\r\n"); });
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(answer, HasSubstr("Content-Length: 6"));  // "hello " is not sent
  EXPECT_TRUE(absl::EndsWith(answer, "\r\n\r\n")) << answer;
}

// Two requests written at once on one kept-alive connection get their answers in order.
TEST_F(HttpListenerTest, PipelinedAnswersInOrder) {
  Start();
  Client c(listener_->port());
  c.Send(Get("/hello?name=1") + Get("/hello?name=2"));
  const std::string both = c.ReadUntil([](const std::string& s) { return absl::StrContains(s, "hello 2"); });
  ASSERT_THAT(both, HasSubstr("hello 1"));
  EXPECT_LT(both.find("hello 1"), both.find("hello 2"));
}

TEST_F(HttpListenerTest, StreamedAndGzipped) {
  Start();
  Client c(listener_->port());
  c.Send(Get("/stream", "Connection: close\r\n"));
  const std::string streamed = c.ReadToClose();
  EXPECT_THAT(streamed, HasSubstr("Transfer-Encoding: chunked"));
  for (const char* piece : {"piece0;", "piece1;", "piece2;"}) EXPECT_THAT(streamed, HasSubstr(piece));
  Client z(listener_->port());
  z.Send(Get("/big", "Accept-Encoding: gzip\r\n"));
  const std::string answer = z.ReadAnswer();
  ASSERT_THAT(answer, HasSubstr("Content-Encoding: gzip"));
  const std::string body = answer.substr(answer.find("\r\n\r\n") + 4);
  EXPECT_LT(body.size(), 2000u);
  EXPECT_EQ(Gunzip(body), std::string(200000, 'k'));
}

// A head past head_bytes gets 431; a fourth connection from one address past connections_per_client
// gets 503 while another address is still served.
TEST_F(HttpListenerTest, Bounds) {
  HttpLimits limits;
  limits.head_bytes = 1024;
  limits.connections_per_client = 3;
  Start(limits);
  Client big(listener_->port());
  big.Send(Get("/hello", absl::StrCat("X-Pad: ", std::string(2000, 'p'), "\r\n")));
  EXPECT_THAT(big.ReadToClose(), StartsWith("HTTP/1.1 431"));
  std::vector<std::unique_ptr<Client>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(std::make_unique<Client>(listener_->port(), "127.0.0.2"));
    held.back()->Send(Get("/hello"));
    EXPECT_THAT(held.back()->ReadAnswer(), StartsWith("HTTP/1.1 200"));
  }
  Client fourth(listener_->port(), "127.0.0.2");
  fourth.Send(Get("/hello"));
  EXPECT_THAT(fourth.ReadToClose(), StartsWith("HTTP/1.1 503"));
  Client other(listener_->port(), "127.0.0.3");
  other.Send(Get("/hello"));
  EXPECT_THAT(other.ReadAnswer(), StartsWith("HTTP/1.1 200"));
}

// A client that asked for a large answer and never reads it does not hold the stop: the destructor
// returns (the test would hang, and time out, otherwise).
TEST_F(HttpListenerTest, StopsWithAClientThatNeverReads) {
  Start();
  Client never(listener_->port());
  for (int i = 0; i < 20; ++i) never.Send(Get("/big"));
  Client c(listener_->port());
  c.Send(Get("/hello"));
  EXPECT_THAT(c.ReadAnswer(), StartsWith("HTTP/1.1 200"));
  listener_.reset();
  SUCCEED();
}

// The connections' deadlines are kept on the listener's clock: a fake one moved past head_seconds
// closes a connection whose head is unfinished, and past idle_seconds a kept-alive one; unmoved,
// both stay open (the event thread looks at the deadlines at least once a second).
TEST_F(HttpListenerTest, DeadlinesOnAnInjectedClock) {
  std::atomic<int64_t> moved_ms{0};
  const HttpClock::time_point base = HttpClock::now();
  HttpLimits limits;
  limits.head_seconds = 10;  // by the real clock, far off: only the moved clock closes within 3 s
  limits.idle_seconds = 60;
  Start(limits, [&] { return base + std::chrono::milliseconds(moved_ms.load()); });
  Client partial(listener_->port());
  partial.Send("GET /hello HTTP/1.1\r\n");
  Client idle(listener_->port());
  idle.Send(Get("/hello"));
  EXPECT_THAT(idle.ReadAnswer(), HasSubstr("hello "));
  EXPECT_TRUE(partial.QuietFor(1500));
  EXPECT_TRUE(idle.QuietFor(10));
  moved_ms = 11000;  // past head_seconds, not idle_seconds
  EXPECT_FALSE(partial.QuietFor(3000));
  EXPECT_EQ(partial.ReadToClose(), "");
  EXPECT_TRUE(idle.QuietFor(1500));
  moved_ms = 61000;  // past idle_seconds
  EXPECT_FALSE(idle.QuietFor(3000));
  EXPECT_EQ(idle.ReadToClose(), "");
}

// An answer is told delivered once the client's TCP acknowledged its last byte; one the client never
// reads (a window of a few bytes) and then resets is told cut, never delivered.
TEST_F(HttpListenerTest, DeliveredMeansAcknowledged) {
  Start();
  Client reader(listener_->port());
  reader.Send(Get("/told?bytes=300000"));
  EXPECT_THAT(reader.ReadAnswer(), StartsWith("HTTP/1.1 200"));
  EXPECT_EQ(told_.Await(1), std::vector<bool>{true});

  const int stray = SmallWindowSocket(listener_->port());
  const std::string request = Get("/told?bytes=300000");
  ASSERT_EQ(send(stray, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // what a stray client does: nothing
  EXPECT_EQ(told_.Get().size(), 1u);  // not told before the reset: the page is still unacknowledged
  Reset(stray);
  EXPECT_EQ(told_.Await(2), (std::vector<bool>{true, false}));
}

// A stream that throws before its first piece is answered 500 and the listener serves on; one that
// throws after it is cut (no last chunk), told not delivered.
TEST_F(HttpListenerTest, AStreamThatThrows) {
  Start();
  Client early(listener_->port());
  early.Send(Get("/throws"));
  const std::string answer = early.ReadToClose();
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 500"));
  EXPECT_THAT(answer, HasSubstr("the page could not be rendered"));
  Client late(listener_->port());
  late.Send(Get("/throws?late=1"));
  const std::string cut = late.ReadToClose();
  EXPECT_THAT(cut, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(cut, HasSubstr("first piece;"));
  EXPECT_THAT(cut, Not(HasSubstr("\r\n0\r\n\r\n")));
  EXPECT_EQ(told_.Await(2), (std::vector<bool>{true, false}));  // the 500 reached its client whole
  Client after(listener_->port());
  after.Send(Get("/hello"));
  EXPECT_THAT(after.ReadAnswer(), StartsWith("HTTP/1.1 200"));
}

// The worker's 100 ms stall and the answer's deadline are read on the listener's clock. With one
// worker and a client that never reads a large answer, an unmoved fake clock keeps the worker
// writing (another client waits); moved past the stall, the rest is parked and the other client is
// served; moved past answer_seconds, the parked answer is cut and told so.
TEST_F(HttpListenerTest, StallAndAnswerDeadlineOnAnInjectedClock) {
  std::atomic<int64_t> moved_ms{0};
  const HttpClock::time_point base = HttpClock::now();
  HttpLimits limits;
  limits.workers = 1;
  limits.answer_seconds = 30;
  Start(limits, [&] { return base + std::chrono::milliseconds(moved_ms.load()); });
  const int slow = SmallWindowSocket(listener_->port());
  const std::string request = Get("/told?bytes=4000000");
  ASSERT_EQ(send(slow, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  Client other(listener_->port(), "127.0.0.2");
  other.Send(Get("/hello"));
  EXPECT_TRUE(other.QuietFor(600));  // far past 100 ms of real time: the stall is the fake clock's
  moved_ms = 150;
  EXPECT_THAT(other.ReadAnswer(), StartsWith("HTTP/1.1 200"));
  EXPECT_TRUE(told_.Get().empty());  // parked, not cut
  moved_ms = 31000;
  EXPECT_EQ(told_.Await(1), std::vector<bool>{false});
  close(slow);
}

}  // namespace
}  // namespace kvledger
