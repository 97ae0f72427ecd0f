// What a replica reads back from Prometheus: the instant-query answer, its URL, and the query's escaping.
#include "server/fleet_poller.h"

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
