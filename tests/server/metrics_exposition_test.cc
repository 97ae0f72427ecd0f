// The exposition text for known records: names, labels and exact values.
#include "server/metrics_exposition.h"

#include "tests/testing/records.h"
#include "server/server_metrics.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/accounting/ledger.h"
#include "lib/profiles/profile_catalog.h"

namespace kvledger {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class MetricsExpositionTest : public ::testing::Test {
 protected:
  MetricsExpositionTest()
      : catalog_(ProfileCatalog::Builtin()),
        registry_(catalog_, 1, UnknownModelPolicy::kGeneric),
        aggregator_(registry_.slots().slot_count()),
        ledger_(registry_, aggregator_),
        metrics_("9.9.9"),
        exposition_(aggregator_, registry_, nullptr, nullptr, {&metrics_.registry()}) {}

  std::string Text() { return exposition_.Text(); }
  static RecordFacts HalfHit(const char* model) {  // a slow remote reload, no TTFT
    RecordFacts f = testing::HitFacts(model, 4096, 2048, /*tier_value=*/4);
    f.reload_seconds = 0.5;
    f.ttft_seconds.reset();
    return f;
  }

  ProfileCatalog catalog_;
  ModelRegistry registry_;
  Aggregator aggregator_;
  Ledger ledger_;
  ServerMetrics metrics_;
  MetricsExposition exposition_;
};

// One 50 % hit on llama-3.1-8b: exact counters under model/tier labels.
TEST_F(MetricsExpositionTest, ExactCountersForOneRecord) {
  ASSERT_TRUE(ledger_.Record(HalfHit("llama-3.1-8b")).ok());
  const std::string text = Text();
  EXPECT_THAT(text, HasSubstr("kvledger_requests_total{model=\"llama-3.1-8b\",tier=\"remote\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_prompt_tokens_total{model=\"llama-3.1-8b\",tier=\"remote\"} 4096\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_attention_baseline_flops_total{model=\"llama-3.1-8b\",tier=\"remote\"} 4399120252928\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_attention_avoided_flops_total{model=\"llama-3.1-8b\",tier=\"remote\",boundary=\"reused\"} 1100048498688\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_recompute_tokens_total{model=\"llama-3.1-8b\",tier=\"remote\",cause=\"alignment\"} 0\n"));
  // No compute model yet (one record; no profile throughput): the reload is not compared, never guessed.
  EXPECT_THAT(text, HasSubstr("kvledger_reload_compared_requests_total{model=\"llama-3.1-8b\",tier=\"remote\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_reload_slower_than_recompute_total{model=\"llama-3.1-8b\",tier=\"remote\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_reused_hit_ratio_bucket{model=\"llama-3.1-8b\",tier=\"remote\",le=\"0.5\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_reused_hit_ratio_bucket{model=\"llama-3.1-8b\",tier=\"remote\",le=\"0.4\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_reload_seconds_sum{model=\"llama-3.1-8b\",tier=\"remote\"} 0.5\n"));
  // Build info comes from the server's own registry (ServerMetrics), written after the figures.
  EXPECT_THAT(text, HasSubstr("kvledger_build_info{grpc_version=\""));
  EXPECT_THAT(text, HasSubstr(",version=\"9.9.9\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_records_rejected_total{reason=\"invalid_prompt_tokens\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_model_info{model=\"gemma-2-9b\",profile=\"gemma-2-9b\",attention=\"sliding_window+full\""));
}

// The series one populated (model, tier) costs Prometheus: 54 counter series, 2 ratio histograms
// of 10 buckets (+Inf, _sum, _count: 13 each), and 20 per latency histogram the cell has observed
// (TTFT was not reported here, so it has none). Seconds are summed exactly in nanoseconds and
// printed through a double, whose 16 significant digits keep the nanosecond here.
TEST_F(MetricsExpositionTest, SeriesPerCellAndExactSeconds) {
  RecordFacts f = HalfHit("llama-3.1-8b");
  f.reload_seconds = 1.000000001;
  ASSERT_TRUE(ledger_.Record(f).ok());
  const std::string text = Text();
  int series = 0;
  for (size_t at = text.find("tier=\"remote\""); at != std::string::npos; at = text.find("tier=\"remote\"", at + 1)) {
    ++series;
  }
  // 54 counters (29 prefill and routing, 25 whole-request), two hit-ratio histograms, two latencies.
  EXPECT_EQ(series, 54 + 2 * 13 + 2 * 20);
  EXPECT_THAT(text, Not(HasSubstr("kvledger_ttft_seconds_bucket")));
  EXPECT_THAT(text, HasSubstr("kvledger_reload_seconds_sum{model=\"llama-3.1-8b\",tier=\"remote\"} 1.000000001\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_reload_seconds_bucket{model=\"llama-3.1-8b\",tier=\"remote\",le=\"1\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_reload_seconds_bucket{model=\"llama-3.1-8b\",tier=\"remote\",le=\"2.5\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_reload_seconds_bucket{model=\"llama-3.1-8b\",tier=\"remote\",le=\"0.0025\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_reload_seconds_bucket{model=\"llama-3.1-8b\",tier=\"remote\",le=\"+Inf\"} 1\n"));
}

// A model name with a quote and a backslash (printable, so accepted as an opted-in unknown model)
// is escaped as the text format requires.
TEST_F(MetricsExpositionTest, LabelValuesAreEscaped) {
  ASSERT_TRUE(ledger_.Record(HalfHit("a\"b\\c")).ok());
  EXPECT_THAT(Text(), HasSubstr("kvledger_requests_total{model=\"a\\\"b\\\\c\",tier=\"remote\"} 1\n"));
}

// A match that ends inside a 16-token KV page loses the partial page to alignment; one that ends on a
// page boundary does not.
TEST_F(MetricsExpositionTest, AlignmentLossIsCountedPerRecord) {
  RecordFacts unaligned = HalfHit("llama-3.1-8b");
  unaligned.logical_match_tokens = 2050;
  ASSERT_TRUE(ledger_.Record(unaligned).ok());
  ASSERT_TRUE(ledger_.Record(HalfHit("llama-3.1-8b")).ok());
  const std::string text = Text();
  EXPECT_THAT(text, HasSubstr("kvledger_alignment_loss_requests_total{model=\"llama-3.1-8b\",tier=\"remote\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_recompute_tokens_total{model=\"llama-3.1-8b\",tier=\"remote\",cause=\"alignment\"} 2\n"));
}

// Past --max_models (1 here) a second unknown model folds into "other" while a known one keeps its
// label; an opted-in unknown model gets an info series saying it is costed as generic; no request
// id ever becomes a label.
TEST_F(MetricsExpositionTest, FoldingAndGenericInfo) {
  RecordFacts first = HalfHit("my-finetune");
  first.request_id = "req-123";
  ASSERT_TRUE(ledger_.Record(first).ok());
  ASSERT_TRUE(ledger_.Record(HalfHit("their-finetune")).ok());
  ASSERT_TRUE(ledger_.Record(HalfHit("qwen3-8b")).ok());
  const std::string text = Text();
  EXPECT_THAT(text, HasSubstr("kvledger_requests_total{model=\"my-finetune\",tier=\"remote\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_requests_total{model=\"other\",tier=\"remote\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_requests_total{model=\"qwen3-8b\",tier=\"remote\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("model=\"their-finetune\"")));
  EXPECT_THAT(text, HasSubstr("kvledger_model_label_folded_records_total 1\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_model_info{model=\"my-finetune\",profile=\"generic\""));
  EXPECT_THAT(text, Not(HasSubstr("req-123")));
}

}  // namespace
}  // namespace kvledger

