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
  const TraceReadResult result = ReadTrace(in, TraceReadOptions{});
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
  TraceReadResult result = ReadTrace(nul, TraceReadOptions{TraceFormat::kAuto, 0, TraceLimits{1024, 1 << 20}});
  EXPECT_EQ(result.requests.size(), 1u);
  ASSERT_EQ(result.error_count, 1u);
  EXPECT_EQ(result.errors[0], "line 2: longer than 1024 bytes (the trace reader's line limit); reading stopped here");
  std::string many;
  for (int i = 0; i < 100; ++i) many += good;
  std::istringstream big(many);
  result = ReadTrace(big, TraceReadOptions{TraceFormat::kAuto, 0, TraceLimits{1024, good.size() * 10}});
  EXPECT_EQ(result.requests.size(), 10u);
  ASSERT_EQ(result.error_count, 1u);
  EXPECT_EQ(result.errors[0], absl::StrCat("line 11: the trace is larger than ", good.size() * 10,
                                           " bytes (the reader's limit); reading stopped here"));
}

// Lines are read a buffer (64 KiB) at a time: a line longer than the buffer is read whole, a line of
// exactly the limit is read and one byte more is not; ids of 18 digits and of 19 are read exactly.
TEST(TraceTest, LinesAcrossTheBufferAndIdsOfEveryLength) {
  std::string ids;
  for (int i = 0; i < 20000; ++i) absl::StrAppend(&ids, i == 0 ? "" : ", ", 1000000 + i);
  const std::string long_line = absl::StrCat(R"({"timestamp": 0, "input_length": 10240000, "output_length": 1, "hash_ids": [)", ids, "]}");
  ASSERT_GT(long_line.size(), 65536u * 2);
  const std::string exact = R"({"timestamp": 1, "input_length": 1024, "output_length": 1, "hash_ids": [999999999999999999, 9223372036854775807]})";
  std::istringstream in(long_line + "\n" + exact + "\n" + exact);
  TraceReadResult result = ReadTrace(in, TraceReadOptions{TraceFormat::kAuto, 0, TraceLimits{long_line.size(), 1 << 30}});
  ASSERT_EQ(result.error_count, 0u) << result.errors[0];
  ASSERT_EQ(result.requests.size(), 3u);
  EXPECT_EQ(result.requests[0].hash_ids.size(), 20000u);
  EXPECT_EQ(result.requests[0].hash_ids.back(), 1019999);
  EXPECT_EQ(result.requests[2].hash_ids, (std::vector<int64_t>{999999999999999999, 9223372036854775807}));
  std::istringstream over(long_line + "\n");
  result = ReadTrace(over, TraceReadOptions{TraceFormat::kAuto, 0, TraceLimits{long_line.size() - 1, 1 << 30}});
  ASSERT_EQ(result.error_count, 1u);
  EXPECT_THAT(result.errors[0], HasSubstr("line 1: longer than"));
  std::istringstream too_large(R"({"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [9223372036854775808]})" "\n");
  EXPECT_EQ(ReadTrace(too_large, TraceReadOptions{}).errors,
            std::vector<std::string>{"line 1: hash_ids[0] = 9223372036854775808: must be an integer"});
}

// A line ending inside a string on a backslash is a problem named on its line (the fuzzer found it
// threw std::out_of_range).
TEST(TraceTest, AStringEndingOnABackslash) {
  std::istringstream in("{\"timestamp\": 0, \"x\": \"ab\\");
  const TraceReadResult result = ReadTrace(in, TraceReadOptions{});
  ASSERT_EQ(result.error_count, 1u);
  EXPECT_THAT(result.errors[0], HasSubstr("line 1: "));
}

TraceReadResult ReadText(const std::string& text, TraceFormat format = TraceFormat::kAuto, uint64_t block_tokens = 0) {
  std::istringstream in(text);
  return ReadTrace(in, TraceReadOptions{format, block_tokens, TraceLimits{}});
}

std::vector<std::vector<int64_t>> IdsOf(const TraceReadResult& read) {
  std::vector<std::vector<int64_t>> ids;
  for (const TraceRequest& r : read.requests) ids.push_back(r.hash_ids);
  return ids;
}

