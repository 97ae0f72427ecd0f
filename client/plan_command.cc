// `kvledger plan`: a prefix-reuse trace replayed through simulated cache tiers of the capacities
// given, and what each capacity buys in tokens, attention, prefill FLOPs and seconds
// (docs/planning.md). Offline, or with --target: the server's live rates, and --send its records.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/commands.h"
#include "client/connection.h"
#include "client/flag_set.h"
#include "client/plan_output.h"
#include "client/tier_table.h"
#include "client/reporter.h"
#include "lib/planning/capacity.h"
#include "lib/planning/plan.h"
#include "lib/planning/tier_plan.h"
#include "lib/profiles/profile_catalog.h"
#include "lib/wire/advice_proto.h"
#include "lib/wire/calculators.h"
#include "lib/wire/capacity_proto.h"
#include "lib/wire/plan_json.h"
#include "lib/wire/proto_json.h"
#include "lib/wire/record_proto.h"

namespace kvledger::cli {
namespace {

struct PlanFlags {
  std::string model, profiles, plot, cache_id, tiers, format = "auto", use_order = std::string(kUseOrderNames[0]);
  CapacityInputs capacity;
  std::optional<uint64_t> block_tokens, context_tokens;
  std::optional<double> host_bandwidth, disk_bandwidth, flops_per_second, fixed_seconds, speedup;
  bool json = false, csv = false, send = false, tier_inclusive = false;
  Connection connection;
};

void RegisterPlanFlags(FlagSet& flags, PlanFlags& f) {
  flags.String("model", &f.model, "the model profile every request is costed with", true);
  flags.String("profiles", &f.profiles, "profile file adding or overriding built-in profiles");
  flags.String("format", &f.format,
               "the trace's format: auto (told from the first line), mooncake, bailian, lmcache-lookups or\n"
               "weka-conversations\n"
               "(docs/planning.md, \"The trace\")");
  flags.Uint64("block-tokens", &f.block_tokens,
               "tokens per block of the trace's ids (default: the format's, Mooncake and WEKA 512, Bailian 16,\n"
               "LMCache each line's chunk_size)");
  flags.Uint64("context-tokens", &f.context_tokens,
               "the deployment's context, prompt plus output (vLLM max_model_len): requests whose prompt leaves no\n"
               "room for an output token are counted apart, not planned (default: the profile's, if it states one)");
  flags.Choice("use-order", &f.use_order, {std::string(kUseOrderNames[0]), std::string(kUseOrderNames[1])},
               "the order a request's blocks are used in after their lookup: tail-first, as vLLM and SGLang release\n"
               "them (the live curves' order), or prompt, as simple LRU simulators replay a trace (docs/planning.md)");
  flags.String("capacity-tokens", &f.capacity.device,
               "device cache capacities in tokens: N, a list 1e6,3e6,1e7, a log range FROM:TO:POINTS, or inf\n"
               "(default inf: never evicts)");
  flags.String("host-capacity-tokens", &f.capacity.host, "a host tier below the device holding what it evicts");
  flags.String("disk-capacity-tokens", &f.capacity.disk, "a disk tier below the host holding what it evicts");
  flags.Double("host-bandwidth", &f.host_bandwidth, "host-to-device reload bytes/s (default: the server's, with --target)");
  flags.Double("disk-bandwidth", &f.disk_bandwidth, "disk-to-device reload bytes/s (default: the server's, with --target)");
  flags.Double("compute-flops-per-second", &f.flops_per_second,
               "prefill compute rate for recompute seconds (default: the server's live fit with --target, else the\n"
               "profile's stated throughput)");
  flags.Double("compute-fixed-seconds", &f.fixed_seconds, "fixed seconds per prefill pass (with --compute-flops-per-second)");
  flags.String("tier", &f.tiers,
               "KIND:SIZE[:BYTES_PER_SECOND[:WAIT_SECONDS]],...: a second tier of each size below each finite device "
               "capacity, net of its reloads, as the server's --capacity_tiers (docs/planning.md)");
  flags.Switch("tier-inclusive", &f.tier_inclusive,
               "with --tier: the tiers hold copies of the device's blocks (vLLM's OffloadingConnector), as the "
               "server's --capacity_tiers_inclusive");
  flags.Switch("json", &f.json, "print one JSON object (exact integers)");
  flags.Switch("csv", &f.csv, "print CSV: one row per capacity and record tier, and its total");
  flags.String("plot", &f.plot, "write FILE.svg: token hit, attention and prefill avoided against device capacity");
  flags.Switch("send", &f.send, "report every simulated request as a record to --target (one capacity only)");
  flags.Double("speedup", &f.speedup, "with --send: replay the trace's clock this many times faster (default: no pacing)");
  flags.String("cache-id", &f.cache_id, "with --send: the records' cache_id, the cache whose capacity curve they build (default: none)");
  f.connection.target.clear();  // no --target: offline
  f.connection.Register(flags);
}

// The trace at `path` ("-": standard input), with a progress line on a terminal.
absl::StatusOr<TraceReadResult> LoadTrace(const std::string& path, const PlanFlags& f) {
  TraceReadOptions options;
  const absl::StatusOr<TraceFormat> format = ParseTraceFormat("--format", f.format);
  if (!format.ok()) return format.status();
  options.format = *format;
  options.block_tokens = f.block_tokens.value_or(0);
  std::ifstream file;
  std::istream* in = &std::cin;
  double size = 0;
  if (path != "-") {
    file.open(path, std::ios::binary);
    if (!file) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot be read"));
    in = &file;
    struct stat st {};
    if (stat(path.c_str(), &st) == 0) size = static_cast<double>(st.st_size);
  }
  const bool tty = isatty(STDERR_FILENO);
  auto progress = [size](uint64_t bytes) {
    if (size > 0) std::cerr << absl::StrFormat("\rkvledger plan: reading the trace %3.0f%%", 100.0 * bytes / size);
    else std::cerr << absl::StrFormat("\rkvledger plan: reading the trace, %.1f MB", bytes / 1e6);
  };
  TraceReadResult read = ReadTrace(*in, options, tty ? std::function<void(uint64_t)>(progress) : nullptr);
  if (tty) std::cerr << "\r" << std::string(50, ' ') << "\r";
  if (absl::Status s = read.Check(path == "-" ? "standard input" : path); !s.ok()) return s;
  if (read.repeated_lookups > 0) {
    std::cerr << "kvledger plan: note: " << read.repeated_lookups
              << " lookups repeat a request id already read (a scheduler asking again while the request waits); "
                 "each request is planned at its first lookup\n";
  }
  if (read.empty_prompts > 0) {
    std::cerr << "kvledger plan: note: " << read.empty_prompts
              << " requests have no input tokens (in = 0) and are not planned\n";
  }
  return read;
}

// The rates a server measured (Advise), used where no flag gives them.
struct LiveRates {
  std::optional<ComputeTime> compute;
  std::array<std::optional<double>, kPlanTierCount> bandwidth;
};

absl::StatusOr<LiveRates> AskLiveRates(const Connection& connection, const std::string& model) {
  v1::AdviceRequest request;
  request.set_model(model);
  request.set_prompt_tokens(4096);
  for (const char* candidate : {"host:2048", "disk:2048"}) *request.add_candidates() = *ParseCandidate(candidate, "");
  grpc::ClientContext context;
  connection.SetDeadline(context);
  v1::Advice advice;
  const grpc::Status status = connection.Stub()->Advise(&context, request, &advice);
  if (!status.ok()) return absl::UnavailableError(DescribeRpcError(status, connection));
  LiveRates live;
  const v1::Rate& compute = advice.compute();
  if ((compute.basis() == v1::BASIS_LIVE || compute.basis() == v1::BASIS_FLEET) && compute.has_value() &&
      compute.value() > 0) {
    live.compute = ComputeTime{Basis::kLive, compute.fixed_seconds(), 1.0 / compute.value(), compute.samples(),
                               compute.weight()};
  }
  for (const v1::CandidateAdvice& c : advice.candidates()) {
    for (size_t t = 1; t < kPlanTierCount; ++t) {
      if (static_cast<int>(c.tier()) == static_cast<int>(kPlanTiers[t]) && c.bandwidth().has_value()) {
        live.bandwidth[t] = c.bandwidth().value();
      }
    }
  }
  return live;
}

absl::Status CheckPositive(const std::optional<double>& value, const char* flag) {
  if (value && !(*value > 0 && std::isfinite(*value))) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " = ", *value, ": must be a positive number"));
  }
  return absl::OkStatus();
}

