// Fleet rates: replicas' sums added equal one replica that saw every sample, worked by hand;
// the table from the rules' samples; bad samples named; an old table not used.
#include "lib/accounting/fleet_rates.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvledger {
namespace {

using ::testing::HasSubstr;

LabeledSample S(std::vector<std::pair<std::string, std::string>> labels, double value) {
  return LabeledSample{std::move(labels), value};
}

// The samples the fleet rules give for one replica's reload rate (from kvledger_live_reload_sums_total).
void AddReload(std::vector<LabeledSample>& out, const std::string& model, const char* tier, const DecayedRate& r) {
  const auto parts = r.Parts();
  for (size_t i = 0; i < parts.size(); ++i) out.push_back(S({{"model", model}, {"tier", tier}, {"term", kReloadParts[i]}}, parts[i]));
}

void AddFit(std::vector<LabeledSample>& out, const std::string& model, const DecayedComputeFit& f) {
  const auto parts = f.Parts();
  for (size_t i = 0; i < parts.size(); ++i) out.push_back(S({{"model", model}, {"term", ComputeFitParts()[i]}}, parts[i]));
}

// Replica A reloaded 100 bytes in 1 s, replica B 900 bytes in 2 s, at the same instant: the fleet's
// bandwidth is 1000 / 3 bytes/s, where the mean of the two replicas' rates is (100 + 450) / 2 = 275.
TEST(FleetRatesTest, SumsAddWhereRatesDoNot) {
  DecayedRate a, b;
  a.Observe(100, 1, 0, 300);
  b.Observe(900, 2, 0, 300);
  std::vector<LabeledSample> reload;
  AddReload(reload, "llama-3.1-8b", "host", a);
  AddReload(reload, "llama-3.1-8b", "host", b);
  auto table = FleetRates::FromSamples(reload, {});
  ASSERT_TRUE(table.ok()) << table.status();
  FleetRates fleet(60, [] { return 0.0; });
  fleet.Update(*std::move(table));
  const auto e = fleet.ReloadBandwidth("llama-3.1-8b", Tier::kHost);
  ASSERT_TRUE(e.has_value());
  EXPECT_DOUBLE_EQ(e->rate, 1000.0 / 3);
  EXPECT_EQ(e->samples, 2u);
  EXPECT_DOUBLE_EQ(e->weight, 2);
  EXPECT_FALSE(fleet.ReloadBandwidth("llama-3.1-8b", Tier::kDisk).has_value());
  EXPECT_FALSE(fleet.ReloadBandwidth("qwen3-8b", Tier::kHost).has_value());
}

// Samples at different ages, split over three replicas, against one replica that saw them all
// (decayed to the same instant): the same rate, weight and compute line.
TEST(FleetRatesTest, SplitOverReplicasEqualsOneReplica) {
  DecayedRate whole_rate;
  DecayedComputeFit whole_fit;
  std::array<DecayedRate, 3> rates;
  std::array<DecayedComputeFit, 3> fits;
  for (int i = 0; i < 30; ++i) {
    const double now = i * 17.0;
    const double flops = 1e12 * (1 + i % 7);
    const double seconds = 0.02 + flops * 2e-15;
    const PassFlops pass{static_cast<uint64_t>(64 * (1 + i % 7)), flops, 0};
    whole_rate.Observe(1e9 * (1 + i % 5), 0.1 + 0.01 * i, now, 300);
    whole_fit.Observe(pass, seconds, now, 300);
    rates[i % 3].Observe(1e9 * (1 + i % 5), 0.1 + 0.01 * i, now, 300);
    fits[i % 3].Observe(pass, seconds, now, 300);
  }
  const double at = 600;
  std::vector<LabeledSample> reload, compute;
  for (int r = 0; r < 3; ++r) {
    DecayedRate rate_now;
    rates[r].AddDecayedTo(rate_now, at, 300);
    AddReload(reload, "m", "remote", rate_now);
    DecayedComputeFit fit_now;
    fits[r].AddDecayedTo(fit_now, at, 300);
    AddFit(compute, "m", fit_now);
  }
  DecayedRate whole_now;
  whole_rate.AddDecayedTo(whole_now, at, 300);
  DecayedComputeFit whole_fit_now;
  whole_fit.AddDecayedTo(whole_fit_now, at, 300);
  auto table = FleetRates::FromSamples(reload, compute);
  ASSERT_TRUE(table.ok()) << table.status();
  FleetRates fleet(60, [] { return 0.0; });
  fleet.Update(*std::move(table));
  EXPECT_NEAR(fleet.ReloadBandwidth("m", Tier::kRemote)->rate, whole_now.Evidence()->rate,
              whole_now.Evidence()->rate * 1e-12);  // the same up to rounding
  const auto fit = fleet.ComputeModel("m");
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->basis, Basis::kFleet);
  EXPECT_EQ(fit->samples, 30u);
  EXPECT_NEAR(fit->fixed_seconds, 0.02, 1e-9);  // the line the samples were drawn from
  EXPECT_NEAR(fit->seconds_per_flop, 2e-15, 1e-22);
  EXPECT_NEAR(fit->fixed_seconds, whole_fit_now.Fit()->fixed_seconds, 1e-12);
  // The pass curve too is the one fitted to every replica's samples together.
  ASSERT_TRUE(fit->curve && whole_fit_now.Fit()->curve);
  for (size_t j = 0; j < kPassKnots; ++j) {
    EXPECT_NEAR(fit->curve->knot_seconds[j], whole_fit_now.Fit()->curve->knot_seconds[j],
                fit->curve->knot_seconds[j] * 1e-6) << j;  // the same up to the solve's rounding
  }
}