// Written from the Alibaba Bailian trace's documented fields: timestamps in seconds, 16-token blocks,
// and ids that name a block's tokens alone. C's second block has A's id after B's first block: its
// KV was never computed after that prefix, so C reuses one block, not two.
TEST(TraceFormatsTest, BailianIdsAreChainedIntoPrefixes) {
  const std::string trace =
      R"({"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 32, "output_length": 4, "type": "text", "turn": 1, "hash_ids": [5, 2]})"
      "\n"
      R"({"chat_id": 2, "parent_chat_id": -1, "timestamp": 1.25, "input_length": 10, "output_length": 4, "type": "text", "turn": 1, "hash_ids": [1]})"
      "\n"
      R"({"chat_id": 3, "parent_chat_id": 2, "timestamp": 2, "input_length": 40, "output_length": 0, "type": "text", "turn": 2, "hash_ids": [1, 2, 7]})"
      "\n";
  const TraceReadResult read = ReadText(trace);
  ASSERT_TRUE(read.Check("t").ok()) << read.Check("t");
  EXPECT_EQ(read.format, TraceFormat::kBailian);
  EXPECT_EQ(read.block_tokens, 16u);
  EXPECT_EQ(IdsOf(read), (std::vector<std::vector<int64_t>>{{0, 1}, {2}, {2, 3, 4}}));
  EXPECT_EQ(read.requests[1].timestamp_ms, 1250);
  EXPECT_EQ(read.requests[2].timestamp_ms, 2000);
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  PlanConfig config;
  config.block_tokens = read.block_tokens;
  std::vector<int64_t> matched;
  auto plan = Plan(read.requests, *catalog.Find("llama-3.1-8b"), config,
                   [&](const TraceRequest&, const RecordFacts& facts) { matched.push_back(facts.logical_match_tokens); });
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(matched, (std::vector<int64_t>{0, 0, 16}));  // unchained ids would have matched 32
  // The same lines read as Mooncake's keep the ids as they are (and 512-token blocks, so they do not fit).
  EXPECT_THAT(ReadText(trace, TraceFormat::kMooncake).errors.at(0),
              HasSubstr("line 1: timestamp = 0.5: must be an integer"));
}

// Written from LMCache's lookup-hash logging subscriber (lmcache/v1/mp_observability/subscribers/
// logging/lookup_hash.py): a line per lookup with seconds, request id, model, chunk size, sequence
// length and "0x" chunk hashes, which are chained prefix hashes already.
TEST(TraceFormatsTest, LmcacheLookupsNumberTheHashesAndCountRepeatedLookups) {
  auto line = [](const char* t, const char* id, int seq_len, const char* hashes, int chunk = 256) {
    return absl::StrCat(R"({"timestamp": )", t, R"(, "request_id": ")", id,
                        R"(", "model_name": "meta-llama/Llama-3.1-8B-Instruct", "chunk_size": )", chunk,
                        R"(, "seq_len": )", seq_len, R"(, "dtypes": ["bfloat16"], "shapes": [[2, 32, 256, 8, 128]], )",
                        R"("chunk_hashes": [)", hashes, "]}\n");
  };
  const TraceReadResult read = ReadText(line("1711929600.123", "a", 600, R"("0xaa", "0xbb")") +
                                        line("1711929600.5", "a", 600, R"("0xaa", "0xbb")") +
                                        line("1711929601", "b", 700, R"("0xaa", "0xbb", "0xcc")"));
  ASSERT_TRUE(read.Check("t").ok()) << read.Check("t");
  EXPECT_EQ(read.format, TraceFormat::kLmcacheLookups);
  EXPECT_EQ(read.block_tokens, 256u);
  EXPECT_EQ(read.repeated_lookups, 1u);
  // a's partial last chunk was not hashed: it gets an id of its own; b's was
  EXPECT_EQ(IdsOf(read), (std::vector<std::vector<int64_t>>{{0, 1, 2}, {0, 1, 3}}));
  EXPECT_EQ(read.requests[0].timestamp_ms, 1711929600123);
  EXPECT_EQ(read.requests[0].output_length, 0);  // a lookup does not know its output
  const TraceReadResult mixed = ReadText(line("1", "a", 600, R"("0xaa", "0xbb")") + line("2", "b", 600, R"("0xaa")", 128));
  ASSERT_EQ(mixed.error_count, 1u);
  EXPECT_EQ(mixed.errors[0], "line 2: chunk_size = 128: must be 256, the first line's (one block size a trace)");
  const TraceReadResult few = ReadText(line("1", "a", 600, R"("0xaa")"));
  ASSERT_EQ(few.error_count, 1u);
  EXPECT_THAT(few.errors[0], HasSubstr("line 1: chunk_hashes has 1 blocks: must be ceil(seq_len 600 / 256) = 3"));
  EXPECT_THAT(ReadText(R"({"timestamp": 1, "chunk_size": 256, "chunk_hashes": []})" "\n").errors.at(0),
              HasSubstr("line 1: seq_len: missing (required)"));
}

