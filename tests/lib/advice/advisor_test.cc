// Advice: hand-worked answers on profile rates and on live rates, unknown rates never guessed,
// validation naming the field, and the all-or-nothing rule checked by brute force over every
// reusable boundary of every catalog model.
#include "lib/advice/advisor.h"

#include <array>
#include <cmath>
#include <functional>
#include <map>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "lib/accounting/ledger.h"
#include "lib/profiles/profile_catalog.h"

namespace kvledger {
namespace {

using ::testing::HasSubstr;

ProfileCatalog CatalogWithRates() {
  v1::ProfileCatalog overrides;
  google::protobuf::TextFormat::ParseFromString(
      R"pb(profiles {
             name: "llama-3.1-8b"
             serving { prefill_flops_per_second: 1e14 host_reload_bytes_per_second: 1e10 }
           })pb",
      &overrides);
  return *ProfileCatalog::Make(overrides);
}

AdviceCandidateInput Candidate(int tier, int64_t tokens, std::optional<int64_t> recoverable,
                               std::optional<double> wait_seconds = std::nullopt, std::string replica = "") {
  AdviceCandidateInput c;
  c.tier_value = tier;
  c.logical_match_tokens = tokens;
  c.recoverable_tokens = recoverable;
  c.wait_seconds = wait_seconds;
  c.replica = std::move(replica);
  return c;
}

// Records of misses of eight sizes from an engine whose pass over F FLOPs takes exactly
// fixed + F / flops_per_second: enough for the live compute-time model to be ready with those two.
void TeachCompute(Ledger& ledger, const ModelRegistry& registry, double fixed, double flops_per_second) {
  for (int prompt : {512, 1024, 2048, 4096, 8192, 16384, 512, 8192}) {
    RecordFacts miss;
    miss.model = "llama-3.1-8b";
    miss.prompt_tokens = prompt;
    const double flops = Uint128ToDouble(Evaluate(miss, registry)->prefill_baseline_flops);
    miss.suffix_prefill_seconds = fixed + flops / flops_per_second;
    ASSERT_TRUE(ledger.Record(miss).ok());
  }
}

AdviceRequestInput Request(std::vector<AdviceCandidateInput> candidates) {
  AdviceRequestInput r;
  r.model = "llama-3.1-8b";
  r.prompt_tokens = 8192;
  r.candidates = std::move(candidates);
  return r;
}

// llama-3.1-8b, N = 8192: F(N) = 131943542816768 FLOPs; the host candidate reuses 4096 tokens =
// 4096 x 131072 = 536870912 bytes and saves F(4096) = 61573724897280 FLOPs. At the profile's
// 1e14 FLOP/s and 1e10 B/s:
//   reload 0.0536870912 s, recompute instead 0.6157372489728 s,
//   prefill 0.0536870912 + 0.70369817919488 = 0.75738527039488 s, from scratch 1.31943542816768 s.
// The disk candidate has no stated bandwidth: its reload is unknown, not guessed.
TEST(AdvisorTest, HandWorkedOnProfileRates) {
  const ProfileCatalog catalog = CatalogWithRates();
  ModelRegistry registry(catalog, 1, UnknownModelPolicy::kReject);
  auto advice =
      Advise(Request({Candidate(2, 4096, std::nullopt), Candidate(3, 6000, std::nullopt)}), registry, nullptr);
  ASSERT_TRUE(advice.ok()) << advice.status();
  EXPECT_EQ(advice->prefill_flops, Uint128{131943542816768});
  EXPECT_EQ(advice->compute.basis, Basis::kProfile);
  EXPECT_DOUBLE_EQ(*advice->recompute_all_seconds, 1.31943542816768);
  const CandidateAdvice& host = advice->candidates[0];
  EXPECT_EQ(host.reused_bytes, Uint128{536870912});
  EXPECT_EQ(host.reused_flops, Uint128{61573724897280});
  EXPECT_EQ(host.basis, Basis::kProfile);
  EXPECT_DOUBLE_EQ(*host.reload_seconds, 0.0536870912);
  EXPECT_DOUBLE_EQ(*host.recompute_seconds, 0.6157372489728);
  EXPECT_DOUBLE_EQ(*host.prefill_seconds, 0.75738527039488);
  const CandidateAdvice& disk = advice->candidates[1];
  EXPECT_EQ(disk.basis, Basis::kNone);
  EXPECT_FALSE(disk.reload_seconds.has_value());
  EXPECT_FALSE(disk.prefill_seconds.has_value());
  EXPECT_TRUE(disk.recompute_seconds.has_value());  // the compute rate is known
  EXPECT_EQ(advice->recommendation(), "host");
  EXPECT_EQ(advice->recommended, 0);
  EXPECT_DOUBLE_EQ(*advice->saving_seconds, 1.31943542816768 - 0.75738527039488);
}

