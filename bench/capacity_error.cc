// The sampled capacity curves against the exact ones on real traces (docs/cost-model.md §14,
// "Sampling"): each trace is replayed through CapacityCurves twice, once with a stack that holds every
// block (exact) and once with a stack of at most --samples blocks, and the largest absolute error of
// the token hit, attention avoided and prefill avoided ratios over a ladder spanning the trace's
// blocks is printed as a Markdown row. Exits 1 when any error is above --max_error.
//
//   capacity_error [--block_tokens=B] [--samples=S] [--max_error=E] [--model=M] TRACE...
//   capacity_error --store=DOCUMENTS [--samples=S] [--max_error=E] [--model=M] [--ladder=L]
//
// --check_from=T: the bound holds only from the first capacity of at least T tokens (the errors of
// smaller ones are still printed).
// B must divide 512 (the traces' own block): a 512-token block's id becomes B-token ids chained under
// it, as an engine with B-token blocks would hash the same prompt. --store replays, instead of a
// trace, a stream at the scale of a shared store (tens of millions of 16-token blocks, reuse distances
// up to hundreds of millions of tokens) on the server's default ladder (or L): see StoreStream.
#include <algorithm>
#include <cmath>
#include <random>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/capacity/capacity_curves.h"
#include "lib/planning/trace.h"
#include "lib/profiles/profile_catalog.h"