// Written from WEKA's trace format (callanjfox/kv-cache-tester, traces/; examples/traces/weka/):
// a conversation a line, 64-token chained ids local to it, a sub-agent's requests timed from its start.
// At 128-token blocks a block is named by its second source id; conversation 2 starts 60 s later and
// its ids never meet conversation 1's.
TEST(TraceFormatsTest, WekaConversationsAreFlattenedOrderedAndKeptApart) {
  const std::string one =
      R"({"id": "c1", "models": ["m"], "block_size": 64, "hash_id_scope": "local", "requests": [)"
      R"({"t": 0.0, "type": "n", "in": 200, "out": 5, "hash_ids": [1, 2, 3]},)"
      R"({"t": 30, "type": "subagent", "agent_id": "a", "requests": [)"
      R"({"t": 45.5, "type": "n", "in": 256, "out": 1, "hash_ids": [1, 2, 7, 8]}]},)"
      R"({"t": 70.25, "type": "s", "in": 0, "out": 3, "hash_ids": []},)"
      R"({"t": 80, "type": "n", "in": 300, "out": 2, "hash_ids": [1, 2, 3, 4]}]})";
  const std::string two =
      R"({"id": "c2", "block_size": 64, "requests": [{"t": 1, "in": 128, "out": 0, "hash_ids": [1, 2]}]})";
  const TraceReadResult read = ReadText(one + "\n" + two, TraceFormat::kAuto, 128);
  ASSERT_TRUE(read.Check("t").ok()) << read.Check("t");
  EXPECT_EQ(read.format, TraceFormat::kWekaConversations);
  EXPECT_EQ(read.empty_prompts, 1u);
  std::vector<int64_t> times;
  for (const TraceRequest& r : read.requests) times.push_back(r.timestamp_ms);
  EXPECT_EQ(times, (std::vector<int64_t>{0, 61000, 75500, 80000}));
  // Numbered as read: c1's source id 2 -> 0 and the first request's tail -> 1, the sub-agent's 8 -> 2,
  // c1's 4 -> 3 and its tail -> 4; c2's 2 is another conversation's block -> 5.
  EXPECT_EQ(IdsOf(read), (std::vector<std::vector<int64_t>>{{0, 1}, {5}, {0, 2}, {0, 3, 4}}));
  EXPECT_THAT(ReadText(R"({"block_size": 64, "requests": [{"t": 0, "in": 200, "out": 1, "hash_ids": [1, 2]}]})"
                       "\n").errors.at(0),
              HasSubstr("line 1: requests[0]: hash_ids has 2 ids: must be floor(in 200 / block_size 64) = 3"));
  EXPECT_THAT(ReadText(R"({"block_size": 64, "requests": [{"t": 0, "in": 200, "hash_ids": [1, 2, 3]}]})"
                       "\n").errors.at(0),
              HasSubstr("line 1: requests[0].out: missing (required)"));
  EXPECT_THAT(ReadText(R"({"block_size": 48, "requests": []})" "\n").errors.at(0),
              HasSubstr("block_size = 48: the trace's blocks of 512 tokens must be a multiple of it"));
}

