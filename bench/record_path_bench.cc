// Micro-benchmarks of the record path, each beside its baseline in the same run:
// - BM_ParseRecord: deserializing one Record (what every server, the no-op one included, pays);
// - BM_ParseAndAccount: the same plus validate, resolve, derive and aggregate (kvledger-server);
// - BM_Derive/<model>: the cost model alone, per model shape;
// - BM_Scrape: merging shards and writing the exposition text, per scrape, at 64 and 1,000 models x 5 tiers;
//   BM_ScrapeCollectOnly: the same up to prometheus-cpp's MetricFamily values (no text);
// - BM_Advise16: one Advise with 16 replica candidates, beside BM_AdviseOne; BM_BreakEven: one break-even;
// - BM_Stage/<stage>: one record's way through the server split into its stages, each alone on the
//   same 1,024 records: count (the wire budget's scan), parse, validate (fields, then against the
//   profile), resolve (the model's profile and label), derive, aggregate, live rates;
// - BM_ExplainAnswer/<part>: Explain's message made from the rows and serialized, beside Derive.
#include <random>

#include "benchmark/benchmark.h"
#include "kvledger/v1/ledger.pb.h"
#include "kvledger/v1/record.pb.h"
#include "lib/accounting/ledger.h"
#include "lib/advice/advisor.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"
#include "kvledger/v1/profile.pb.h"
#include "lib/accounting/validation.h"
#include "lib/wire/record_proto.h"
#include "lib/wire/wire_budget.h"
#include "lib/profiles/profile_catalog.h"
#include "server/metrics_exposition.h"

