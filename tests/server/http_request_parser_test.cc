// Request heads and query strings as server/http_listener reads them.
#include "server/http/request_parser.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/wire_admission.h"

namespace kvledger {
namespace {

using ::testing::HasSubstr;

TEST(HttpRequestParserTest, ParsesAHeadAndKeepsWhatFollows) {
  std::string pending =
      "GET /api/v1/explain?model=llama&prompt_tokens=10 HTTP/1.1\r\nHost: x\r\n"
      "authorization:  Basic dTpw \r\n\r\nGET /metrics HTTP/1.1\r\n";
  ASSERT_NE(HeadEnd(pending), std::string::npos);
  ParsedHead head;
  ASSERT_TRUE(ParseHead(&pending, &head).ok());
  EXPECT_EQ(head.method, "GET");
  EXPECT_EQ(head.request.path, "/api/v1/explain");
  EXPECT_EQ(head.request.query, "model=llama&prompt_tokens=10");
  EXPECT_EQ(head.authorization, "Basic dTpw");
  EXPECT_FALSE(head.close);
  EXPECT_EQ(pending, "GET /metrics HTTP/1.1\r\n");  // the next request's first line, not yet whole
  EXPECT_EQ(HeadEnd(pending), std::string::npos);
}

TEST(HttpRequestParserTest, ClosesAfterHttp10ConnectionCloseOrABody) {
  for (const char* text : {"GET / HTTP/1.0\r\n\r\n", "GET / HTTP/1.1\r\nHost: x\r\nConnection: Close\r\n\r\n",
                           "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n",
                           "GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"}) {
    std::string pending = text;
    ParsedHead head;
    ASSERT_TRUE(ParseHead(&pending, &head).ok()) << text;
    EXPECT_TRUE(head.close) << text;
  }
}

// Bare-LF line ends (RFC 9112 §2.2) end a head as CRLF does; gzip is asked for unless q=0.
TEST(HttpRequestParserTest, BareLineFeedsAndAcceptEncoding) {
  std::string pending = "GET /metrics HTTP/1.1\nHost: x\nAccept-Encoding: deflate, gzip\n\nGET / HTTP/1.1\n";
  ASSERT_EQ(HeadEnd(pending), pending.find("\n\n") + 2);
  ParsedHead head;
  ASSERT_TRUE(ParseHead(&pending, &head).ok());
  EXPECT_EQ(head.request.path, "/metrics");
  EXPECT_TRUE(head.gzip);
  for (const auto& [value, gzip] : std::vector<std::pair<const char*, bool>>{
           {"gzip", true}, {"GZIP;q=0.5", true}, {"gzip;q=0", false}, {"identity", false}, {"*", true}, {"br", false}}) {
    std::string text = absl::StrCat("GET / HTTP/1.1\r\nHost: x\r\nAccept-Encoding: ", value, "\r\n\r\n");
    ParsedHead h;
    ASSERT_TRUE(ParseHead(&text, &h).ok());
    EXPECT_EQ(h.gzip, gzip) << value;
  }
}

TEST(HttpRequestParserTest, RefusesBrokenHeadsNamingWhatIsWrong) {
  const std::pair<const char*, const char*> cases[] = {
      {"GET /\r\n\r\n", "METHOD TARGET HTTP/1.x"},
      {"GET / HTTP/2.0\r\n\r\n", "only HTTP/1.0 and HTTP/1.1"},
      {"GET metrics HTTP/1.1\r\n\r\n", "starting with '/'"},
      {"GET /%zz HTTP/1.1\r\n\r\n", "broken %-escape"},
      {"GET / HTTP/1.1\r\nno colon\r\n\r\n", "without a name"},
      // RFC 9112 §5.1: no whitespace between a field name and its colon (a smuggling primitive).
      {"GET / HTTP/1.1\r\nHost: x\r\nContent-Length : 42\r\n\r\n", "whitespace"},
      {"GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\n\r\n", "folded"},
      // RFC 9110 §7.2: HTTP/1.1 needs exactly one Host.
      {"GET / HTTP/1.1\r\n\r\n", "exactly one Host"},
      {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "exactly one Host"},
  };
  for (const auto& [text, expected] : cases) {
    std::string pending = text;
    ParsedHead head;
    const absl::Status status = ParseHead(&pending, &head);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(status.message(), HasSubstr(expected)) << text;
  }
}

TEST(HttpRequestParserTest, QueryParametersAreDecodedAndCountedByOccurrence) {
  const std::string query = "candidate=host%3A6000&model=a+b&candidate=device:3000&empty&pct=50%";
  EXPECT_EQ(QueryParam(query, "candidate", 0), "host:6000");
  EXPECT_EQ(QueryParam(query, "candidate", 1), "device:3000");
  EXPECT_EQ(QueryParam(query, "candidate", 2), std::nullopt);
  EXPECT_EQ(QueryParam(query, "model", 0), "a b");
  EXPECT_EQ(QueryParam(query, "empty", 0), "");
  EXPECT_EQ(QueryParam(query, "pct", 0), "50%");  // a broken escape in a value is kept as written
  EXPECT_EQ(QueryParam(query, "Model", 0), std::nullopt);  // names are exact
}

// The process-wide parts budget: taken while a parsed request lives, given back after; one client
// address holds at most half of it, so another always finds room.
TEST(PartsBudgetTest, HoldsPartsUntilReleasedAndSharesThem) {
  PerPeerBudget budget = MakePartsBudget(100);
  {
    PartsHeld first;
    ASSERT_TRUE(budget.TryTake("ipv4:10.0.0.1", 50));
    first.Hold(&budget, "ipv4:10.0.0.1", 50);
    EXPECT_FALSE(budget.TryTake("ipv4:10.0.0.1", 1));   // its half is spent
    ASSERT_TRUE(budget.TryTake("ipv4:10.0.0.2", 40));   // another address still gets in
    EXPECT_FALSE(budget.TryTake("ipv4:10.0.0.3", 11));  // the total is the cap
    budget.Give("ipv4:10.0.0.2", 40);
  }
  EXPECT_TRUE(budget.TryTake("ipv4:10.0.0.1", 50));
  EXPECT_TRUE(budget.TryTake("ipv4:10.0.0.2", 50));
  EXPECT_FALSE(budget.TryTake("ipv4:10.0.0.2", 1));
}

}  // namespace
}  // namespace kvledger