// What every capacity shares: block size, bandwidths and compute, flags before live rates.
absl::StatusOr<PlanConfig> BaseConfig(const PlanFlags& f, const LiveRates& live) {
  for (auto [flag, value] : {std::pair{"host-bandwidth", &f.host_bandwidth}, std::pair{"disk-bandwidth", &f.disk_bandwidth},
                             std::pair{"compute-flops-per-second", &f.flops_per_second},
                             std::pair{"speedup", &f.speedup}}) {
    if (absl::Status s = CheckPositive(*value, flag); !s.ok()) return s;
  }
  PlanConfig config;
  if (f.context_tokens) {
    if (absl::Status s = CheckContextTokens("--context-tokens", *f.context_tokens); !s.ok()) return s;
    config.context_tokens = f.context_tokens;
  }
  config.block_tokens = f.block_tokens.value_or(kDefaultTraceBlockTokens);
  auto order = ParseUseOrder("--use-order", f.use_order);
  if (!order.ok()) return order.status();
  config.use_order = *order;
  config.bandwidth = live.bandwidth;
  if (f.host_bandwidth) config.bandwidth[1] = f.host_bandwidth;
  if (f.disk_bandwidth) config.bandwidth[2] = f.disk_bandwidth;
  config.compute = live.compute;
  if (f.fixed_seconds && (!f.flops_per_second || *f.fixed_seconds < 0)) {
    return absl::InvalidArgumentError("--compute-fixed-seconds needs --compute-flops-per-second and must be >= 0");
  }
  if (f.flops_per_second) {
    config.compute = ComputeTime{Basis::kProfile, f.fixed_seconds.value_or(0), 1.0 / *f.flops_per_second};
  }
  return config;
}