// A reload slower than recomputing the same tokens loses to recomputing from scratch.
TEST(AdvisorTest, SlowReloadMeansRecompute) {
  v1::ProfileCatalog overrides;
  google::protobuf::TextFormat::ParseFromString(
      R"pb(profiles { name: "llama-3.1-8b" serving { prefill_flops_per_second: 1e14 remote_reload_bytes_per_second: 5e8 } })pb",
      &overrides);
  const ProfileCatalog catalog = *ProfileCatalog::Make(overrides);
  ModelRegistry registry(catalog, 1, UnknownModelPolicy::kReject);
  auto advice = Advise(Request({Candidate(4, 4096, std::nullopt)}), registry, nullptr);
  ASSERT_TRUE(advice.ok());
  // 536870912 / 5e8 = 1.073741824 s of reload against 0.6157372489728 s of recompute.
  EXPECT_DOUBLE_EQ(*advice->candidates[0].reload_seconds, 1.073741824);
  EXPECT_EQ(advice->recommendation(), "recompute");
  EXPECT_DOUBLE_EQ(*advice->saving_seconds, 0);
}

// With no rate anywhere, every estimate is absent and there is no recommendation.
TEST(AdvisorTest, UnknownRatesAreNeverGuessed) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  ModelRegistry registry(catalog, 1, UnknownModelPolicy::kReject);
  auto advice = Advise(Request({Candidate(2, 4096, std::nullopt)}), registry, nullptr);
  ASSERT_TRUE(advice.ok());
  EXPECT_EQ(advice->compute.basis, Basis::kNone);
  EXPECT_FALSE(advice->recompute_all_seconds.has_value());
  EXPECT_FALSE(advice->candidates[0].reload_seconds.has_value());
  EXPECT_FALSE(advice->candidates[0].recompute_seconds.has_value());
  EXPECT_FALSE(advice->recommended.has_value());
  EXPECT_EQ(advice->recommendation(), "");
  EXPECT_FALSE(advice->saving_seconds.has_value());
}

// Live rates win over the profile's once records arrived: the numbers follow from the recorded
// bytes, seconds and FLOPs by hand (the compute model learned with no fixed cost, then a fixed cost
// of 12 ms per pass).
TEST(AdvisorTest, LiveRatesFromRecords) {
  const ProfileCatalog catalog = CatalogWithRates();
  ModelRegistry registry(catalog, 1, UnknownModelPolicy::kReject);
  Aggregator aggregator(registry.slots().slot_count());
  LiveRates rates(registry.slots().slot_count(), 300, [] { return 0.0; }, /*refit_seconds=*/0);
  Ledger ledger(registry, aggregator, &rates);
  TeachCompute(ledger, registry, 0, 140739635838976.0);
  RecordFacts f;
  f.model = "llama-3.1-8b";
  f.tier_value = 3;  // disk
  f.prompt_tokens = 8192;
  f.logical_match_tokens = 4096;
  f.reload_seconds = 0.25;         // 536870912 B / 0.25 s = 2147483648 B/s
  f.suffix_prefill_seconds = 0.5;  // 70369817919488 FLOPs / 0.5 s = 140739635838976 FLOP/s
  ASSERT_TRUE(ledger.Record(f).ok());
  auto advice = Advise(Request({Candidate(3, 4096, std::nullopt), Candidate(2, 4096, std::nullopt)}), registry, &rates);
  ASSERT_TRUE(advice.ok());
  EXPECT_EQ(advice->compute.basis, Basis::kLive);
  EXPECT_NEAR(*advice->compute.rate, 140739635838976.0, 140739635838976.0 * 1e-9);
  EXPECT_NEAR(advice->compute.fixed_seconds, 0, 1e-10);
  EXPECT_EQ(advice->compute.samples, 9u);
  const CandidateAdvice& disk = advice->candidates[0];
  EXPECT_EQ(disk.basis, Basis::kLive);
  EXPECT_DOUBLE_EQ(*disk.reload_seconds, 0.25);
  EXPECT_NEAR(*disk.prefill_seconds, 0.25 + 0.5, 1e-9);  // the recorded request, replayed
  EXPECT_NEAR(*advice->recompute_all_seconds, 131943542816768.0 / 140739635838976.0, 1e-9);
  // Host bandwidth is still the profile's; compute is live: the weaker basis is "profile".
  EXPECT_EQ(advice->candidates[1].bandwidth.basis, Basis::kProfile);
  EXPECT_EQ(advice->candidates[1].basis, Basis::kProfile);
  EXPECT_EQ(advice->recommendation(), "host");  // 0.0537 s of reload beats 0.25 s
}

