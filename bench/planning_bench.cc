// What `kvledger plan` costs on the shipped conversation trace (12,031 requests, 145 M prompt
// tokens), beside the baseline of reading its lines without parsing them:
//   BM_ReadLines   getline over the file (the floor: I/O and line splitting)
//   BM_ReadTrace   the strict parse into requests (ReadTrace)
//   BM_Plan/N      one capacity of N device tokens simulated and costed (Plan), the trace in memory
//   BM_TenCapacities/0/T and /1/T   ten capacities: one Plan each, and PlanAll's one pass; T = 1
//                                   puts a host tier of four times the device below each
//   BM_PlanCommand/0/0 and /1/0     the same ten device capacities with the trace read each time,
//                                   as `kvledger plan` runs
// Usage: planning_bench TRACE.jsonl [benchmark flags]
#include <cmath>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "lib/planning/plan.h"
#include "lib/profiles/profile_catalog.h"

namespace kvledger {
namespace {

std::string trace_path;

void BM_ReadLines(benchmark::State& state) {
  for (auto _ : state) {
    std::ifstream in(trace_path);
    size_t lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    benchmark::DoNotOptimize(lines);
  }
}
BENCHMARK(BM_ReadLines)->Unit(benchmark::kMillisecond);

void BM_ReadTrace(benchmark::State& state) {
  for (auto _ : state) {
    std::ifstream in(trace_path);
    TraceReadResult read = ReadTrace(in, TraceReadOptions{});
    benchmark::DoNotOptimize(read.requests.data());
  }
}
BENCHMARK(BM_ReadTrace)->Unit(benchmark::kMillisecond);

void BM_Plan(benchmark::State& state) {
  std::ifstream in(trace_path);
  const TraceReadResult read = ReadTrace(in, TraceReadOptions{});
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  PlanConfig config;
  config.capacity_tokens[0] = static_cast<uint64_t>(state.range(0));
  for (auto _ : state) {
    auto result = Plan(read.requests, *catalog.Find("llama-3.1-8b"), config);
    benchmark::DoNotOptimize(result->total.requests);
  }
  state.counters["requests/s"] =
      benchmark::Counter(static_cast<double>(read.requests.size()), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Plan)->Arg(1'000'000)->Arg(10'000'000)->Arg(100'000'000)->Unit(benchmark::kMillisecond);

// Ten device capacities from 512 K to 65.5 M tokens, log-spaced; `host`: a host tier of four times
// each below it.
std::vector<PlanConfig> TenConfigs(bool host) {
  std::vector<PlanConfig> configs(10);
  for (size_t i = 0; i < configs.size(); ++i) {
    configs[i].capacity_tokens[0] = static_cast<uint64_t>(512000 * std::pow(128.0, static_cast<double>(i) / 9));
    if (host) {
      configs[i].capacity_tokens[1] = 4 * configs[i].capacity_tokens[0];
      configs[i].bandwidth[1] = 2e10;
    }
  }
  return configs;
}

// One Plan per config (`one_pass` false, the baseline) or PlanAll's one pass.
void PlanEach(const std::vector<TraceRequest>& trace, const std::vector<PlanConfig>& configs, bool one_pass) {
  static const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const Profile& profile = *catalog.Find("llama-3.1-8b");
  if (one_pass) {
    benchmark::DoNotOptimize(PlanAll(trace, profile, configs)->size());
    return;
  }
  for (const PlanConfig& config : configs) benchmark::DoNotOptimize(Plan(trace, profile, config)->total.requests);
}

// Ten capacities of one trace: range(0) 0 runs Plan once per capacity (the baseline), 1 PlanAll's one
// pass over one stack; range(1) 1 adds a host tier of four times the device below each (Plan:
// TieredBlockCache, block by block).
void BM_TenCapacities(benchmark::State& state) {
  std::ifstream in(trace_path);
  const TraceReadResult read = ReadTrace(in, TraceReadOptions{});
  const std::vector<PlanConfig> configs = TenConfigs(state.range(1) == 1);
  for (auto _ : state) PlanEach(read.requests, configs, state.range(0) == 1);
}
BENCHMARK(BM_TenCapacities)->Args({0, 0})->Args({1, 0})->Args({0, 1})->Args({1, 1})->Unit(benchmark::kMillisecond);

// What `kvledger plan` does at ten capacities: the trace read and checked, then planned.
void BM_PlanCommand(benchmark::State& state) {
  const std::vector<PlanConfig> configs = TenConfigs(state.range(1) == 1);
  for (auto _ : state) {
    std::ifstream in(trace_path);
    const TraceReadResult read = ReadTrace(in, TraceReadOptions{});
    PlanEach(read.requests, configs, state.range(0) == 1);
  }
}
BENCHMARK(BM_PlanCommand)->Args({0, 0})->Args({1, 0})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kvledger

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (argc != 2) {
    std::cerr << "usage: planning_bench TRACE.jsonl [benchmark flags]\n";
    return 2;
  }
  kvledger::trace_path = argv[1];
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