absl::StatusOr<std::vector<PlanConfig>> Configs(const PlanFlags& f, const LiveRates& live) {
  auto base = BaseConfig(f, live);
  if (!base.ok()) return base.status();
  auto configs = CapacityConfigs(f.capacity, *base, kMaxCapacities, FlagName);
  if (configs.ok() && f.send && configs->size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("--send needs exactly one --capacity-tokens, not ", configs->size()));
  }
  return configs;
}

// Capacities that are legal but hardly what was meant (a tier smaller than one block, or less KV than
// a GiB — "40" meant as GiB): each noted once on stderr; the plan still runs.
void NoteCapacities(const std::vector<PlanConfig>& configs, const Profile& profile) {
  constexpr const char* kFlags[kPlanTierCount] = {"--capacity-tokens", "--host-capacity-tokens",
                                                  "--disk-capacity-tokens"};
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  const double per_token = static_cast<double>(BytesPerCachedToken(profile.shape()));
  std::set<std::pair<size_t, uint64_t>> noted;
  for (const PlanConfig& c : configs) {
    for (size_t t = 0; t < kPlanTierCount; ++t) {
      if (!c.HasTier(t) || !c.Finite(t) || !noted.insert({t, c.capacity_tokens[t]}).second) continue;
      const uint64_t tokens = c.capacity_tokens[t];
      if (tokens < c.block_tokens) {
        std::cerr << absl::StrFormat("kvledger plan: note: %s = %d: less than one block of %d tokens, so this tier "
                                     "holds nothing and nothing is reused from it\n",
                                     kFlags[t], tokens, c.block_tokens);
      } else if (static_cast<double>(tokens) * per_token < kGiB) {
        std::cerr << absl::StrFormat("kvledger plan: note: %s = %d tokens is %.1f MiB of %s's KV: capacities are in "
                                     "tokens (1 GiB holds %.0f tokens of this model)\n",
                                     kFlags[t], tokens, static_cast<double>(tokens) * per_token / (1024 * 1024),
                                     profile.name(), kGiB / per_token);
      }
    }
  }
}

// Reports each simulated request as a record through the Reporter, paced by --speedup.
class PlanSender {
 public:
  PlanSender(const PlanFlags& f, int64_t first_timestamp_ms, uint64_t block_tokens)
      : reporter_(Options(f.connection, f.cache_id)),
        speedup_(f.speedup),
        first_ms_(first_timestamp_ms),
        block_tokens_(static_cast<int64_t>(block_tokens)),
        cache_id_(f.cache_id) {}