// The fleet's rates (fleet_rates.h) win over this replica's live ones where the fleet has evidence,
// also for a model this replica never saw; where it has none, the replica's own rates answer.
TEST(AdvisorTest, FleetRatesFirst) {
  const ProfileCatalog catalog = CatalogWithRates();
  ModelRegistry registry(catalog, 1, UnknownModelPolicy::kReject);
  Aggregator aggregator(registry.slots().slot_count());
  LiveRates rates(registry.slots().slot_count(), 300, [] { return 0.0; }, /*refit_seconds=*/0);
  Ledger ledger(registry, aggregator, &rates);
  RecordFacts f;
  f.model = "llama-3.1-8b";
  f.tier_value = 3;  // disk: 536870912 B in 0.25 s here
  f.prompt_tokens = 8192;
  f.logical_match_tokens = 4096;
  f.reload_seconds = 0.25;
  ASSERT_TRUE(ledger.Record(f).ok());
  DecayedRate host;  // the fleet: host only, 1 GiB in 0.5 s
  host.Observe(1073741824.0, 0.5, 0, 300);
  FleetRates::Table table;
  table.reload.emplace(std::make_pair(std::string("llama-3.1-8b"), Tier::kHost), host);
  FleetRates fleet(60, [] { return 0.0; });
  fleet.Update(std::move(table));
  auto advice = Advise(Request({Candidate(3, 4096, std::nullopt), Candidate(2, 4096, std::nullopt)}), registry,
                       &rates, &fleet);
  ASSERT_TRUE(advice.ok());
  EXPECT_EQ(advice->candidates[0].bandwidth.basis, Basis::kLive);  // no fleet evidence for disk
  EXPECT_DOUBLE_EQ(*advice->candidates[0].bandwidth.rate, 2147483648.0);
  EXPECT_EQ(advice->candidates[1].bandwidth.basis, Basis::kFleet);
  EXPECT_DOUBLE_EQ(*advice->candidates[1].bandwidth.rate, 2147483648.0);
  EXPECT_EQ(advice->candidates[1].bandwidth.samples, 1u);
  // Without its own slot (a registry of one label, taken by another model) the fleet still answers.
  ModelRegistry other(catalog, 1, UnknownModelPolicy::kReject);
  ASSERT_TRUE(other.Resolve("qwen3-8b").ok());
  auto unseen = Advise(Request({Candidate(2, 4096, std::nullopt)}), other, nullptr, &fleet);
  ASSERT_TRUE(unseen.ok());
  EXPECT_EQ(unseen->candidates[0].bandwidth.basis, Basis::kFleet);
}

// A fixed cost per pass is paid by every choice once: recomputing everything costs c + F(N) / C,
// reloading costs the reload + c + the rest / C, and recomputing the prefix instead adds only its
// FLOPs / C.
TEST(AdvisorTest, FixedCostPerPass) {
  const ProfileCatalog catalog = CatalogWithRates();
  ModelRegistry registry(catalog, 1, UnknownModelPolicy::kReject);
  Aggregator aggregator(registry.slots().slot_count());
  LiveRates rates(registry.slots().slot_count(), 300, [] { return 0.0; }, /*refit_seconds=*/0);
  Ledger ledger(registry, aggregator, &rates);
  TeachCompute(ledger, registry, 0.012, 3e14);
  auto advice = Advise(Request({Candidate(2, 4096, std::nullopt)}), registry, &rates);
  ASSERT_TRUE(advice.ok());
  EXPECT_NEAR(advice->compute.fixed_seconds, 0.012, 1e-10);
  EXPECT_NEAR(*advice->recompute_all_seconds, 0.012 + 131943542816768.0 / 3e14, 1e-9);
  const CandidateAdvice& host = advice->candidates[0];  // the profile's 1e10 B/s
  EXPECT_NEAR(*host.recompute_seconds, 61573724897280.0 / 3e14, 1e-9);
  EXPECT_NEAR(*host.prefill_seconds, 0.0536870912 + 0.012 + 70369817919488.0 / 3e14, 1e-9);
}