namespace kvledger {
namespace {

struct Args {
  uint64_t block_tokens = 512;
  uint64_t samples = 8192;
  double max_error = 0.01;
  std::string model = "llama-3.1-8b";
  std::vector<std::string> traces;
  uint64_t check_from = 0;  // --check_from: the bound applies to capacities of at least this many tokens
  uint64_t store_documents = 0;  // --store: the documents of StoreStream; 0 = the traces
  std::string ladder = std::string(kDefaultCapacityLadder);
};

std::vector<CapacityCurves::ModelCurve> Replay(const std::vector<TraceRequest>& trace,
                                               const std::vector<std::vector<uint64_t>>& ids, const Profile& profile,
                                               const std::vector<uint64_t>& ladder, uint64_t block, uint64_t samples) {
  auto curves = CapacityCurves::Create(ladder, 1, CurveLimits{1, samples, 1e9});
  for (size_t i = 0; i < trace.size(); ++i) {
    RecordFacts facts = FactsAtMatch(profile.name(), trace[i].input_length, std::nullopt, 0);
    if (trace[i].output_length > 0) facts.output_tokens = trace[i].output_length;
    facts.prefix_block_ids = ids[i];
    facts.block_tokens = static_cast<int64_t>(block);
    facts.cache_id = "engine-0";
    (*curves)->Observe(0, facts, profile, EstimateSource{});
  }
  return (*curves)->Snapshot();
}

// A store-scale stream at 16-token blocks: 8,192-token requests, each a document's 7,168-token prefix
// (448 blocks, shared by every request for that document) and a 1,024-token suffix of its own (64
// blocks); documents are drawn by a Zipf law of exponent 1 (seeded, so every run replays the same
// stream), so reuse distances spread from a few blocks to the whole stream. 1.5 requests per document.
struct Stream {
  std::vector<TraceRequest> requests;
  std::vector<std::vector<uint64_t>> ids;
};
Stream StoreStream(uint64_t documents) {
  constexpr uint64_t kShared = 448, kOwn = 64;
  std::vector<double> cdf(documents);
  double sum = 0;
  for (uint64_t d = 0; d < documents; ++d) cdf[d] = sum += 1.0 / static_cast<double>(d + 1);
  std::mt19937_64 rng(20);
  std::uniform_real_distribution<double> uniform(0, sum);
  Stream out;
  const uint64_t requests = documents * 3 / 2;
  for (uint64_t r = 0; r < requests; ++r) {
    const auto doc = static_cast<uint64_t>(std::lower_bound(cdf.begin(), cdf.end(), uniform(rng)) - cdf.begin());
    std::vector<uint64_t> ids;
    for (uint64_t b = 0; b < kShared; ++b) ids.push_back((doc << 20) + b);
    for (uint64_t b = 0; b < kOwn; ++b) ids.push_back((uint64_t{1} << 62) + r * kOwn + b);
    TraceRequest request;
    request.input_length = static_cast<int64_t>((kShared + kOwn) * 16);
    out.requests.push_back(request);
    out.ids.push_back(std::move(ids));
  }
  return out;
}

double Ratio(Uint128 part, Uint128 whole) { return whole == 0 ? 0 : Uint128ToDouble(part) / Uint128ToDouble(whole); }

// The error of each ratio at rung `r`: token hit, attention, prefill.
std::array<double, 3> RungErrors(const CapacityCurves::ModelCurve& exact, const CapacityCurves::ModelCurve& sampled,
                                 size_t r) {
  const auto& e = exact.rungs[r];
  const auto& s = sampled.rungs[r];
  return {Ratio(s.match_tokens, sampled.prompt_tokens) - Ratio(e.match_tokens, exact.prompt_tokens),
          Ratio(s.attention_avoided_flops, sampled.attention_baseline_flops) -
              Ratio(e.attention_avoided_flops, exact.attention_baseline_flops),
          Ratio(s.prefill_avoided_flops, sampled.prefill_baseline_flops) -
              Ratio(e.prefill_avoided_flops, exact.prefill_baseline_flops)};
}

// The largest error of each ratio over the ladder's rungs from `first` on.
std::array<double, 3> Errors(const CapacityCurves::ModelCurve& exact, const CapacityCurves::ModelCurve& sampled,
                             size_t first = 0) {
  std::array<double, 3> worst = {0, 0, 0};
  for (size_t r = first; r < exact.rungs.size(); ++r) {
    const std::array<double, 3> errors = RungErrors(exact, sampled, r);
    for (size_t f = 0; f < 3; ++f) worst[f] = std::max(worst[f], std::fabs(errors[f]));
  }
  return worst;
}

// One stream's row on `ladder` (empty: ten capacities from a thousandth of its blocks to all of
// them); false when an error is above the bound.
bool StreamRow(const std::string& name, const std::vector<TraceRequest>& requests,
               const std::vector<std::vector<uint64_t>>& ids, std::vector<uint64_t> ladder, uint64_t block_tokens,
               const Args& args, const Profile& profile) {
  absl::flat_hash_set<uint64_t> distinct;
  uint64_t references = 0;
  for (const auto& request : ids) {
    distinct.insert(request.begin(), request.end());
    references += request.size();
  }
  const double top = static_cast<double>(distinct.size() * block_tokens);
  for (int i = 0; ladder.empty() && i < 10; ++i) {
    ladder.push_back(static_cast<uint64_t>(std::llround(top * std::pow(1000.0, (i - 9) / 9.0))));
  }
  const auto exact = Replay(requests, ids, profile, ladder, block_tokens, uint64_t{1} << 40);
  const auto sampled = Replay(requests, ids, profile, ladder, block_tokens, args.samples);
  // The bound applies from the first capacity of at least --check_from tokens.
  const auto first = static_cast<size_t>(std::lower_bound(ladder.begin(), ladder.end(), args.check_from) - ladder.begin());
  const auto worst = Errors(exact.at(0), sampled.at(0), first);
  std::cout << absl::StrFormat("| %s | %d | %d | %d | %d | %.1e | %.4f | %.4f | %.4f |\n", name, block_tokens,
                               requests.size(), references, distinct.size(),
                               static_cast<double>(args.samples) / static_cast<double>(distinct.size()), worst[0],
                               worst[1], worst[2]);
  if (args.store_documents > 0) {  // each capacity: the exact token hit, and each ratio's error
    const CapacityCurves::ModelCurve& e = exact.at(0);
    for (size_t r = 0; r < e.rungs.size(); ++r) {
      const std::array<double, 3> error = RungErrors(e, sampled.at(0), r);
      std::cout << absl::StrFormat("|   %s tokens | token hit %.4f | errors %+.4f %+.4f %+.4f |\n",
                                   CapacityLabel(r < ladder.size() ? ladder[r] : kUnlimited),
                                   Ratio(e.rungs[r].match_tokens, e.prompt_tokens), error[0], error[1], error[2]);
    }
  }
  return std::max({worst[0], worst[1], worst[2]}) <= args.max_error;
}

// One trace's row; false when an error is above the bound.
bool Row(const std::string& path, const Args& args, const Profile& profile) {
  std::ifstream in(path);
  TraceReadResult read = ReadTrace(in, TraceReadOptions{});
  if (const absl::Status status = read.Check(path); !status.ok()) {
    std::cerr << status << "\n";
    return false;
  }
  return StreamRow(path.substr(path.find_last_of('/') + 1), read.requests,
                   ReblockedIds(read.requests, args.block_tokens), {}, args.block_tokens, args, profile);
}

// The store-scale stream's row on args.ladder.
bool StoreRow(const Args& args, const Profile& profile) {
  auto ladder = ParseCapacityLadder(args.ladder, "--ladder");
  if (!ladder.ok()) {
    std::cerr << ladder.status() << "\n";
    return false;
  }
  const Stream stream = StoreStream(args.store_documents);
  return StreamRow(absl::StrCat("store of ", args.store_documents, " documents"), stream.requests, stream.ids,
                   *ladder, 16, args, profile);
}

bool ParseArgs(int argc, char** argv, Args& args) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&](const char* flag) { return arg.substr(std::string(flag).size()); };
    bool ok = true;
    if (absl::StartsWith(arg, "--block_tokens=")) {
      ok = absl::SimpleAtoi(value("--block_tokens="), &args.block_tokens) && args.block_tokens > 0 &&
           kDefaultTraceBlockTokens % args.block_tokens == 0;
    } else if (absl::StartsWith(arg, "--samples=")) {
      ok = absl::SimpleAtoi(value("--samples="), &args.samples) && args.samples > 0;
    } else if (absl::StartsWith(arg, "--max_error=")) {
      ok = absl::SimpleAtod(value("--max_error="), &args.max_error);
    } else if (absl::StartsWith(arg, "--store=")) {
      ok = absl::SimpleAtoi(value("--store="), &args.store_documents) && args.store_documents > 0 &&
           args.store_documents < (uint64_t{1} << 40);
    } else if (absl::StartsWith(arg, "--check_from=")) {
      ok = absl::SimpleAtoi(value("--check_from="), &args.check_from);
    } else if (absl::StartsWith(arg, "--ladder=")) {
      args.ladder = value("--ladder=");
    } else if (absl::StartsWith(arg, "--model=")) {
      args.model = value("--model=");
    } else if (absl::StartsWith(arg, "--")) {
      ok = false;
    } else {
      args.traces.push_back(arg);
    }
    if (!ok) {
      std::cerr << arg << ": not understood (--block_tokens must divide 512)\n";
      return false;
    }
  }
  return args.traces.empty() != (args.store_documents == 0);
}

}  // namespace
}  // namespace kvledger

int main(int argc, char** argv) {
  kvledger::Args args;
  if (!kvledger::ParseArgs(argc, argv, args)) {
    std::cerr << "usage: capacity_error [--block_tokens=B] [--samples=S] [--max_error=E] [--model=M] TRACE...\n"
                 "       capacity_error --store=DOCUMENTS [--samples=S] [--max_error=E] [--model=M] [--ladder=L]\n"
                 "       (either: [--check_from=TOKENS])\n";
    return 2;
  }
  const kvledger::ProfileCatalog catalog = kvledger::ProfileCatalog::Builtin();
  const kvledger::Profile* profile = catalog.Find(args.model);
  if (profile == nullptr) {
    std::cerr << "--model = " << args.model << ": not in the built-in catalog\n";
    return 2;
  }
  std::cout << "| trace | block tokens | requests | block references | distinct blocks | sample / distinct | "
               "token hit error | attention error | prefill error |\n|---|---|---|---|---|---|---|---|---|\n";
  bool within = true;
  for (const std::string& trace : args.traces) within = kvledger::Row(trace, args, *profile) && within;
  if (args.store_documents > 0) within = kvledger::StoreRow(args, *profile);
  return within ? 0 : 1;
}