namespace kvledger {
namespace {

// Engine statistics and the tiers that name no single source: exact series, seconds through a
// double, and a mixed hit exported under tier="mixed", never under one of its tiers.
TEST(EngineStatsExpositionTest, TransfersUnrecordedAndMixedTiers) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  ModelRegistry registry(catalog, 1, UnknownModelPolicy::kReject);
  Aggregator aggregator(registry.slots().slot_count());
  LiveRates rates(registry.slots().slot_count(), 300, [] { return 0.0; });
  Ledger ledger(registry, aggregator, &rates);
  EngineStats engine(registry, &rates);
  const MetricsExposition exposition(aggregator, registry, &rates, &engine);

  ASSERT_TRUE(engine.AddTransfer({"llama-3.1-8b", 2, 3'000'000'000, 0.25, 3}, "").ok());
  ASSERT_TRUE(engine.AddUnrecorded({"llama-3.1-8b", 2, 4, 1024}, "").ok());
  ASSERT_FALSE(engine.AddTransfer({"llama-3.1-8b", 6, 1, 1, 0}, "transfers[1].").ok());  // unknown: rejected
  RecordFacts mixed;
  mixed.model = "llama-3.1-8b";
  mixed.tier_value = 5;
  mixed.prompt_tokens = 4096;
  mixed.logical_match_tokens = 2048;
  mixed.reload_seconds = 0.5;
  ASSERT_TRUE(ledger.Record(mixed).ok());

  const std::string text = exposition.Text();
  const std::string llama = "model=\"llama-3.1-8b\"";
  EXPECT_THAT(text, HasSubstr("kvledger_engine_transfer_bytes_total{" + llama + ",tier=\"host\"} 3000000000\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_engine_transfer_seconds_total{" + llama + ",tier=\"host\"} 0.25\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_engine_transfers_total{" + llama + ",tier=\"host\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_unrecorded_requests_total{" + llama + ",reason=\"failed\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_unrecorded_logical_match_tokens_total{" + llama + ",reason=\"failed\"} 1024\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_engine_stats_rejected_total{reason=\"invalid_tier\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_engine_stats_rejected_total{reason=\"invalid_seconds\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_reload_bandwidth_bytes_per_second{" + llama + ",tier=\"host\"} 12000000000\n"));
  EXPECT_THAT(text, HasSubstr("kvledger_requests_total{" + llama + ",tier=\"mixed\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("kvledger_reload_bandwidth_bytes_per_second{" + llama + ",tier=\"mixed\"}")));
  EXPECT_THAT(text, HasSubstr("# TYPE kvledger_unrecorded_requests_total counter\n"));
}

}  // namespace
}  // namespace kvledger