// Replicas ranked in seconds (docs/cost-model.md §11's example): with the live rates of one host
// record (4096 tokens = 536870912 B in 0.05 s; 70369817919488 FLOPs in 0.4 s), replica a holds 6000
// tokens behind 0.5 s of queue, replica b 2048 tokens behind 0.02 s: b is faster, and a replica whose
// bandwidth is unknown (disk) is not ranked.
TEST(AdvisorTest, RanksReplicasInSecondsByHand) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  ModelRegistry registry(catalog, 1, UnknownModelPolicy::kReject);
  Aggregator aggregator(registry.slots().slot_count());
  LiveRates rates(registry.slots().slot_count(), 300, [] { return 0.0; }, /*refit_seconds=*/0);
  Ledger ledger(registry, aggregator, &rates);
  TeachCompute(ledger, registry, 0, 70369817919488.0 / 0.4);
  RecordFacts f;
  f.model = "llama-3.1-8b";
  f.tier_value = 2;
  f.prompt_tokens = 8192;
  f.logical_match_tokens = 4096;
  f.reload_seconds = 0.05;
  f.suffix_prefill_seconds = 0.4;
  ASSERT_TRUE(ledger.Record(f).ok());
  auto advice = Advise(Request({Candidate(2, 6000, std::nullopt, 0.5, "a"), Candidate(2, 2048, std::nullopt, 0.02, "b"),
                                Candidate(3, 8000, std::nullopt, 0.0, "c")}),
                       registry, &rates);
  ASSERT_TRUE(advice.ok()) << advice.status();
  const double B = 536870912.0 / 0.05, C = 70369817919488.0 / 0.4, FN = 131943542816768.0;
  // F(6000) = 93190619136000, F(2048) = 29687350820864 (attention 262144 t(t+1) + 15099494400 t).
  const double a = 0.5 + 786432000.0 / B + (FN - 93190619136000.0) / C;
  const double b = 0.02 + 268435456.0 / B + (FN - 29687350820864.0) / C;
  EXPECT_NEAR(*advice->candidates[0].expected_seconds, a, 1e-9);
  EXPECT_NEAR(*advice->candidates[1].expected_seconds, b, 1e-9);
  EXPECT_NEAR(a, 0.7935, 1e-4);
  EXPECT_NEAR(b, 0.6263, 1e-4);
  EXPECT_EQ(advice->candidates[1].rank, 1u);
  EXPECT_EQ(advice->candidates[0].rank, 2u);
  EXPECT_EQ(advice->candidates[2].rank, 0u);  // no disk rate: never ranked on a guess
  EXPECT_FALSE(advice->candidates[2].expected_seconds.has_value());
  EXPECT_TRUE(advice->by_replica);
  ASSERT_TRUE(advice->recommended.has_value());
  EXPECT_EQ(*advice->recommended, 1);
  EXPECT_EQ(advice->recommendation(), "host");  // reload 0.025 s beats recomputing 0.169 s
  EXPECT_EQ(advice->candidates[1].replica, "b");
}

// An unknown wait is not a wait of 0: beside a replica with a measured wait, one without is not
// ranked, though its prefix is longer; with no wait given anywhere, replicas rank on the prefill.
TEST(AdvisorTest, UnknownWaitIsNotRanked) {
  const ProfileCatalog catalog = CatalogWithRates();
  ModelRegistry registry(catalog, 1, UnknownModelPolicy::kReject);
  auto advice = Advise(Request({Candidate(2, 2048, std::nullopt, 0.5, "measured"),
                                Candidate(2, 8000, std::nullopt, std::nullopt, "unmeasured")}),
                       registry, nullptr);
  ASSERT_TRUE(advice.ok());
  EXPECT_EQ(advice->candidates[0].rank, 1u);
  EXPECT_EQ(advice->candidates[1].rank, 0u);
  EXPECT_FALSE(advice->candidates[1].expected_seconds.has_value());
  EXPECT_EQ(*advice->recommended, 0);
  auto no_waits = Advise(Request({Candidate(2, 2048, std::nullopt, std::nullopt, "a"),
                                  Candidate(2, 8000, std::nullopt, std::nullopt, "b")}),
                         registry, nullptr);
  ASSERT_TRUE(no_waits.ok());
  EXPECT_EQ(no_waits->candidates[1].rank, 1u);  // the longer prefix, both waits equally unknown
  EXPECT_EQ(no_waits->candidates[0].rank, 2u);
}

TEST(AdvisorTest, BadInputNamesTheField) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  ModelRegistry registry(catalog, 1, UnknownModelPolicy::kReject);
  auto advise = [&](AdviceRequestInput r) { return Advise(r, registry, nullptr).status(); };
  AdviceRequestInput r = Request({Candidate(2, 9000, std::nullopt)});
  EXPECT_EQ(advise(r).message(), "candidates[0].logical_match_tokens = 9000: must be in [0, prompt_tokens = 8192]");
  r = Request({Candidate(0, 100, std::nullopt)});
  EXPECT_THAT(advise(r).message(), HasSubstr("candidates[0].tier = 0: must be the tier holding the prefix"));
  r = Request({Candidate(2, 0, std::nullopt)});
  EXPECT_EQ(advise(r).message(), "candidates[0].logical_match_tokens = 0: must be >= 1 (a cached prefix)");
  r = Request({});
  r.prompt_tokens = 0;
  EXPECT_THAT(advise(r).message(), HasSubstr("prompt_tokens = 0"));
  r = Request({});
  r.model = "llama-9";
  EXPECT_THAT(advise(r).message(), HasSubstr("model = \"llama-9\": no profile of that name"));
  r = Request({Candidate(2, 100, std::nullopt, -1.0, "a")});
  EXPECT_EQ(advise(r).message(), "candidates[0].wait_seconds = -1: must be finite, >= 0 and <= 86400 seconds");
  r = Request({Candidate(2, 100, std::nullopt, 0.1, std::string(129, 'x'))});
  EXPECT_EQ(advise(r).message(), "candidates[0].replica (129 bytes): must be at most 128 bytes");
  r = Request(std::vector<AdviceCandidateInput>(17, Candidate(2, 100, std::nullopt)));
  EXPECT_EQ(advise(r).message(), "candidates (17 of them): at most 16");
  EXPECT_EQ(advise(r).code(), absl::StatusCode::kInvalidArgument);
}