  void Send(const TraceRequest& request, const RecordFacts& facts) {
    if (failed_) return;
    if (speedup_) {
      const double due = static_cast<double>(request.timestamp_ms - first_ms_) / 1000.0 / *speedup_;
      std::this_thread::sleep_until(start_ + std::chrono::duration<double>(due));
    }
    v1::Record record = FactsToProto(facts);
    record.set_request_id(absl::StrCat("trace-line-", request.line));
    // The trace's block ids: the server's capacity curves replay them (docs/cost-model.md §14).
    record.mutable_prefix_block_ids()->Add(request.hash_ids.begin(), request.hash_ids.end());
    record.set_block_tokens(block_tokens_);
    record.set_cache_id(cache_id_);
    reporter_.Report(record);
    // Backpressure instead of drops: the Reporter drops the newest record when its queue is full.
    if (reporter_.stats().queued >= kQueue / 2 && !reporter_.Flush(absl::Seconds(60))) failed_ = true;
  }

  // Sends what is left; the exit code, with one line of what was delivered.
  int Finish(const std::string& target) {
    const ReporterStats stats = reporter_.Shutdown(failed_ ? absl::Seconds(1) : absl::Seconds(60));
    std::cerr << absl::StrFormat("kvledger plan: sent %d records to %s: %d counted, %d rejected, %d not delivered\n",
                                 stats.reported, target, stats.sent, stats.rejected, stats.dropped);
    if (failed_ || stats.dropped > 0) {
      std::cerr << "kvledger plan: records were not delivered (is kvledger-server running at " << target << "?)\n";
      return kExitFailed;
    }
    return stats.rejected > 0 ? kExitBadInput : kExitOk;
  }

 private:
  static constexpr size_t kQueue = 8192;
  static ReporterOptions Options(const Connection& connection, const std::string& cache_id) {
    ReporterOptions o;
    o.target = connection.target;
    o.credentials = connection.Credentials();
    o.load_balancing_policy = connection.load_balancing_policy;
    o.affinity_key = cache_id;  // one cache's records on one replica, for the capacity curves
    o.max_queue_size = kQueue;
    o.flush_interval = absl::Milliseconds(100);
    o.shutdown_timeout = absl::Seconds(60);
    return o;
  }
  Reporter reporter_;
  const std::optional<double> speedup_;
  const int64_t first_ms_;
  const int64_t block_tokens_;
  const std::string cache_id_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  bool failed_ = false;
};

// The results of every capacity, in order; the records of the (single) run sent when --send.
absl::StatusOr<std::vector<PlanResult>> RunAll(const PlanFlags& f, const std::vector<TraceRequest>& trace,
                                               const Profile& profile, const std::vector<PlanConfig>& configs,
                                               int* send_exit) {
  std::optional<PlanSender> sender;
  if (f.send) sender.emplace(f, trace.front().timestamp_ms, configs.front().block_tokens);
  PlannedRecordVisitor each;
  if (sender) each = [&sender](const TraceRequest& r, const RecordFacts& facts) { sender->Send(r, facts); };
  if (!sender) return PlanAll(trace, profile, configs);
  const bool tty = isatty(STDERR_FILENO);
  std::vector<PlanResult> results;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (tty) std::cerr << absl::StrFormat("\rkvledger plan: capacity %d of %d", i + 1, configs.size());
    auto result = kvledger::Plan(trace, profile, configs[i], each);
    if (!result.ok()) return result.status();
    results.push_back(*std::move(result));
  }
  if (tty) std::cerr << "\r" << std::string(50, ' ') << "\r";
  if (sender) *send_exit = sender->Finish(f.connection.target);
  return results;
}

int Fail(const absl::Status& status) {
  std::cerr << "kvledger plan: " << status.message() << "\n";
  return absl::IsInvalidArgument(status) ? kExitBadInput : kExitFailed;
}

// Checks the flags and the profile, and asks the server for its rates when there is one.
absl::StatusOr<std::vector<PlanConfig>> Prepare(const PlanFlags& f, const ProfileCatalog& catalog) {
  if (catalog.Find(f.model) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("--model = ", f.model, ": no profile of that name"));
  }
  if (f.json && f.csv) return absl::InvalidArgumentError("--json and --csv: give one");
  if (f.csv && !f.tiers.empty()) return absl::InvalidArgumentError("--tier prints a table or --json, not --csv");
  if ((f.send || f.speedup) && f.connection.target.empty()) {
    return absl::InvalidArgumentError("--send and --speedup need --target HOST:PORT");
  }
  if (f.speedup && !f.send) return absl::InvalidArgumentError("--speedup paces --send: give --send too");
  LiveRates live;
  if (!f.connection.target.empty()) {
    auto asked = AskLiveRates(f.connection, f.model);
    if (!asked.ok()) return asked.status();
    live = *asked;
  }
  return Configs(f, live);
}

