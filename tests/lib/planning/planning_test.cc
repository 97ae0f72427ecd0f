// Capacity planning: the trace format's checks, the tiered block LRU against hand-traced sequences,
// and Plan's totals against hand arithmetic (docs/planning.md).
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/planning/block_cache.h"
#include "lib/planning/plan.h"
#include "lib/planning/trace.h"
#include "lib/profiles/profile_catalog.h"

namespace kvledger {
namespace {

using ::testing::HasSubstr;

TEST(TraceTest, ParsesALineAndSkipsUnknownFields) {
  auto r = ParseTraceLine(R"({"timestamp": 7, "input_length": 1000, "note": {"a": [1, "x]"]},)"
                          R"( "output_length": 3, "hash_ids": [4, 9]})",
                          5, 512);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->timestamp_ms, 7);
  EXPECT_EQ(r->input_length, 1000);
  EXPECT_EQ(r->output_length, 3);
  EXPECT_EQ(r->hash_ids, (std::vector<int64_t>{4, 9}));
  EXPECT_EQ(r->line, 5u);
}

TEST(TraceTest, NamesTheLineTheFieldTheValueAndTheRule) {
  auto message = [](const char* text) { return std::string(ParseTraceLine(text, 3, 512).status().message()); };
  EXPECT_EQ(message(R"({"timestamp": 0, "input_length": 10, "output_length": 1})"),
            "line 3: hash_ids: missing (required)");
  EXPECT_EQ(message(R"({"timestamp": 0, "input_length": -4, "output_length": 1, "hash_ids": []})"),
            "line 3: input_length = -4: must be >= 1");
  EXPECT_EQ(message(R"({"timestamp": 0, "input_length": 600, "output_length": -1, "hash_ids": [1, 2]})"),
            "line 3: output_length = -1: must be >= 0");
  EXPECT_THAT(message(R"({"timestamp": 0, "input_length": 512, "output_length": 1, "hash_ids": [1, 2]})"),
              HasSubstr("line 3: hash_ids has 2 blocks: must be ceil(input_length 512 / 512) = 1"));
  EXPECT_EQ(message(R"({"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [-2]})"),
            "line 3: hash_ids[0] = -2: must be >= 0");
  EXPECT_EQ(message(R"({"timestamp": 1.5, "input_length": 5, "output_length": 1, "hash_ids": [2]})"),
            "line 3: timestamp = 1.5: must be an integer");
  EXPECT_EQ(message(R"({"timestamp": 0, "timestamp": 0})"), "line 3: timestamp: given twice");
  EXPECT_THAT(message("[1, 2]"), HasSubstr("line 3: not a JSON object"));
}

TEST(TraceTest, ReadsAWholeTraceAndReportsOrderAndTruncation) {
  std::istringstream in(
      "{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n"
      "\n"
      "{\"timestamp\": 4, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [2]}\n"
      "{\"timestamp\": 6, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [3]}\n"
      "{\"timestamp\": 7, \"input_length\": 10, \"output_len");
  const TraceReadResult result = ReadTrace(in, 512);
  ASSERT_EQ(result.requests.size(), 2u);
  EXPECT_EQ(result.requests[1].line, 4u);
  EXPECT_EQ(result.blank_lines, 1u);
  ASSERT_EQ(result.error_count, 2u);
  EXPECT_EQ(result.errors[0], "line 3: timestamp = 4: out of order (must be >= the previous request's 5)");
  EXPECT_THAT(result.errors[1], HasSubstr("line 5: truncated: the trace ends inside this line"));
}

// A line or a trace past the reader's limits stops the reading with a problem naming the limit,
// before the memory is spent (once: a 2 GB file of NUL bytes grew the server to 3 GB).
TEST(TraceTest, LineAndTotalLimits) {
  const std::string good = "{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n";
  std::istringstream nul(good + std::string(5000, '\0'));
  TraceReadResult result = ReadTrace(nul, 512, nullptr, TraceLimits{1024, 1 << 20});
  EXPECT_EQ(result.requests.size(), 1u);
  ASSERT_EQ(result.error_count, 1u);
  EXPECT_EQ(result.errors[0], "line 2: longer than 1024 bytes (the trace reader's line limit); reading stopped here");
  std::string many;
  for (int i = 0; i < 100; ++i) many += good;
  std::istringstream big(many);
  result = ReadTrace(big, 512, nullptr, TraceLimits{1024, good.size() * 10});
  EXPECT_EQ(result.requests.size(), 10u);
  ASSERT_EQ(result.error_count, 1u);
  EXPECT_EQ(result.errors[0], absl::StrCat("line 11: the trace is larger than ", good.size() * 10,
                                           " bytes (the reader's limit); reading stopped here"));
}

// A line ending inside a string on a backslash is a problem named on its line (the fuzzer found it
// threw std::out_of_range).
TEST(TraceTest, AStringEndingOnABackslash) {
  std::istringstream in("{\"timestamp\": 0, \"x\": \"ab\\");
  const TraceReadResult result = ReadTrace(in, 512);
  ASSERT_EQ(result.error_count, 1u);
  EXPECT_THAT(result.errors[0], HasSubstr("line 1: "));
}