// docs/cost-model.md §9: reusing a prefix of p tokens costs T(p) = bytes(p)/B + (F(N) - F(p))/C;
// bytes is linear (or capped: concave) and F convex in p, so T is concave and its minimum over the
// reusable boundaries is at an end: all or nothing. Brute force over every boundary the model can
// resume at (page or checkpoint aligned), for every catalog profile, with B and C chosen so both
// ends cost the same (the case where a middle point would show first).
TEST(AdvisorTest, AllOrNothingByBruteForce) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  ModelRegistry registry(catalog, 1, UnknownModelPolicy::kReject);
  constexpr int64_t kPrompt = 4096, kMatch = 3072;
  for (const auto& name : catalog.Names()) {
    SCOPED_TRACE(name);
    auto at = [&](int64_t p) {
      RecordFacts f;
      f.model = name;
      f.tier_value = p == 0 ? 0 : 2;
      f.prompt_tokens = kPrompt;
      f.logical_match_tokens = p;
      auto d = Evaluate(f, registry);
      EXPECT_TRUE(d.ok());
      return *d;
    };
    const RecordFigures whole = at(kMatch);
    const double bytes_all = Uint128ToDouble(whole.reused_bytes);
    const double flops_all = Uint128ToDouble(whole.prefill_avoided_flops[2]);
    if (bytes_all == 0) continue;
    const double compute = 1e14, bandwidth = bytes_all * compute / flops_all;  // T(0) == T(P)
    const double total = Uint128ToDouble(whole.prefill_baseline_flops);
    auto cost = [&](const RecordFigures& d) {
      return Uint128ToDouble(d.reused_bytes) / bandwidth + (total - Uint128ToDouble(d.prefill_avoided_flops[2])) / compute;
    };
    const double ends = std::min(total / compute, cost(whole));
    int checked = 0;
    for (int64_t p = 1; p < kMatch; ++p) {
      const RecordFigures d = at(p);
      if (static_cast<int64_t>(d.reused_tokens) != p) continue;  // not a boundary the model resumes at
      EXPECT_GE(cost(d), ends * (1 - 1e-12)) << "p = " << p;
      ++checked;
    }
    EXPECT_GT(checked, 0);
  }
}

// An engine's pass seconds for a record's suffix pass.
using Engine = std::function<double(const RecordFigures&)>;

// A roofline engine: 10 ms up to 256 tokens, then 40 us a token; attention 1.5 x slower per FLOP.
double Roofline(const RecordFigures& d) {
  const double fresh = static_cast<double>(d.prompt_tokens - d.reused_tokens);
  return std::max(0.010, 4e-5 * fresh) + d.SuffixPass().attention_flops * 1.5 * 4e-5 / 13958643712.0;
}
// A tile engine (docs/cost-model.md §8): 8 ms plus 30 us a token of the pass padded to 128 tokens;
// attention at 1e-14 s per FLOP.
double Tiles(const RecordFigures& d) {
  return 0.008 + 3e-5 * static_cast<double>(TilePadded(d.prompt_tokens - d.reused_tokens)) +
         d.SuffixPass().attention_flops * 1e-14;
}

// Teaches `ledger` the engine (times `scale`) from misses and hits of several sizes.
void TeachEngine(Ledger& ledger, const ModelRegistry& registry, const Engine& engine, double scale = 1) {
  for (int64_t prompt : {256, 700, 1024, 3000, 4096, 10000, 16384}) {
    for (int64_t match : {int64_t{0}, prompt / 2, prompt - 16, prompt - 64, prompt - 300}) {
      RecordFacts f;
      f.model = "llama-3.1-8b";
      f.tier_value = match > 0 ? 1 : 0;
      f.prompt_tokens = prompt;
      f.logical_match_tokens = std::max<int64_t>(match, 0);
      f.suffix_prefill_seconds = scale * engine(*Evaluate(f, registry));
      ASSERT_TRUE(ledger.Record(f).ok());
    }
  }
}

