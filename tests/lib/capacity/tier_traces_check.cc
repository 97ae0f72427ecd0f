// The second-tier what-if on real traces (docs/planning.md, "A second tier"): each trace is replayed
// through CapacityCurves (PlanTiers, as `kvledger plan --tier` and the server run it) with a device of three sizes and a tier of four, exact and from a sample of
// --samples blocks, and compared with the independent two-level simulation (tests/testing/two_level_sim.h):
// the tier's token hit (tokens it holds / prompt tokens) and the net prefill seconds it saves with the
// break-even threshold on, and the time reloading regardless would cost. Prints a Markdown table;
// exits 1 when an exact figure is off by more than 0.01 in token hit or 1 % in net seconds, or a
// sampled one by more than --sampled_error in token hit.
//
//   tier_traces_check [--block_tokens=B] [--samples=S] [--sampled_error=E] TRACE...
//
// B (default 512, the traces' own) must divide 512: each 512-token id becomes B-token ids chained under
// it (ReblockedIds).
#include <cmath>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "lib/capacity/capacity_curves.h"
#include "lib/planning/tier_plan.h"
#include "lib/planning/trace.h"
#include "lib/profiles/profile_catalog.h"
#include "tests/testing/two_level_sim.h"

namespace kvledger {
namespace {

const ComputeTime kCompute{Basis::kLive, 0.02, 1.0 / 4e14};  // 400 TFLOP/s and 20 ms a pass

// The four tiers, sized against a device of `device` blocks of `block_bytes`: host at 1× and 4× the
// device, disk at 16× with a 1 ms wait, and a remote store at 2× over a slow 1 GB/s link with a 5 ms
// wait (where many reloads are slower than recomputing).
std::vector<TierSize> Tiers(uint64_t device, uint64_t block_bytes) {
  return {TierSize{Tier::kHost, device * block_bytes, 25e9, 0}, TierSize{Tier::kHost, 4 * device * block_bytes, 25e9, 0},
          TierSize{Tier::kDisk, 16 * device * block_bytes, 6e9, 0.001},
          TierSize{Tier::kRemote, 2 * device * block_bytes, 1e9, 0.005}};
}

CapacityCurves::ModelCurve Live(const std::vector<TraceRequest>& trace, const std::vector<std::vector<uint64_t>>& ids,
                                const Profile& profile, uint64_t block, uint64_t device,
                                const std::vector<TierSize>& tiers, uint64_t samples) {
  TierPlanInput input{block, device * block, tiers, false, kCompute, std::nullopt, samples, &ids};
  return PlanTiers(trace, profile, input);
}

double Net(const TierRung& r) {
  return (Uint128ToDouble(r[kTierRecomputeNanos]) - Uint128ToDouble(r[kTierReloadNanos])) / 1e9;
}
double Relative(double value, double truth) { return truth == 0 ? std::fabs(value) : value / truth - 1; }

// The rows of one trace; false when a figure is past its bound.
bool TraceRows(const std::string& path, uint64_t block, uint64_t samples, double sampled_error, const Profile& profile) {
  std::ifstream in(path);
  TraceReadResult read = ReadTrace(in, TraceReadOptions{});
  if (const absl::Status status = read.Check(path); !status.ok()) {
    std::cerr << status << "\n";
    return false;
  }
  const std::vector<std::vector<uint64_t>> ids = ReblockedIds(read.requests, block);
  absl::flat_hash_set<uint64_t> distinct;
  for (const auto& request : ids) distinct.insert(request.begin(), request.end());
  const std::string name = path.substr(path.find_last_of('/') + 1);
  const uint64_t block_bytes = block * BytesPerCachedToken(profile.shape());
  bool within = true;
  for (uint64_t share : {64u, 16u, 4u}) {
    const uint64_t device = distinct.size() / share;
    const std::vector<TierSize> tiers = Tiers(device, block_bytes);
    const auto exact = Live(read.requests, ids, profile, block, device, tiers, uint64_t{1} << 40);
    const auto sampled = Live(read.requests, ids, profile, block, device, tiers, samples);
    for (size_t t = 0; t < tiers.size(); ++t) {
      const uint64_t tier_blocks = tiers[t].bytes / block_bytes;
      const testing::TwoLevelTruth truth = testing::SimulateTwoLevel(
          read.requests, ids, profile, block, {device, tier_blocks, tiers[t].stated_bytes_per_second, tiers[t].wait_seconds},
          kCompute);
      const double hit = Uint128ToDouble(truth.tier_tokens) / truth.prompt_tokens;
      const auto hit_of = [&](const CapacityCurves::ModelCurve& c) {
        return Uint128ToDouble(c.tier_rungs[t][kTierMatchTokens]) / Uint128ToDouble(c.prompt_tokens) - hit;
      };
      const double exact_net = Relative(Net(exact.tier_rungs[t]), truth.NetSeconds());
      const double sampled_net = Relative(Net(sampled.tier_rungs[t]), truth.NetSeconds());
      std::cout << absl::StrFormat(
          "| %s | %d | %d | %s %d | %.4f | %+.4f | %+.4f | %.1f | %+.2f%% | %+.1f%% | %d of %d | %.1f |\n", name, block, device,
          TierLabel(tiers[t].kind), tier_blocks, hit, hit_of(exact), hit_of(sampled), truth.NetSeconds(),
          100 * exact_net, 100 * sampled_net, truth.slower_requests, truth.hit_requests, truth.excess_seconds);
      within = within && std::fabs(hit_of(exact)) <= 0.01 && std::fabs(exact_net) <= 0.01 &&
               std::fabs(hit_of(sampled)) <= sampled_error;
    }
  }
  return within;
}

}  // namespace
}  // namespace kvledger

int main(int argc, char** argv) {
  uint64_t samples = 65536, block = kvledger::kDefaultTraceBlockTokens;
  double sampled_error = 0.01;
  std::vector<std::string> traces;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    bool ok = true;
    if (absl::StartsWith(arg, "--block_tokens=")) {
      ok = absl::SimpleAtoi(arg.substr(15), &block) && block > 0 && kvledger::kDefaultTraceBlockTokens % block == 0;
    } else if (absl::StartsWith(arg, "--samples=")) {
      ok = absl::SimpleAtoi(arg.substr(10), &samples) && samples > 0;
    } else if (absl::StartsWith(arg, "--sampled_error=")) {
      ok = absl::SimpleAtod(arg.substr(16), &sampled_error);
    } else if (absl::StartsWith(arg, "--")) {
      ok = false;
    } else {
      traces.push_back(arg);
    }
    if (!ok) {
      std::cerr << arg << ": not understood\nusage: tier_traces_check [--block_tokens=B] [--samples=S] [--sampled_error=E] TRACE...\n";
      return 2;
    }
  }
  const kvledger::ProfileCatalog catalog = kvledger::ProfileCatalog::Builtin();
  const kvledger::Profile& profile = *catalog.Find("llama-3.1-8b");
  std::cout << "| trace | block tokens | device blocks | tier, blocks | tier token hit (simulated) | exact − simulated | sampled − "
               "simulated | net seconds saved (simulated) | exact | sampled | slower than recompute | their excess "
               "seconds |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  bool within = true;
  for (const std::string& trace : traces) within = kvledger::TraceRows(trace, block, samples, sampled_error, profile) && within;
  return within ? 0 : 1;
}