// Device 1 block, host 1 block: traced by hand.
TEST(TieredBlockCacheTest, EvictsDownwardAndPromotesOnUse) {
  TieredBlockCache cache({1, 1});
  auto lookup = [&](std::vector<int64_t> blocks) {
    auto m = cache.Lookup(blocks);
    return std::vector<size_t>{m.blocks, m.per_tier[0], m.per_tier[1]};
  };
  using V = std::vector<size_t>;
  EXPECT_EQ(lookup({0}), (V{0, 0, 0}));
  cache.Use(std::vector<int64_t>{0});  // device {0}
  cache.Use(std::vector<int64_t>{1});  // device {1}, host {0}
  EXPECT_EQ(lookup({0}), (V{1, 0, 1}));
  cache.Use(std::vector<int64_t>{0});  // device {0}, host {1}
  EXPECT_EQ(lookup({1, 0}), (V{2, 1, 1}));
  EXPECT_EQ(lookup({2, 0}), (V{0, 0, 0}));  // a run stops at the first absent block
  cache.Use(std::vector<int64_t>{1, 0});  // device {0}, host {1}
  cache.Use(std::vector<int64_t>{2});     // device {2}, host {0}; 1 is gone
  EXPECT_EQ(lookup({1}), (V{0, 0, 0}));
  EXPECT_EQ(lookup({0}), (V{1, 0, 1}));
  EXPECT_EQ(cache.size(0), 1u);
  EXPECT_EQ(cache.size(1), 1u);
}

TraceRequest Request(int64_t input, std::vector<int64_t> blocks, size_t line = 1) {
  TraceRequest r;
  r.input_length = input;
  r.output_length = 1;
  r.hash_ids = std::move(blocks);
  r.line = line;
  return r;
}

// llama-3.1-8b (docs/cost-model.md §5): 524,288 attention FLOPs per (query, key) pair, full
// attention, 131,072 KV bytes per token. B (1,000 tokens) reuses A's first block: 512 tokens.
TEST(PlanTest, CostsHitsAsTheRecordsTheyWouldBe) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  PlanConfig config;
  config.capacity_tokens = {512, 1024, 0};
  config.bandwidth[1] = 1e9;
  config.compute = ComputeTime{Basis::kProfile, 0, 1e-15};
  std::vector<TraceRequest> trace = {Request(1024, {0, 1}), Request(1000, {0, 2}), Request(300, {3}),
                                     Request(600, {0, 5})};
  auto plan = Plan(trace, *catalog.Find("llama-3.1-8b"), config);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Device holds one block: after A, device {1} host {0}; B hits block 0 in host.
  const PlanTotals& host = plan->by_tier[static_cast<size_t>(Tier::kHost)];
  EXPECT_EQ(plan->by_tier[static_cast<size_t>(Tier::kNone)].requests, 2u);  // A, and C
  EXPECT_EQ(host.requests, 2u);  // B, then D: block 0 went down to host again under C
  EXPECT_EQ(host.logical_match_tokens, 1024);
  EXPECT_EQ(plan->total.prompt_tokens, 1024 + 1000 + 300 + 600);
  const Uint128 pair = 524288;
  EXPECT_EQ(plan->total.attention_baseline_flops,
            pair * (1024 * 1025 / 2 + 1000 * 1001 / 2 + 300 * 301 / 2 + 600 * 601 / 2));
  EXPECT_EQ(plan->total.attention_avoided_flops, pair * (512 * 513 / 2) * 2);
  EXPECT_EQ(plan->total.reused_bytes, Uint128{512} * 131072 * 2);
  EXPECT_EQ(plan->capacity_bytes[0], Uint128{512} * 131072);
  EXPECT_EQ(plan->matched_tokens_from[1], 1024);
  // Host reloads at 1 GB/s; recomputing is the reused prefix's prefill FLOPs at 1e15 FLOP/s.
  EXPECT_EQ(host.compared, 2u);
  EXPECT_DOUBLE_EQ(host.reload_seconds, 2 * 512 * 131072 / 1e9);
  EXPECT_DOUBLE_EQ(host.recompute_seconds, Uint128ToDouble(host.prefill_avoided_flops) * 1e-15);
  // 7.2157e12 FLOPs (524,288 x 512 x 513 / 2 + 13,958,643,712 x 512) take 7.2 ms; the reload 67 ms.
  EXPECT_EQ(host.prefill_avoided_flops, 2 * (pair * (512 * 513 / 2) + Uint128{13958643712} * 512));
  EXPECT_EQ(host.cheaper_recomputed, 2u);
}

TEST(PlanTest, ANonBlockAlignedPromptReusesAtMostItsLength) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  PlanConfig config;  // one unlimited device tier
  auto plan = Plan({Request(600, {0, 1}), Request(600, {0, 1})}, *catalog.Find("llama-3.1-8b"), config);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->by_tier[static_cast<size_t>(Tier::kDevice)].logical_match_tokens, 600);
  EXPECT_EQ(plan->matched_tokens_from[0], 600);
  EXPECT_DOUBLE_EQ(plan->total.TokenHitRatio(), 0.5);
}

}  // namespace
}  // namespace kvledger
