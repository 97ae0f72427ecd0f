// What a replica reads back from Prometheus: the instant-query answer, its URL, and the query's escaping.
#include "server/fleet_poller.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/wire/prometheus_vector.h"

namespace kvledger {
namespace {

using ::testing::HasSubstr;

TEST(PrometheusVectorTest, ReadsSamples) {
  auto samples = ParsePrometheusVector(
      R"({"status":"success","data":{"resultType":"vector","result":[)"
      R"({"metric":{"__name__":"x","model":"m","term":"bytes"},"value":[1700000000.5,"1.5e9"]},)"
      R"({"metric":{},"value":[1700000000.5,"NaN"]}]}})");
  ASSERT_TRUE(samples.ok()) << samples.status();
  ASSERT_EQ(samples->size(), 2u);
  EXPECT_DOUBLE_EQ((*samples)[0].value, 1.5e9);
  ASSERT_NE((*samples)[0].Label("term"), nullptr);
  EXPECT_EQ(*(*samples)[0].Label("term"), "bytes");
  EXPECT_EQ((*samples)[0].Label("tier"), nullptr);
  EXPECT_TRUE(std::isnan((*samples)[1].value));
}

TEST(PrometheusVectorTest, SaysWhatItFound) {
  const auto error = [](const char* json) { return std::string(ParsePrometheusVector(json).status().message()); };
  EXPECT_THAT(error(R"({"status":"error","errorType":"bad_data","error":"parse error"})"),
              HasSubstr("status error: parse error"));
  EXPECT_THAT(error(R"({"status":"success","data":{"resultType":"matrix","result":[]}})"),
              HasSubstr("not an instant vector"));
  EXPECT_THAT(error(R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}})"),
              HasSubstr("result[0]: value \"x\" is not a number"));
  EXPECT_THAT(error("<html>"), HasSubstr("not a JSON object"));
}

// Inputs a hostile or broken Prometheus could answer, each refused by the bound it passes, in one
// linear pass (once: 100,000 levels of nesting ran 100 s of CPU; 32 MiB of "[{},...]" took 2.4 GB).
TEST(PrometheusVectorTest, BoundedWhateverTheInput) {
  const auto error = [](const std::string& json) { return std::string(ParsePrometheusVector(json).status().message()); };
  EXPECT_THAT(error(std::string(100000, '[') + std::string(100000, ']')), HasSubstr("not a JSON object"));
  const std::string deep = R"({"status":"success","data":{"resultType":"vector","result":[],"x":)" +
                           std::string(100000, '[') + std::string(100000, ']') + "}}";
  EXPECT_THAT(error(deep), HasSubstr("nested deeper than 16"));
  std::string many = R"({"status":"success","data":{"resultType":"vector","result":[)";
  for (size_t i = 0; i <= kMaxPrometheusSamples; ++i) many += R"({"metric":{},"value":[1,"1"]},)";
  many.back() = ']';
  many += "}}";
  EXPECT_THAT(error(many), HasSubstr("more than 50000 samples"));
  std::string labels = R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{)";
  for (int i = 0; i <= 16; ++i) labels += absl::StrCat("\"l", i, "\":\"v\",");
  labels.back() = '}';
  labels += R"(,"value":[1,"1"]}]}})";
  EXPECT_THAT(error(labels), HasSubstr("result[0]: more than 16 labels"));
  EXPECT_THAT(error(R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":")" +
                    std::string(5000, 'x') + R"("},"value":[1,"1"]}]}})"),
              HasSubstr("a string longer than 4096 bytes"));
  EXPECT_THAT(error(R"({"status":"success","data":{"resultType":"vector","result":[{}]}})"),
              HasSubstr("result[0]: needs \"metric\""));
  EXPECT_THAT(error(R"({"status":"success"} trailing)"), HasSubstr("the end of the answer expected"));
  auto escaped = ParsePrometheusVector(
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"m":"a\u00e9\ud83d\ude00\n"},"value":[1,"2"]}]}})");
  ASSERT_TRUE(escaped.ok()) << escaped.status();
  EXPECT_EQ(*(*escaped)[0].Label("m"), "a\xc3\xa9\xf0\x9f\x98\x80\n");
}