TEST(TraceFormatsTest, AnUnknownFirstLineNamesItsFieldsAndStops) {
  const TraceReadResult read = ReadText("{\"ts\": 1, \"tokens\": [1, 2]}\n{\"ts\": 2}\n");
  ASSERT_EQ(read.error_count, 1u);
  EXPECT_EQ(read.errors[0],
            "line 1: cannot tell the trace's format from its fields (ts, tokens): Mooncake's lines have hash_ids, "
            "Bailian's chat_id and hash_ids, LMCache's lookup logs chunk_hashes, WEKA's conversations requests and "
            "block_size; --format names it");
  EXPECT_THAT(ReadText(R"({"model": "m", "prompt_tokens": 5})").errors.at(0),
              HasSubstr("kvledger replay reads record files"));
  EXPECT_EQ(ParseTraceFormat("--format", "csv").status().message(),
            "--format = \"csv\": must be one of auto, mooncake, bailian, lmcache-lookups, weka-conversations");
  EXPECT_EQ(*ParseTraceFormat("--format", "bailian"), TraceFormat::kBailian);
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
  cache.Use(std::vector<int64_t>{0, 1});  // tail first, 1 then 0: device {0}, host {1}
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
  // Device holds one block, host two; a request's blocks are used tail first. After A (1, then 0):
  // device {0}, host {1}: B hits block 0 on the device. After B (2, then 0): device {0}, host {2, 1};
  // C misses and pushes 0 down (device {3}, host {0, 2}; 1 is gone); D hits block 0 in host.
  const PlanTotals& host = plan->by_tier[static_cast<size_t>(Tier::kHost)];
  const PlanTotals& device = plan->by_tier[static_cast<size_t>(Tier::kDevice)];
  EXPECT_EQ(plan->by_tier[static_cast<size_t>(Tier::kNone)].requests, 2u);  // A, and C
  EXPECT_EQ(device.requests, 1u);                                           // B
  EXPECT_EQ(device.logical_match_tokens, 512);
  EXPECT_EQ(host.requests, 1u);  // D
  EXPECT_EQ(host.logical_match_tokens, 512);
  EXPECT_EQ(plan->total.prompt_tokens, 1024 + 1000 + 300 + 600);
  const Uint128 pair = 524288;
  EXPECT_EQ(plan->total.attention_baseline_flops,
            pair * (1024 * 1025 / 2 + 1000 * 1001 / 2 + 300 * 301 / 2 + 600 * 601 / 2));
  EXPECT_EQ(plan->total.attention_avoided_flops, pair * (512 * 513 / 2) * 2);
  EXPECT_EQ(plan->total.reused_bytes, Uint128{512} * 131072 * 2);
  EXPECT_EQ(plan->capacity_bytes[0], Uint128{512} * 131072);
  EXPECT_EQ(plan->matched_tokens_from[0], 512);
  EXPECT_EQ(plan->matched_tokens_from[1], 512);
  // Host reloads at 1 GB/s; recomputing is the reused prefix's prefill FLOPs at 1e15 FLOP/s.
  EXPECT_EQ(host.compared, 1u);
  EXPECT_DOUBLE_EQ(host.reload_seconds, 512 * 131072 / 1e9);
  EXPECT_DOUBLE_EQ(host.recompute_seconds, Uint128ToDouble(host.prefill_avoided_flops) * 1e-15);
  // 7.2157e12 FLOPs (524,288 x 512 x 513 / 2 + 13,958,643,712 x 512) take 7.2 ms; the reload 67 ms.
  EXPECT_EQ(host.prefill_avoided_flops, pair * (512 * 513 / 2) + Uint128{13958643712} * 512);
  EXPECT_EQ(host.cheaper_recomputed, 1u);
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

// vLLM refuses a prompt that leaves no room for one output token (prompt + 1 > max_model_len): with
// a context of 1,024 tokens, a 1,023-token prompt is planned, a 1,024-token one is not. A refused
// request is neither looked up nor cached: the request after it, sharing its first block, misses.
TEST(PlanTest, ARequestBeyondTheContextIsCountedApartAndNeverCached) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const Profile& llama = *catalog.Find("llama-3.1-8b");
  PlanConfig config;
  config.context_tokens = 1024;
  std::vector<TraceRequest> trace = {Request(1024, {0, 1}, 1), Request(1500, {0, 1, 2}, 2), Request(1023, {0, 3}, 3),
                                     Request(1023, {0, 3}, 4)};
  auto plan = Plan(trace, llama, config);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->context_tokens, 1024u);
  EXPECT_EQ(plan->beyond_context.requests, 2u);
  EXPECT_EQ(plan->beyond_context.prompt_tokens, 1024 + 1500);
  EXPECT_EQ(plan->beyond_context.longest_prompt_tokens, 1500);
  EXPECT_EQ(plan->beyond_context.first_line, 1u);
  EXPECT_EQ(plan->total.requests, 2u);
  EXPECT_EQ(plan->total.prompt_tokens, 2 * 1023);
  EXPECT_EQ(plan->total.logical_match_tokens, 1023);  // line 3 misses, line 4 reuses all of it
  EXPECT_EQ(plan->by_tier[static_cast<size_t>(Tier::kNone)].requests, 1u);

  // Without a context (the profile states none) all four are planned; a config's context wins over
  // the profile's.
  config.context_tokens.reset();
  auto all = Plan(trace, llama, config);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->context_tokens, std::nullopt);
  EXPECT_EQ(all->beyond_context.requests, 0u);
  EXPECT_EQ(all->total.requests, 4u);
  v1::ProfileCatalog overrides;
  v1::ModelProfile* entry = overrides.add_profiles();
  entry->set_name("llama-3.1-8b");
  entry->mutable_serving()->set_context_tokens(1500);
  auto with_profile = ProfileCatalog::Make(overrides);
  ASSERT_TRUE(with_profile.ok()) << with_profile.status();
  auto by_profile = Plan(trace, *with_profile->Find("llama-3.1-8b"), config);
  ASSERT_TRUE(by_profile.ok());
  EXPECT_EQ(by_profile->beyond_context.requests, 1u);  // 1,500 + 1 > 1,500
  config.context_tokens = 4096;
  EXPECT_EQ(Plan(trace, *with_profile->Find("llama-3.1-8b"), config)->beyond_context.requests, 0u);
}

TEST(PlanTest, AContextNamesItsRule) {
  EXPECT_TRUE(CheckContextTokens("--context-tokens", 2).ok());
  EXPECT_EQ(CheckContextTokens("--context-tokens", 1).message(),
            "--context-tokens = 1: must be in [2, 2147483648] tokens");
  EXPECT_EQ(CheckContextTokens("context_tokens", uint64_t{1} << 32).message(),
            "context_tokens = 4294967296: must be in [2, 2147483648] tokens");
}

}  // namespace
}  // namespace kvledger