namespace kvledger {
namespace {

const char* const kModels[] = {"llama-3.1-8b", "deepseek-v3", "gemma-3-12b", "kimi-linear-48b-a3b"};

std::vector<std::string> SerializedRecords(size_t count) {
  std::mt19937_64 rng(7);
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) {
    v1::Record r;
    r.set_model(kModels[rng() % std::size(kModels)]);
    r.set_prompt_tokens(256 + static_cast<int64_t>(rng() % 32513));
    r.set_logical_match_tokens(static_cast<int64_t>(rng() % (r.prompt_tokens() + 1)));
    r.set_tier(r.logical_match_tokens() == 0 ? v1::TIER_UNSPECIFIED : v1::TIER_HOST);
    r.set_reload_seconds(0.004);
    r.set_suffix_prefill_seconds(0.3);
    r.set_ttft_seconds(0.31);
    out.push_back(r.SerializeAsString());
  }
  return out;
}

struct World {
  ProfileCatalog catalog = ProfileCatalog::Builtin();
  ModelRegistry registry{catalog, 64, UnknownModelPolicy::kReject};
  Aggregator aggregator{registry.slots().slot_count()};
  LiveRates rates{registry.slots().slot_count(), 300};  // as the server runs it: every record feeds the rates
  Ledger ledger{registry, aggregator, &rates};
  Ledger ledger_without_rates{registry, aggregator};  // the baseline for what the live rates cost
  // The live rates without the compute-time model: what its per-record lookup (and fitting) costs.
  LiveRates rates_without_fit{registry.slots().slot_count(), 300, MonotonicSeconds, LiveRates::kDefaultRefitSeconds,
                              /*compute_model=*/false};
  Ledger ledger_without_fit{registry, aggregator, &rates_without_fit};
};

World& SharedWorld() {
  static World* world = new World();
  return *world;
}

void BM_ParseRecord(benchmark::State& state) {
  const auto records = SerializedRecords(1024);
  size_t i = 0;
  v1::Record r;
  for (auto _ : state) {
    r.ParseFromString(records[i++ % records.size()]);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ParseRecord)->Threads(1)->Threads(2);

// Arg 1: as the server runs (aggregate, live rates and the compute-time model each record is estimated
// from); arg 2: the same without the compute-time model; arg 0: aggregate only.
void BM_ParseAndAccount(benchmark::State& state) {
  const auto records = SerializedRecords(1024);
  World& world = SharedWorld();
  Ledger& ledger = state.range(0) == 1 ? world.ledger : state.range(0) == 2 ? world.ledger_without_fit
                                                                            : world.ledger_without_rates;
  size_t i = 0;
  v1::Record r;
  for (auto _ : state) {
    r.ParseFromString(records[i++ % records.size()]);
    benchmark::DoNotOptimize(ledger.Record(FactsFromProto(r)));
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(state.range(0) == 1 ? "as served" : state.range(0) == 2 ? "without the compute model" : "aggregate only");
}
BENCHMARK(BM_ParseAndAccount)->Arg(1)->Arg(2)->Arg(0)->Threads(1)->Threads(2);

void BM_Derive(benchmark::State& state) {
  World& world = SharedWorld();
  const Profile& profile = *world.catalog.Find(kModels[state.range(0)]);
  RecordFacts f;
  f.model = profile.name();
  f.tier_value = 1;
  f.prompt_tokens = 16384;
  f.logical_match_tokens = 9000;
  f.suffix_prefill_seconds = 0.3;
  for (auto _ : state) benchmark::DoNotOptimize(Derive(f, profile));
  state.SetLabel(profile.name());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Derive)->DenseRange(0, 3);

// One record's stages, each measured alone over the same records (prepared up to that stage).
enum Stage { kCount, kParse, kValidate, kResolve, kDerive, kAggregate, kLiveRates };
constexpr const char* kStageNames[] = {"count", "parse", "validate", "resolve", "derive", "aggregate", "live_rates"};

struct Prepared {
  std::vector<std::string> bytes;
  std::string batch;  // the same records as one RecordBatchRequest
  std::vector<v1::Record> records;
  std::vector<const Profile*> profiles;
  std::vector<uint32_t> slots;
  std::vector<RecordFigures> figures;
};

const Prepared& PreparedRecords() {
  static const Prepared* prepared = [] {
    auto* p = new Prepared;
    World& world = SharedWorld();
    p->bytes = SerializedRecords(1024);
    for (const std::string& b : p->bytes) {
      v1::Record r;
      r.ParseFromString(b);
      p->records.push_back(r);
    }
    v1::RecordBatchRequest batch;
    for (const v1::Record& r : p->records) *batch.add_records() = r;
    p->batch = batch.SerializeAsString();
    for (const v1::Record& r : p->records) {
      auto resolved = world.registry.Resolve(r.model());
      p->profiles.push_back(resolved->profile);
      p->slots.push_back(resolved->label ? resolved->label->slot : 0);
      p->figures.push_back(Derive(FactsFromProto(r), *resolved->profile));
    }
    return p;
  }();
  return *prepared;
}

void BM_Stage(benchmark::State& state) {
  const Prepared& p = PreparedRecords();
  World& world = SharedWorld();
  WireLimits limits;
  limits.type = v1::RecordBatchRequest::descriptor();
  limits.entry_fields[0] = v1::RecordBatchRequest::kRecordsFieldNumber;
  limits.max_entries = 10000;
  const auto stage = static_cast<Stage>(state.range(0));
  size_t i = 0;
  v1::Record parsed;
  for (auto _ : state) {
    const size_t k = i++ % p.bytes.size();
    switch (stage) {
      case kCount: {  // as the server counts a batch: its 1,024 records at once, per record
        if (k != 0) break;
        google::protobuf::io::ArrayInputStream input(p.batch.data(), static_cast<int>(p.batch.size()));
        WireCount count;
        benchmark::DoNotOptimize(CountWire(&input, p.batch.size(), limits, &count));
        break;
      }
      case kParse:
        benchmark::DoNotOptimize(parsed.ParseFromString(p.bytes[k]));
        break;
      case kValidate: {
        const RecordFacts facts = FactsFromProto(p.records[k]);
        benchmark::DoNotOptimize(ValidateFields(facts).ok() && ValidateAgainstProfile(facts, *p.profiles[k]).ok());
        break;
      }
      case kResolve:
        benchmark::DoNotOptimize(world.registry.Resolve(p.records[k].model()));
        break;
      case kDerive:
        benchmark::DoNotOptimize(Derive(FactsFromProto(p.records[k]), *p.profiles[k]));
        break;
      case kAggregate:
        world.aggregator.Add(p.slots[k], p.figures[k], false);
        break;
      case kLiveRates:
        world.rates.Observe(p.slots[k], p.figures[k]);
        break;
    }
  }
  state.SetLabel(kStageNames[stage]);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Stage)->DenseRange(kCount, kLiveRates);

// Explain's answer for one derived record, beside the derivation it follows: 0 makes the
// DerivedFigures message from the Explain rows (each field set by name), 1 serializes that message
// for the wire, 2 is Derive itself on the same records.
void BM_ExplainAnswer(benchmark::State& state) {
  const Prepared& p = PreparedRecords();
  std::vector<v1::DerivedFigures> messages;
  for (size_t k = 0; k < p.figures.size(); ++k) messages.push_back(FiguresToProto(p.figures[k], p.records[k].model()));
  const auto part = state.range(0);
  size_t i = 0;
  std::string out;
  for (auto _ : state) {
    const size_t k = i++ % p.records.size();
    if (part == 0) benchmark::DoNotOptimize(FiguresToProto(p.figures[k], p.records[k].model()));
    if (part == 1) benchmark::DoNotOptimize(messages[k].SerializeToString(&out));
    if (part == 2) benchmark::DoNotOptimize(Derive(FactsFromProto(p.records[k]), *p.profiles[k]));
  }
  constexpr const char* kParts[] = {"to message", "serialize", "derive"};
  state.SetLabel(kParts[part]);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ExplainAnswer)->DenseRange(0, 2);

// One scrape (snapshot + exposition text) with `models` models x 5 tiers populated, every cell
// with all three latencies observed: the worst case for series count.
// `models` x 5 tiers populated, every latency measured (the worst case per cell).
struct Populated {
  explicit Populated(int models)
      : registry(catalog, static_cast<uint32_t>(models), UnknownModelPolicy::kGeneric),
        aggregator(registry.slots().slot_count()),
        ledger(registry, aggregator),
        exposition(aggregator, registry) {
    for (int m = 0; m < models; ++m) {
      const std::string model = "finetune-" + std::to_string(m);
      for (int tier = 0; tier < 5; ++tier) {
        RecordFacts f;
        f.model = model;
        f.tier_value = tier;
        f.prompt_tokens = 8192;
        f.logical_match_tokens = tier == 0 ? 0 : 4096;
        f.reload_seconds = 0.004;
        f.suffix_prefill_seconds = 0.3;
        f.ttft_seconds = 0.31;
        ok = ok && ledger.Record(f).ok();
      }
    }
  }
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  ModelRegistry registry;
  Aggregator aggregator;
  Ledger ledger;
  MetricsExposition exposition;
  bool ok = true;
};

void BM_Scrape(benchmark::State& state) {
  Populated p(static_cast<int>(state.range(0)));
  if (!p.ok) state.SkipWithError("record rejected");
  size_t bytes = 0;
  for (auto _ : state) {  // as /metrics serves it: written in pieces, each sent and dropped
    bytes = 0;
    p.exposition.Write([&](std::string& piece) {
      bytes += piece.size();
      benchmark::DoNotOptimize(piece.data());
    });
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}

// The part of a scrape before the text: the snapshot merged and turned into prometheus-cpp
// MetricFamily values, family by family (BM_Scrape minus this is TextSerializer's share).
void BM_ScrapeCollectOnly(benchmark::State& state) {
  Populated p(static_cast<int>(state.range(0)));
  if (!p.ok) state.SkipWithError("record rejected");
  size_t series = 0;
  for (auto _ : state) {
    series = 0;
    p.exposition.CollectEach([&](prometheus::MetricFamily& f) {
      series += f.metric.size();
      benchmark::DoNotOptimize(f.metric.data());
    });
  }
  state.counters["metrics"] = static_cast<double>(series);
}
BENCHMARK(BM_Scrape)->Arg(64)->Arg(1000)->Unit(benchmark::kMillisecond);

// One Advise with 16 replica candidates (a tier, a prefix and a wait each), answered from live rates,
// in process: what a router pays per decision beside BM_AdviseOne, a single candidate (the gRPC or
// HTTP round trip comes on top).
void AdviseWith(benchmark::State& state, int candidates) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  ModelRegistry registry(catalog, 1, UnknownModelPolicy::kReject);
  Aggregator aggregator(registry.slots().slot_count());
  LiveRates rates(registry.slots().slot_count(), 300);
  Ledger ledger(registry, aggregator, &rates);
  for (int tier = 1; tier <= 4; ++tier) {
    RecordFacts f;
    f.model = "llama-3.1-8b";
    f.tier_value = tier;
    f.prompt_tokens = 8192;
    f.logical_match_tokens = 4096;
    f.reload_seconds = 0.01 * tier;
    f.suffix_prefill_seconds = 0.4;
    if (!ledger.Record(f).ok()) state.SkipWithError("record rejected");
  }
  AdviceRequestInput request;
  request.model = "llama-3.1-8b";
  request.prompt_tokens = 8192;
  for (int i = 0; i < candidates; ++i) {
    AdviceCandidateInput c;
    c.tier_value = 1 + i % 4;
    c.logical_match_tokens = 512 * (i + 1);
    c.wait_seconds = 0.01 * i;
    c.replica = "replica-" + std::to_string(i);
    request.candidates.push_back(c);
  }
  for (auto _ : state) {
    auto advice = Advise(request, registry, &rates);
    benchmark::DoNotOptimize(advice);
  }
}
void BM_AdviseOne(benchmark::State& state) { AdviseWith(state, 1); }
void BM_Advise16(benchmark::State& state) { AdviseWith(state, 16); }
BENCHMARK(BM_AdviseOne)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Advise16)->Unit(benchmark::kMicrosecond);

// One break-even (docs/cost-model.md §13): a binary search over llama-3.1-8b's boundaries up to 2^31
// tokens, two Evaluates per step; Advise computes one per distinct (tier, bandwidth, wait) of its
// candidates, the exposition one per (model, tier) with a live bandwidth. Beside BM_AdviseOne.
void BM_BreakEven(benchmark::State& state) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const ModelRegistry registry(catalog, 1, UnknownModelPolicy::kReject);
  const auto model = registry.Resolve("llama-3.1-8b");
  for (auto _ : state) benchmark::DoNotOptimize(BreakEvenTokens(model, Tier::kHost, 2e9, *ProfileComputeTime(3e14)));
}
BENCHMARK(BM_BreakEven);
BENCHMARK(BM_ScrapeCollectOnly)->Arg(64)->Arg(1000)->Unit(benchmark::kMillisecond);

// The compute-time model (docs/cost-model.md §8), side by side in one run. One sample into the fit's
// decayed sums: 0 the affine model's four sums alone (the fit before the pass curve), 1 the whole
// DecayedComputeFit (the affine summary and the curve's 77 sums: 13 of them per sample).
void BM_ComputeSample(benchmark::State& state) {
  DecayedSums<4> affine;
  DecayedComputeFit fit;
  const bool curve = state.range(0) == 1;
  double now = 0;
  for (auto _ : state) {
    now += 1e-3;
    const PassFlops pass{16, 2.6e11, 3.4e10};
    if (curve) {
      fit.Observe(pass, 0.012, now, 300);
    } else {
      const double x = pass.flops / 1e12;
      affine.Observe({x, 0.012, x * x, x * 0.012}, now, 300);
    }
  }
  benchmark::DoNotOptimize(affine);
  benchmark::DoNotOptimize(fit);
  state.SetLabel(curve ? "affine + pass curve" : "affine only");
}
BENCHMARK(BM_ComputeSample)->Arg(0)->Arg(1);

// One refit from merged sums, with its curve solve: at most once a second per model on the record
// path, and before an Advise answer when records came since the last fit.
void BM_ComputeRefit(benchmark::State& state) {
  DecayedComputeFit fit;
  for (int i = 0; i < 64; ++i) {
    const uint64_t tokens = 16u << (i % 10);
    fit.Observe({tokens, 1.4e10 * static_cast<double>(tokens), 5e8 * static_cast<double>(tokens)},
                0.01 + 4e-5 * static_cast<double>(tokens), i, 300);
  }
  for (auto _ : state) benchmark::DoNotOptimize(fit.Fit());
}
BENCHMARK(BM_ComputeRefit);

// One Advise (a full-prefix host hit, 16 tokens left) from 0: a stated throughput (the affine model,
// all or nothing), 1: a live pass curve (Advise also weighs a partial reload beside each knot).
void BM_AdviseModel(benchmark::State& state) {
  const bool curve = state.range(0) == 1;
  v1::ProfileCatalog overrides;
  google::protobuf::TextFormat::ParseFromString(
      R"pb(profiles {
             name: "llama-3.1-8b"
             serving { prefill_flops_per_second: 1.7e14 host_reload_bytes_per_second: 2e9 }
           })pb",
      &overrides);
  const ProfileCatalog catalog = *ProfileCatalog::Make(overrides);
  ModelRegistry registry(catalog, 1, UnknownModelPolicy::kReject);
  Aggregator aggregator(registry.slots().slot_count());
  LiveRates rates(registry.slots().slot_count(), 300, MonotonicSeconds, LiveRates::kDefaultRefitSeconds, curve);
  Ledger ledger(registry, aggregator, &rates);
  for (int64_t prompt : {256, 1024, 4096, 16384}) {
    for (int64_t match : {int64_t{0}, prompt / 2, prompt - 16}) {
      RecordFacts f;
      f.model = "llama-3.1-8b";
      f.tier_value = match > 0 ? 1 : 0;
      f.prompt_tokens = prompt;
      f.logical_match_tokens = match;
      f.suffix_prefill_seconds = std::max(0.010, 4e-5 * static_cast<double>(prompt - match));
      if (!ledger.Record(f).ok()) state.SkipWithError("record rejected");
    }
  }
  AdviceRequestInput request;
  request.model = "llama-3.1-8b";
  request.prompt_tokens = 8192;
  AdviceCandidateInput c;
  c.tier_value = 2;
  c.logical_match_tokens = 8176;
  request.candidates.push_back(c);
  for (auto _ : state) {
    auto advice = Advise(request, registry, &rates);
    benchmark::DoNotOptimize(advice);
  }
  state.SetLabel(curve ? "live pass curve" : "stated throughput (affine)");
}
BENCHMARK(BM_AdviseModel)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kvledger

BENCHMARK_MAIN();