// Under a pass curve all-or-nothing no longer holds (docs/cost-model.md §10): a short pass is nearly
// free to extend, so with a slow tier leaving a few hundred tokens to compute can beat reloading
// them. For a roofline engine and a tile engine, by brute force over every resumable boundary: the
// partial reload Advise offers is the least prefill there is; and when it offers none, the least
// there is gains no more than the stated error over the better of reloading all and recomputing.
TEST(AdvisorTest, PartialReloadUnderAPassCurveByBruteForce) {
  const ProfileCatalog catalog = CatalogWithRates();
  for (const Engine& engine : {Engine(Roofline), Engine(Tiles)}) {
    ModelRegistry registry(catalog, 1, UnknownModelPolicy::kReject);
    Aggregator aggregator(registry.slots().slot_count());
    LiveRates rates(registry.slots().slot_count(), 300, [] { return 0.0; }, /*refit_seconds=*/0);
    Ledger ledger(registry, aggregator, &rates);
    TeachEngine(ledger, registry, engine);
    const auto model = rates.ComputeModel(registry.Resolve("llama-3.1-8b")->label->slot, /*current=*/true);
    ASSERT_TRUE(model && model->curve);
    int offered = 0;
    for (const int64_t match : {4080, 4000, 3900, 2000, 1000}) {
      AdviceRequestInput request = Request({Candidate(2, match, std::nullopt)});
      request.prompt_tokens = 4096;
      auto advice = Advise(request, registry, &rates);
      ASSERT_TRUE(advice.ok());
      const CandidateAdvice& c = advice->candidates[0];
      double brute = *advice->recompute_all_seconds, brute_compute = brute;
      for (int64_t q = 1; q <= match; ++q) {
        RecordFacts f;
        f.model = "llama-3.1-8b";
        f.tier_value = 2;
        f.prompt_tokens = 4096;
        f.logical_match_tokens = q;
        const RecordFigures d = *Evaluate(f, registry);
        if (static_cast<int64_t>(d.reused_tokens) != q) continue;  // not a boundary the model resumes at
        const double pass = model->PassSeconds(d.SuffixPass());
        if (Uint128ToDouble(d.reused_bytes) / 1e10 + pass < brute) {
          brute = Uint128ToDouble(d.reused_bytes) / 1e10 + pass;
          brute_compute = pass;
        }
      }
      const bool all = *c.prefill_seconds < *advice->recompute_all_seconds;
      const double simple = std::min(*advice->recompute_all_seconds, *c.prefill_seconds);
      const double simple_compute = all ? *c.prefill_seconds - *c.reload_seconds : *advice->recompute_all_seconds;
      if (c.partial_prefill_seconds) {
        ++offered;
        EXPECT_NEAR(*c.partial_prefill_seconds, brute, brute * 1e-12) << match;
        EXPECT_EQ(advice->recommendation(), "host");
      } else {
        EXPECT_LE(simple - brute, kRecomputeEstimateError * std::fabs(simple_compute - brute_compute) + 1e-12)
            << match;
      }
      const double chosen = c.partial_prefill_seconds ? std::min(simple, *c.partial_prefill_seconds) : simple;
      EXPECT_NEAR(*advice->saving_seconds, *advice->recompute_all_seconds - chosen, chosen * 1e-9) << match;
    }
    EXPECT_GT(offered, 0);  // 16 tokens left: extending the pass is all but free
  }
}