// Sums that are finite and positive but make an absurd rate are refused whole (once: Advise answered
// reload_seconds = inf and a saving of 6.2e299 s).
TEST(FleetRatesTest, ImplausibleSumsAreRefused) {
  auto sample = [](const char* model, const char* tier, const char* term, double value) {
    LabeledSample s;
    s.labels = {{"model", model}, {"tier", tier}, {"term", term}};
    s.value = value;
    return s;
  };
  std::vector<LabeledSample> absurd = {sample("m", "host", "bytes", 1e300), sample("m", "host", "seconds", 1),
                                       sample("m", "host", "weight", 1), sample("m", "host", "samples", 1)};
  EXPECT_THAT(std::string(FleetRates::FromSamples(absurd, {}).status().message()),
              HasSubstr("reload bandwidth of m from host, bytes/s = 1e+300: not a plausible value (must be in [1, "
                        "1e+14])"));
  std::vector<LabeledSample> tiny = {sample("m", "host", "bytes", 1), sample("m", "host", "seconds", 1e6),
                                     sample("m", "host", "weight", 1), sample("m", "host", "samples", 1)};
  EXPECT_FALSE(FleetRates::FromSamples(tiny, {}).ok());
  std::vector<LabeledSample> fine = {sample("m", "host", "bytes", 6e9), sample("m", "host", "seconds", 1),
                                     sample("m", "host", "weight", 1), sample("m", "host", "samples", 1)};
  EXPECT_TRUE(FleetRates::FromSamples(fine, {}).ok());
  // A sample count no replica could reach (once: converted out of range, undefined behaviour) is
  // refused, for reload and compute alike; a window's extrapolated count need not be whole.
  std::vector<LabeledSample> countless = {sample("m", "host", "bytes", 6e9), sample("m", "host", "seconds", 1),
                                          sample("m", "host", "weight", 1), sample("m", "host", "samples", 6.6e90)};
  EXPECT_THAT(std::string(FleetRates::FromSamples(countless, {}).status().message()),
              HasSubstr("sample count of m = 6.6e+90: must be at most 2^53"));
  std::vector<LabeledSample> huge = {sample("m", "", "samples", 1e16)};
  EXPECT_THAT(std::string(FleetRates::FromSamples({}, huge).status().message()),
              HasSubstr("sample count of m = 1e+16: must be at most 2^53"));
  std::vector<LabeledSample> extrapolated = {sample("m", "host", "bytes", 6.3e9), sample("m", "host", "seconds", 1.05),
                                             sample("m", "host", "weight", 1.05), sample("m", "host", "samples", 1.05)};
  EXPECT_TRUE(FleetRates::FromSamples(extrapolated, {}).ok());
}

// A local socket that stands in for Prometheus: accepts, reads the request, then sends `answer`
// (possibly endless) or nothing.
class FakePrometheus {
 public:
  explicit FakePrometheus(std::function<void(int)> serve) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in at{};
    at.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &at.sin_addr);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
    EXPECT_EQ(listen(fd_, 4), 0);
    socklen_t length = sizeof at;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&at), &length);
    port_ = ntohs(at.sin_port);
    thread_ = std::thread([this, serve] {
      const int client = accept(fd_, nullptr, nullptr);
      if (client < 0) return;
      char request[4096];
      [[maybe_unused]] const ssize_t n = recv(client, request, sizeof request, 0);  // the whole GET
      serve(client);
      close(client);
    });
  }
  ~FakePrometheus() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  PrometheusUrl url() const { return *ParsePrometheusUrl("f", absl::StrCat("http://127.0.0.1:", port_)); }

 private:
  const int fd_;
  int port_ = 0;
  std::thread thread_;
};

TEST(HttpGetTest, AnswerSizeIsBounded) {
  FakePrometheus fake([](int client) {
    const std::string head = "HTTP/1.0 200 OK\r\n\r\n";
    send(client, head.data(), head.size(), MSG_NOSIGNAL);
    const std::string block(1 << 16, '[');
    for (size_t sent = 0; sent < kMaxFleetAnswerBytes + (1 << 20); sent += block.size()) {
      if (send(client, block.data(), block.size(), MSG_NOSIGNAL) < 0) return;
    }
  });
  auto body = HttpGet(fake.url(), "/api/v1/query?query=up", absl::Seconds(30));
  EXPECT_EQ(body.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(body.status().message(), HasSubstr("the answer is larger than 8388608 bytes"));
}

// A Prometheus that never answers: the fetch ends when the server stops, not at its timeout.
TEST(HttpGetTest, CancelledByShutdown) {
  absl::Notification stop, served;
  FakePrometheus fake([&](int) { served.WaitForNotification(); });
  std::thread stopper([&] {
    absl::SleepFor(absl::Milliseconds(200));
    stop.Notify();
  });
  auto body = HttpGet(fake.url(), "/api/v1/query?query=up", absl::Seconds(60), &stop);
  served.Notify();
  stopper.join();
  EXPECT_EQ(body.status().code(), absl::StatusCode::kCancelled) << body.status();
}

TEST(PrometheusUrlTest, HostPortAndPrefix) {
  auto url = ParsePrometheusUrl("fleet_prometheus_url", "http://[::1]:9090/prom/");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->port, "9090");
  EXPECT_EQ(url->path_prefix, "/prom");
  url = ParsePrometheusUrl("fleet_prometheus_url", "http://prometheus.monitoring");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->port, "80");
  EXPECT_EQ(url->path_prefix, "");
  EXPECT_THAT(ParsePrometheusUrl("f", "prometheus:9090").status().message(),
              HasSubstr("--f = \"prometheus:9090\": must be http://HOST[:PORT][/PATH]"));
  EXPECT_THAT(ParsePrometheusUrl("f", "http://u@p:1").status().message(), HasSubstr("needs a host"));
  EXPECT_THAT(ParsePrometheusUrl("f", "http://[::1:9090").status().message(), HasSubstr("in brackets"));
}

TEST(PrometheusUrlTest, QueryEscaping) {
  EXPECT_EQ(UrlQueryEscape(R"(a:b{job="k v"})"), "a%3Ab%7Bjob%3D%22k%20v%22%7D");
}

// Nothing listens: a clear UNAVAILABLE, not a hang.
TEST(HttpGetTest, RefusedIsUnavailable) {
  auto url = ParsePrometheusUrl("f", "http://127.0.0.1:1");
  auto body = HttpGet(*url, "/api/v1/query?query=up", absl::Seconds(5));
  EXPECT_EQ(body.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(body.status().message(), HasSubstr("cannot connect to 127.0.0.1:1"));
}

}  // namespace
}  // namespace kvledger