TEST(FleetRatesTest, BadSamplesAreNamed) {
  const auto error = [](std::vector<LabeledSample> reload, std::vector<LabeledSample> compute) {
    auto table = FleetRates::FromSamples(reload, compute);
    EXPECT_FALSE(table.ok());
    return std::string(table.status().message());
  };
  EXPECT_THAT(error({S({{"model", "m"}, {"tier", "host"}, {"term", "volts"}}, 1)}, {}),
              HasSubstr("reload sample 0: term = \"volts\": not a term of this rule"));
  EXPECT_THAT(error({S({{"model", "m"}, {"tier", "mixed"}, {"term", "bytes"}}, 1)}, {}),
              HasSubstr("tier = \"mixed\": must be device, host, disk or remote"));
  EXPECT_THAT(error({}, {S({{"term", "seconds"}}, 1)}), HasSubstr("compute sample 0: no model label"));
  EXPECT_THAT(error({}, {S({{"model", "m"}, {"term", "seconds"}}, 1), S({{"model", "m"}, {"term", "weight"}}, -1)}),
              HasSubstr("compute sample 1: value = -1: must be finite and >= 0"));
  EXPECT_THAT(error({S({{"model", "m"}, {"tier", "host"}}, 1)}, {}), HasSubstr("no term label"));
}

// A table older than its limit is not used; a new one is.
TEST(FleetRatesTest, AnOldTableIsNotUsed) {
  double now = 0;
  FleetRates fleet(60, [&] { return now; });
  EXPECT_FALSE(fleet.AgeSeconds().has_value());
  DecayedRate r;
  r.Observe(100, 1, 0, 300);
  std::vector<LabeledSample> reload;
  AddReload(reload, "m", "disk", r);
  fleet.Update(*FleetRates::FromSamples(reload, {}));
  now = 60;
  EXPECT_TRUE(fleet.ReloadBandwidth("m", Tier::kDisk).has_value());
  now = 61;
  EXPECT_FALSE(fleet.ReloadBandwidth("m", Tier::kDisk).has_value());
  EXPECT_DOUBLE_EQ(*fleet.AgeSeconds(), 61);
  fleet.Update(*FleetRates::FromSamples(reload, {}));
  EXPECT_TRUE(fleet.ReloadBandwidth("m", Tier::kDisk).has_value());
}

}  // namespace
}  // namespace kvledger