// The compute model perturbed within its stated error (every pass 10 % faster or slower) never turns
// a recommendation that is not a tie into another one that is not: the answers are the same, or one
// of them is a tie. Without the tie rule some answers flip (counted, so the test shows the rule at
// work): the bandwidths straddle where reloading a token costs what computing it does.
TEST(AdvisorTest, PerturbedWithinTheErrorNeverFlips) {
  int compared = 0, flips_without_ties = 0, ties = 0;
  for (const double bandwidth : {2e9, 4e9, 4.5e9, 5e9, 6e9, 1e10, 3e10}) {
    v1::ProfileCatalog overrides;
    overrides.add_profiles()->set_name("llama-3.1-8b");
    overrides.mutable_profiles(0)->mutable_serving()->set_host_reload_bytes_per_second(bandwidth);
    const ProfileCatalog catalog = *ProfileCatalog::Make(overrides);
    struct Answer {
      std::string action;
      bool tie;
      std::string fastest;
    };
    std::map<std::pair<int64_t, int64_t>, std::array<Answer, 3>> answers;
    const std::array<double, 3> scales = {1.0, 1 - kRecomputeEstimateError, 1 + kRecomputeEstimateError};
    for (size_t k = 0; k < scales.size(); ++k) {
      ModelRegistry registry(catalog, 1, UnknownModelPolicy::kReject);
      Aggregator aggregator(registry.slots().slot_count());
      LiveRates rates(registry.slots().slot_count(), 300, [] { return 0.0; }, /*refit_seconds=*/0);
      Ledger ledger(registry, aggregator, &rates);
      TeachEngine(ledger, registry, Tiles, scales[k]);
      for (const int64_t n : {512, 2048, 8192, 32768}) {
        for (const int64_t match : {n / 8, n / 2, n - 16, n - 200}) {
          AdviceRequestInput request = Request({Candidate(2, match, std::nullopt)});
          request.prompt_tokens = n;
          auto advice = Advise(request, registry, &rates);
          ASSERT_TRUE(advice.ok());
          const CandidateAdvice& c = advice->candidates[0];
          const double chosen = *advice->recompute_all_seconds - *advice->saving_seconds;
          const bool partial = c.partial_prefill_seconds && chosen == *c.partial_prefill_seconds;
          const double fastest = std::min({*advice->recompute_all_seconds, *c.prefill_seconds,
                                           c.partial_prefill_seconds.value_or(INFINITY)});
          answers[{n, match}][k] = {advice->recommendation() + (partial ? " part" : ""), advice->tie,
                                    fastest == *advice->recompute_all_seconds ? "recompute" : "host"};
        }
      }
    }
    for (const auto& [request, a] : answers) {
      for (size_t k = 1; k < scales.size(); ++k) {
        ++compared;
        flips_without_ties += a[0].fastest != a[k].fastest;
        ties += a[0].tie;
        if (!a[0].tie && !a[k].tie) {
          EXPECT_EQ(a[k].action, a[0].action) << request.first << "/" << request.second << " x " << scales[k];
        }
      }
    }
  }
  EXPECT_GT(compared, 0);
  EXPECT_GT(flips_without_ties, 0);
  EXPECT_GT(ties, 0);
}

// One rate per question: the break-even gauge's function answers from the same rates as Advise (the
// fleet's first), so with a fleet it equals Advise's break_even_tokens and differs from what this
// replica's own bandwidth alone gives.
TEST(AdvisorTest, BreakEvenFromTheSameRatesAsAdvise) {
  const ProfileCatalog catalog = CatalogWithRates();
  ModelRegistry registry(catalog, 1, UnknownModelPolicy::kReject);
  Aggregator aggregator(registry.slots().slot_count());
  LiveRates rates(registry.slots().slot_count(), 300, [] { return 0.0; }, /*refit_seconds=*/0);
  Ledger ledger(registry, aggregator, &rates);
  TeachCompute(ledger, registry, 0.012, 3e14);
  RecordFacts f;
  f.model = "llama-3.1-8b";
  f.tier_value = 2;
  f.prompt_tokens = 8192;
  f.logical_match_tokens = 4096;
  f.reload_seconds = 536870912 / 2e10;  // this replica: 20 GB/s
  ASSERT_TRUE(ledger.Record(f).ok());
  DecayedRate host;  // the fleet: 2 GB/s
  host.Observe(2e9, 1, 0, 300);
  FleetRates::Table table;
  table.reload.emplace(std::make_pair(std::string("llama-3.1-8b"), Tier::kHost), host);
  FleetRates fleet(60, [] { return 0.0; });
  fleet.Update(std::move(table));
  const FleetRates* const fleet_rates = &fleet;
  for (const FleetRates* with : {static_cast<const FleetRates*>(nullptr), fleet_rates}) {
    auto advice = Advise(Request({Candidate(2, 4096, std::nullopt)}), registry, &rates, with);
    ASSERT_TRUE(advice.ok());
    ASSERT_TRUE(advice->candidates[0].break_even_tokens.has_value());
    EXPECT_EQ(ReloadBreakEvenTokens(registry, "llama-3.1-8b", Tier::kHost, &rates, with),
              advice->candidates[0].break_even_tokens);
    // The second-tier what-if reads the same bandwidth (docs/cost-model.md §15).
    EXPECT_EQ(ReloadBandwidthUsed(registry, "llama-3.1-8b", Tier::kHost, &rates, with).rate,
              advice->candidates[0].bandwidth.rate);
  }
  EXPECT_EQ(ReloadBandwidthUsed(registry, "llama-3.1-8b", Tier::kHost, &rates, &fleet).rate, 2e9);
  EXPECT_NEAR(*ReloadBandwidthUsed(registry, "llama-3.1-8b", Tier::kHost, &rates, nullptr).rate, 2e10, 1);
  EXPECT_FALSE(ReloadBandwidthUsed(registry, "no-such-model", Tier::kHost, &rates, &fleet).rate.has_value());
  EXPECT_NE(ReloadBreakEvenTokens(registry, "llama-3.1-8b", Tier::kHost, &rates, &fleet),
            ReloadBreakEvenTokens(registry, "llama-3.1-8b", Tier::kHost, &rates, nullptr));
  EXPECT_FALSE(ReloadBreakEvenTokens(registry, "no-such-model", Tier::kHost, &rates, &fleet).has_value());
}

}  // namespace
}  // namespace kvledger