// --tier: each tier size below each finite device capacity, as the server's curves cost it; text
// after the plan's, or in its JSON as "second_tiers". Empty when --tier is not given.
absl::StatusOr<std::string> SecondTiers(const PlanFlags& f, const std::vector<TraceRequest>& trace,
                                        const Profile& profile, const std::vector<PlanConfig>& configs) {
  if (f.tiers.empty()) return std::string();
  auto tiers = ParseTierLadder(f.tiers, "--tier");
  if (!tiers.ok()) return tiers.status();
  std::vector<std::string> entries;
  std::ostringstream text;
  for (const PlanConfig& c : configs) {
    if (!c.Finite(0) || c.CapacityBlocks(0) == 0) continue;
    TierPlanInput input{c.block_tokens, c.capacity_tokens[0], *tiers, f.tier_inclusive, c.compute, c.context_tokens};
    if (!input.compute) input.compute = ProfileComputeTime(profile.prefill_flops_per_second());
    v1::ModelCapacityCurve curve;
    curve.set_model(profile.name());
    TiersToProto(PlanTiers(trace, profile, input), *tiers, &profile, curve);
    entries.push_back(absl::StrCat("{\"device_tokens\":", c.capacity_tokens[0],
                                   ",\"curve\":", ProtoToJson(curve, /*null_unset=*/true), "}"));
    text << "\nwith a device of " << c.capacity_tokens[0] << " tokens, ";
    PrintTierTable(text, curve, {});
  }
  if (entries.empty()) return absl::InvalidArgumentError("--tier needs a finite --capacity-tokens of at least one block");
  return f.json ? absl::StrCat("[", absl::StrJoin(entries, ","), "]") : text.str();
}

}  // namespace

int Plan(const Args& args) {
  PlanFlags f;
  FlagSet flags("plan",
                "Replay a prefix-reuse trace (Mooncake, Alibaba Bailian, LMCache lookup-hash log or WEKA\n"
                "conversation JSON lines)\n"
                "through block-level LRU cache tiers and report what each capacity buys: token hits, attention\n"
                "and prefill FLOPs avoided, KV bytes, reload and recompute seconds (docs/planning.md).\n"
                "usage: kvledger plan --model NAME [flags] [FILE|-]   (FILE default: standard input)");
  RegisterPlanFlags(flags, f);
  std::vector<std::string> files;
  if (int code = ParseOrExit(flags, args, "plan", &files); code >= 0) return code;
  if (files.size() > 1) return Fail(absl::InvalidArgumentError("give at most one trace FILE (or - for stdin)"));
  auto catalog = ProfileCatalog::LoadFile(f.profiles);
  if (!catalog.ok()) return Fail(catalog.status());
  auto configs = Prepare(f, *catalog);
  if (!configs.ok()) return Fail(configs.status());
  const std::string trace_path = files.empty() ? "-" : files[0];
  auto read = LoadTrace(trace_path, f);
  if (!read.ok()) return Fail(read.status());
  for (PlanConfig& config : *configs) config.block_tokens = read->block_tokens;  // the trace's blocks
  const std::vector<TraceRequest>* trace = &read->requests;
  const Profile& profile = *catalog->Find(f.model);
  NoteCapacities(*configs, profile);
  int send_exit = kExitOk;
  auto results = RunAll(f, *trace, profile, *configs, &send_exit);
  if (!results.ok()) return Fail(results.status());
  if (const BeyondContext& b = results->front().beyond_context; b.requests > 0) {
    std::cerr << absl::StrFormat("kvledger plan: note: %d requests have a prompt beyond the context of %d tokens "
                                 "(the first at line %d) and are not planned\n",
                                 b.requests, *results->front().context_tokens, b.first_line);
  }
  auto tiers = SecondTiers(f, *trace, profile, *configs);
  if (!tiers.ok()) return Fail(tiers.status());
  if (f.json) {
    std::cout << PlanRunToJson(profile, configs->front().block_tokens, *results, *tiers) << "\n";
  } else if (f.csv) {
    PrintPlanCsv(std::cout, *results);
  } else {
    PrintPlanText(std::cout, profile, *trace, *results);
    std::cout << *tiers;
  }
  if (!f.plot.empty()) {
    auto wrote = WritePlanPlot(f.plot, profile, *results, trace_path == "-" ? "standard input" : trace_path);
    if (!wrote.ok()) return Fail(wrote.status());
    std::cerr << "kvledger plan: " << *wrote << "\n";
  }
  return send_exit;
}

}  // namespace kvledger::cli
