// The capacity curves' costs (docs/performance.md), each beside its baseline in the same run:
// - BM_ReporterWork/<ids>: what a Reporter does per record (one copy into its queue, one serialization
//   into a batch) for a record with 0, 16 (8 K tokens in 512-token blocks) and 512 (8 K tokens in
//   16-token blocks) prefix block ids; its wire_bytes counter is the record's size on the wire;
// - BM_RecordPath/<ids>/<samples>: the server's parse and Ledger::Record with the curves on, for the
//   same records (0 ids: the curves cost nothing but a branch), a ladder of 10 capacities; samples 0
//   is the default share (the stack holds every block: exact), 8192, 1024 and 128 a sampled stack
//   (128: a rate of about 0.004, what the default share leaves a cache that has seen 50 M blocks);
// - BM_StackMemory/<blocks>/<samples>: one cache's stack after that many distinct blocks, exact
//   (samples 0) and sampled at the default share; its bytes and the time per block as counters.
#include <random>

#include "benchmark/benchmark.h"
#include "kvledger/v1/record.pb.h"
#include "lib/capacity/capacity_curves.h"
#include "lib/accounting/ledger.h"
#include "lib/capacity/sampled_stack.h"
#include "lib/profiles/profile_catalog.h"
#include "lib/wire/record_proto.h"

namespace kvledger {
namespace {

constexpr int64_t kPrompt = 8192;

// 1,024 records of 8 K-token prompts from 64 conversations whose turns extend their prefix, with
// `ids` chained block ids each (block size kPrompt / ids); 0: none.
std::vector<std::string> Records(int64_t ids) {
  std::mt19937_64 rng(11);
  std::vector<std::string> out;
  std::vector<uint64_t> next_in(64);
  for (int i = 0; i < 1024; ++i) {
    v1::Record r;
    r.set_model("llama-3.1-8b");
    r.set_prompt_tokens(kPrompt);
    r.set_request_id("req-000000000001");
    r.set_suffix_prefill_seconds(0.3);
    if (ids > 0) {
      const uint64_t conversation = rng() % next_in.size();
      const int64_t shared = ids / 2 + static_cast<int64_t>(rng() % static_cast<uint64_t>(ids / 2));
      for (int64_t b = 0; b < ids; ++b) {
        r.add_prefix_block_ids(b < shared ? (conversation << 32) + static_cast<uint64_t>(b)
                                          : (uint64_t{1} << 60) + (next_in[conversation]++));
      }
      r.set_block_tokens(kPrompt / ids);
      r.set_cache_id("engine-0");
    }
    out.push_back(r.SerializeAsString());
  }
  return out;
}

void BM_ReporterWork(benchmark::State& state) {
  const auto records = Records(state.range(0));
  std::vector<v1::Record> parsed(records.size());
  for (size_t i = 0; i < records.size(); ++i) parsed[i].ParseFromString(records[i]);
  v1::Record queued;
  std::string wire;
  size_t i = 0;
  for (auto _ : state) {
    queued.CopyFrom(parsed[i++ % parsed.size()]);
    queued.SerializeToString(&wire);
    benchmark::DoNotOptimize(wire);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["wire_bytes"] = static_cast<double>(records[0].size());
}
BENCHMARK(BM_ReporterWork)->Arg(0)->Arg(16)->Arg(512);

void BM_RecordPath(benchmark::State& state) {
  const auto records = Records(state.range(0));
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  ModelRegistry registry(catalog, 64, UnknownModelPolicy::kReject);
  Aggregator aggregator(registry.slots().slot_count());
  std::vector<uint64_t> ladder;
  for (uint64_t c = 65536; c <= (uint64_t{1} << 25); c *= 2) ladder.push_back(c);
  // range(1): the blocks each cache's stack holds; 0 the default share (every block of these records).
  const uint64_t samples = state.range(1) == 0 ? *SamplesPerCache(uint64_t{256} << 20, 16)
                                               : static_cast<uint64_t>(state.range(1));
  CurveLimits limits{16, samples, 600};
  if (state.range(2) != 0) {  // range(2): the default second tiers below a device of 1 Mi tokens
    limits.tiers.sizes = *ParseTierLadder(kDefaultTierLadder, "--capacity_tiers");
    limits.tiers.device_tokens = uint64_t{1} << 20;
  }
  auto curves = CapacityCurves::Create(ladder, registry.slots().slot_count(), limits);
  Ledger ledger(registry, aggregator, nullptr, LabelClaims::kClaim, {curves->get()});
  size_t i = 0;
  v1::Record r;
  for (auto _ : state) {
    r.ParseFromString(records[i++ % records.size()]);
    benchmark::DoNotOptimize(ledger.Record(FactsFromProto(r)));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RecordPath)
    ->Args({0, 0, 0})
    ->Args({16, 0, 0})
    ->Args({512, 0, 0})
    ->Args({512, 0, 1})
    ->Args({512, 8192, 0})
    ->Args({512, 1024, 0})
    ->Args({512, 128, 0})
    ->Args({512, 128, 1});

// One cache's stack after that many distinct blocks in requests of 512 ids: range(1) 0 holds every block
// (the exact stack), else at most that many (the default share is SamplesPerCache(256 MiB, 16)).
void BM_StackMemory(benchmark::State& state) {
  const auto blocks = static_cast<uint64_t>(state.range(0));
  const auto samples = state.range(1) == 0 ? blocks : static_cast<uint64_t>(state.range(1));
  uint64_t bytes = 0;
  for (auto _ : state) {
    SampledStack stack(samples);
    std::vector<SampledStack::Sampled> sampled;
    std::vector<uint64_t> ids(512);
    for (uint64_t b = 0; b < blocks; b += ids.size()) {
      for (uint64_t i = 0; i < ids.size(); ++i) ids[i] = (b + i) * 0x9E3779B97F4A7C15ull;
      stack.Reference(ids, sampled);
    }
    bytes = stack.MemoryBytes();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["ns_per_block"] = benchmark::Counter(static_cast<double>(state.iterations() * blocks),
                                                      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_StackMemory)
    ->Args({1 << 20, 0})
    ->Args({1 << 20, 174592})
    ->Args({100000000, 174592})
    ->Args({1000000000, 174592})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace kvledger

BENCHMARK_MAIN();