namespace kvledger {
namespace {

// llama-3.1-8b by hand (docs/cost-model.md §13): F(p) = a p + c p (p + 1) / 2 with a = 13,958,643,712
// FLOPs per token and c = 524,288 per causal pair, bytes(p) = 131,072 p. With no wait, reloading p
// tokens pays when a + c (p + 1) / 2 > 131,072 C / B, i.e. from the first 16-token boundary above
// 2 (131,072 C / B - a) / c - 1. At C = 3e14 FLOP/s: 96,752 tokens at 1 GB/s, 21,760 at 2 GB/s.
TEST(BreakEvenTest, HandWorkedAtTwoBandwidths) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const ModelRegistry registry(catalog, 1, UnknownModelPolicy::kReject);
  const auto model = registry.Resolve("llama-3.1-8b");
  const double a = 13958643712, c = 524288, C = 3e14;
  for (const double B : {1e9, 2e9}) {
    const double bound = 2 * (131072 * C / B - a) / c - 1;
    const uint64_t want = (static_cast<uint64_t>(bound) / 16 + 1) * 16;
    EXPECT_EQ(BreakEvenTokens(model, Tier::kHost, B, *ProfileComputeTime(C)), want) << B;
  }
  EXPECT_EQ(BreakEvenTokens(model, Tier::kHost, 1e9, *ProfileComputeTime(C)), 96752u);
  EXPECT_EQ(BreakEvenTokens(model, Tier::kHost, 2e9, *ProfileComputeTime(C)), 21760u);
  // Fast enough that the first boundary pays; a wait moves the threshold up; unknown rates: nothing.
  EXPECT_EQ(BreakEvenTokens(model, Tier::kHost, 1e11, *ProfileComputeTime(C)), 16u);
  EXPECT_GT(*BreakEvenTokens(model, Tier::kHost, 2e9, *ProfileComputeTime(C), 0.05), 21760u);
  EXPECT_FALSE(BreakEvenTokens(model, Tier::kHost, 0, *ProfileComputeTime(C)).has_value());
}

// Against brute force on every catalog model (full, sliding-window, latent and hybrid recurrent
// attention): scanning boundaries up to 2^18 tokens, the least one from which on reloading always
// pays equals BreakEvenTokens, with and without a wait.
TEST(BreakEvenTest, EqualsBruteForceOnEveryCatalogModel) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const ModelRegistry registry(catalog, 1, UnknownModelPolicy::kReject);
  constexpr int64_t kScan = int64_t{1} << 18;
  for (const std::string& name : catalog.Names()) {
    const auto model = registry.Resolve(name);
    for (const auto& [B, wait] : {std::pair{2e9, 0.0}, std::pair{8e9, 0.02}}) {
      const double C = 3e14;
      // The gain of every reusable boundary, ascending; the answer is the first of the last run of gains > 0.
      std::optional<uint64_t> first_of_run;
      int64_t last_boundary = -1;
      for (int64_t p = 1; p <= kScan; ++p) {
        RecordFacts f;
        f.model = name;
        f.tier_value = static_cast<int>(Tier::kHost);
        f.prompt_tokens = p;
        f.logical_match_tokens = p;
        auto figures = Evaluate(f, model);
        ASSERT_TRUE(figures.ok()) << name << " " << p;
        if (static_cast<int64_t>(figures->reused_tokens) == last_boundary) continue;
        last_boundary = static_cast<int64_t>(figures->reused_tokens);
        const double gain = Uint128ToDouble(figures->ReusedPrefillFlops()) / C - wait -
                            Uint128ToDouble(figures->reused_bytes) / B;
        if (gain > 0 && !first_of_run) first_of_run = figures->reused_tokens;
        if (!(gain > 0)) first_of_run.reset();
      }
      const auto got = BreakEvenTokens(model, Tier::kHost, B, *ProfileComputeTime(C), wait);
      if (first_of_run) {
        EXPECT_EQ(got, first_of_run) << name << " B=" << B << " wait=" << wait;
      } else if (got) {
        EXPECT_GT(*got, static_cast<uint64_t>(kScan) - 1024) << name << " B=" << B << " wait=" << wait;
      }
    }
  }
}

}  // namespace
}  // namespace kvledger
