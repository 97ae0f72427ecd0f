// The JSON API's routes called in process (no sockets): Explain answers what Evaluate derives for
// the same record, refusals are 400 with the message and the reason, unknown parameters are named,
// totals follow the ledger, and a server without a trace says how to give it one.
#include "server/http_api.h"

#include "tests/testing/records.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/accounting/ledger.h"
#include "lib/profiles/profile_catalog.h"
#include "lib/wire/proto_json.h"
#include "lib/wire/record_proto.h"

namespace kvledger {
namespace {

using ::testing::HasSubstr;

class HttpApiTest : public ::testing::Test {
 protected:
  HttpResponse Call(const std::string& path, const std::string& query = "") {
    for (const auto& route : routes_) {
      if (route.path == path) return route.handler(HttpRequest{path, query, "127.0.0.1"});
    }
    ADD_FAILURE() << "no route " << path;
    return {};
  }

  ProfileCatalog catalog_ = ProfileCatalog::Builtin();
  ModelRegistry registry_{catalog_, 64, UnknownModelPolicy::kReject};
  Aggregator aggregator_{registry_.slots().slot_count()};
  LiveRates rates_{registry_.slots().slot_count(), 300};
  Ledger ledger_{registry_, aggregator_, &rates_};
  std::vector<HttpListener::Route> routes_ = HttpApiRoutes(registry_, aggregator_, rates_, nullptr, nullptr);
};

TEST_F(HttpApiTest, ExplainIsEvaluate) {
  const HttpResponse r =
      Call("/api/v1/explain", "model=llama-3.1-8b&tier=host&prompt_tokens=4096&logical_match_tokens=3000");
  ASSERT_EQ(r.status, 200) << r.body;
  v1::Record record = testing::HitRecord("llama-3.1-8b", 4096, 3000, v1::TIER_HOST);
  record.clear_reload_seconds();
  record.clear_suffix_prefill_seconds();
  record.clear_ttft_seconds();
  auto figures = Evaluate(FactsFromProto(record), registry_.Resolve("llama-3.1-8b"));
  ASSERT_TRUE(figures.ok());
  EXPECT_EQ(r.body, ProtoToJson(FiguresToProto(*figures, "llama-3.1-8b"), /*null_unset=*/true));
  EXPECT_THAT(r.body, HasSubstr("\"reused_tokens\":\"2992\""));  // page-aligned down to 16
}

TEST_F(HttpApiTest, RefusalsNameTheFieldAndTheReason) {
  HttpResponse r = Call("/api/v1/explain", "model=llama-3.1-8b&tier=host&prompt_tokens=4096&logical_match_tokens=5000");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("logical_match_tokens = 5000: must be in [0, prompt_tokens = 4096]"));
  EXPECT_THAT(r.body, HasSubstr("\"reason\": \"invalid_logical_match_tokens\""));
  r = Call("/api/v1/explain", "model=llama-3.1-8b&prompt_tokens=4k");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("prompt_tokens = \\\"4k\\\""));
  r = Call("/api/v1/explain", "model=llama-3.1-8b&prompt_tokens=4096&promt=1");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("\\\"promt\\\": not a parameter of /api/v1/explain"));
  r = Call("/api/v1/advise", "model=llama-3.1-8b&prompt_tokens=8192&candidate=host:9000");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("candidates[0].logical_match_tokens = 9000"));
}

TEST_F(HttpApiTest, AdviseAndTotals) {
  HttpResponse r = Call("/api/v1/advise", "model=llama-3.1-8b&prompt_tokens=8192&candidate=host:4096");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.body, HasSubstr("\"model\": \"llama-3.1-8b\", \"prompt_tokens\": 8192"));
  RecordFacts f;
  f.model = "qwen3-8b";
  f.tier_value = 1;
  f.prompt_tokens = 1000;
  f.logical_match_tokens = 500;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(ledger_.Record(f).ok());
  r = Call("/api/v1/totals");
  ASSERT_EQ(r.status, 200);
  EXPECT_THAT(r.body, HasSubstr("\"model\": \"qwen3-8b\", \"requests\": 3, \"prompt_tokens\": 3000, "
                                "\"logical_match_tokens\": 1500"));
  EXPECT_EQ(Call("/api/v1/totals", "x=1").status, 400);
  r = Call("/api/v1/plan", "model=llama-3.1-8b");
  EXPECT_EQ(r.status, 404);
  EXPECT_THAT(r.body, HasSubstr("--trace_file=PATH"));
}

}  // namespace
}  // namespace kvledger
