#include "server/server_main.h"

#include <malloc.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "lib/base/mutex.h"
#include "absl/time/clock.h"
#include "google/protobuf/stubs/logging.h"
#include "server/kvledger_server.h"
#include "server/listener_watchdog.h"
#include "server/server_metrics.h"
#include "lib/base/quote.h"

// Every default is ServerOptions' own (server/server_options.h): one place.
static const kvledger::ServerOptions kDefaults;

ABSL_FLAG(std::string, grpc_address, kDefaults.grpc_address, "gRPC listen address HOST:PORT (port 0 = any free port)");
ABSL_FLAG(std::string, metrics_address, kDefaults.metrics_address,
          "Prometheus /metrics listen address HOST:PORT (port 0 = any free port)");
ABSL_FLAG(std::string, profiles, "", "Profile file (text proto or .json ProfileCatalog) adding or overriding built-in profiles");
ABSL_FLAG(std::string, trace_file, "",
          "A prefix-reuse trace (Mooncake, Bailian, LMCache lookup-hash log or WEKA conversation lines) to plan "
          "cache capacity from: "
          "/api/v1/plan and /explore");
ABSL_FLAG(std::string, trace_format, kvledger::ServerOptions().trace_format,
          "auto | mooncake | bailian | lmcache-lookups | weka-conversations: the format of --trace_file (auto: told "
          "from its first line)");
ABSL_FLAG(uint32_t, trace_block_tokens, kvledger::ServerOptions().trace_block_tokens,
          "Tokens per block of --trace_file's ids (0: the format's own, Mooncake and WEKA 512, Bailian 16, "
          "LMCache chunk_size)");
ABSL_FLAG(std::string, declare_series, "",
          "PROFILE[:TIER],...: series exported at 0 before their first record (PROFILE alone: tiers none and device)");
ABSL_FLAG(std::string, unknown_model, kvledger::UnknownModelPolicyName(kDefaults.unknown_model), "reject | generic: what to do with a model that has no profile");
ABSL_FLAG(std::string, tls_cert_file, "", "PEM certificate chain for gRPC TLS");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key for gRPC TLS");
ABSL_FLAG(std::string, tls_client_ca_file, "", "PEM CA bundle: require and verify client certificates (mTLS)");
ABSL_FLAG(std::string, fleet_prometheus_url, "",
          "http://HOST[:PORT][/PATH] of a Prometheus evaluating the kvledger.fleet rules: Advise answers from the "
          "fleet's live rates (empty: this replica's own)");
ABSL_FLAG(std::string, fleet_job, kDefaults.fleet_job, "The job label of this fleet's series in --fleet_prometheus_url");
ABSL_FLAG(bool, live_compute_model, kDefaults.live_compute_model,
          "Learn each model's prefill compute-time model (a fixed cost per pass + a rate) from the records; false: "
          "recompute estimates come from the profiles' prefill_flops_per_second only");
ABSL_FLAG(std::string, capacity_ladder, kDefaults.capacity_ladder,
          "Capacity curves: the cache capacities in tokens at which records with prefix_block_ids are replayed, a "
          "list 1e6,4e6 or FROM:TO:POINTS, at most 16 (the unlimited capacity is always added); empty: no curves");
ABSL_FLAG(std::string, capacity_use_order, kDefaults.capacity_use_order,
          "Capacity curves: the order a request's blocks are used in after their lookup: tail-first, as vLLM and "
          "SGLang release them, or prompt, as simple LRU simulators replay a trace (kvledger plan --use-order)");
ABSL_FLAG(std::string, capacity_tiers, kDefaults.capacity_tiers,
          "Second-tier what-if: tier sizes costed below each cache's device, KIND:SIZE[:BYTES_PER_SECOND"
          "[:WAIT_SECONDS]],... with KIND host, disk or remote and SIZE in bytes (1TiB, 512GB); the bandwidth is "
          "the measured one where records reload from that tier; empty: none");
ABSL_FLAG(bool, capacity_tiers_inclusive, kDefaults.capacity_tiers_inclusive,
          "Second-tier what-if: the tiers hold copies of the device's blocks, written as they are computed (vLLM's "
          "OffloadingConnector, SGLang HiCache write_through), rather than what the device evicts");
ABSL_FLAG(std::string, web_config_file, "",
          "The HTTP port's TLS and basic auth, in the Prometheus exporter-toolkit web config format "
          "(tls_server_config, basic_auth_users with bcrypt hashes)");
ABSL_FLAG(std::string, metrics_auth_user, "", "HTTP basic auth user for /metrics (older; see --web_config_file)");
ABSL_FLAG(std::string, metrics_auth_password_file, "", "File whose first line is the /metrics basic auth password");
// The bounds: each flag from its one declaration (server/http/limits.h, server/server_options.h).
// Each is read as an int64_t and checked against its range before it takes its own type, so a
// negative or too large value gets the same message (and exit status 2) as any other out of range.
#define KVLEDGER_HTTP_FLAG(name, type, default_value, min, max, meaning) \
  ABSL_FLAG(int64_t, http_##name, static_cast<int64_t>(kDefaults.http.name), meaning);
KVLEDGER_HTTP_BOUNDS(KVLEDGER_HTTP_FLAG)
#undef KVLEDGER_HTTP_FLAG
#define KVLEDGER_SERVER_FLAG(name, type, default_value, min, max, meaning) \
  ABSL_FLAG(int64_t, name, static_cast<int64_t>(kDefaults.name), meaning);
KVLEDGER_SERVER_BOUNDS(KVLEDGER_SERVER_FLAG)
#undef KVLEDGER_SERVER_FLAG
ABSL_FLAG(bool, print_bounds, false, "Print every bound (flag, default, range, meaning) as a Markdown table and exit");

namespace kvledger {
namespace {

// Protobuf logs one line for every message it cannot parse (e.g. invalid UTF-8 in a string field), so
// a hostile client could fill the disk: at most kProtobufLinesPerMinute such lines a minute, then one
// line saying how many were left out.
constexpr int kProtobufLinesPerMinute = 5;

void RateLimitedProtobufLog(google::protobuf::LogLevel level, const char* filename, int line,
                            const std::string& message) {
  static Mutex mu;
  static absl::Time window_start = absl::InfinitePast();
  static int in_window = 0;
  static uint64_t left_out = 0;
  MutexLock lock(&mu);
  const absl::Time now = absl::Now();
  if (now - window_start >= absl::Minutes(1)) {
    if (left_out > 0) std::cerr << "protobuf: " << left_out << " more such lines left out in the last minute\n";
    window_start = now;
    in_window = 0;
    left_out = 0;
  }
  if (level < google::protobuf::LOGLEVEL_FATAL && ++in_window > kProtobufLinesPerMinute) {
    if (in_window == kProtobufLinesPerMinute + 1) {
      std::cerr << "protobuf: further lines this minute are left out and counted\n";
    }
    ++left_out;
    return;
  }
  std::cerr << "protobuf " << filename << ":" << line << ": " << message << std::endl;
}

bool IsHelpFlag(absl::string_view arg) {
  return arg == "--help" || arg == "-help" || arg == "-h" || arg == "--helpfull" || arg == "--helpshort";
}

// --help: the flags this file defines, sorted, with their defaults. (absl's own help groups flags
// under the path of the source file that defined them, which means nothing to a user.)
void PrintHelp(const char* program, const char* summary) {
  std::cout << "usage: " << program << " [flags]\n" << summary << "\n\nflags:\n";
  std::map<std::string, const absl::CommandLineFlag*> own;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::StrContains(flag->Filename(), "server_main")) own.emplace(std::string(name), flag);
  }
  for (const auto& [name, flag] : own) {
    std::cout << "  --" << name << " (" << flag->Help() << ")\n      default: "
              << (flag->DefaultValue().empty() ? "\"\"" : flag->DefaultValue()) << "\n";
  }
}

}  // namespace

namespace {

// The first argument naming no flag of this program ("--nope", "--max_batch_record=5"), checked
// before absl parses them, so a typo is a bad flag (exit 2) like any other.
std::optional<std::string> UnknownFlag(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (!absl::ConsumePrefix(&arg, "--") && !absl::ConsumePrefix(&arg, "-")) continue;
    const absl::string_view name = arg.substr(0, arg.find('='));
    if (absl::FindCommandLineFlag(name) != nullptr) continue;
    if (absl::StartsWith(name, "no") && absl::FindCommandLineFlag(name.substr(2)) != nullptr) continue;
    return std::string(name);
  }
  return std::nullopt;
}

// The flags as ServerOptions, validated: INVALID_ARGUMENT naming the flag.
// The bounds' flags into `options`, each checked against its range first.
absl::Status BoundsFromFlags(ServerOptions& options) {
#define KVLEDGER_HTTP_COPY(name, type, default_value, min, max, meaning)               \
  if (const int64_t v = absl::GetFlag(FLAGS_http_##name); !InBound(v, min, max)) {       \
    return BoundError("http_" #name, absl::StrCat(v), min, max);                         \
  } else {                                                                                \
    options.http.name = static_cast<type>(v);                                             \
  }
  KVLEDGER_HTTP_BOUNDS(KVLEDGER_HTTP_COPY)
#undef KVLEDGER_HTTP_COPY
#define KVLEDGER_SERVER_COPY(name, type, default_value, min, max, meaning) \
  if (const int64_t v = absl::GetFlag(FLAGS_##name); !InBound(v, min, max)) { \
    return BoundError(#name, absl::StrCat(v), min, max);                      \
  } else {                                                                     \
    options.name = static_cast<type>(v);                                       \
  }
  KVLEDGER_SERVER_BOUNDS(KVLEDGER_SERVER_COPY)
#undef KVLEDGER_SERVER_COPY
  return absl::OkStatus();
}

absl::StatusOr<ServerOptions> OptionsFromFlags() {
  ServerOptions options;
  options.grpc_address = absl::GetFlag(FLAGS_grpc_address);
  options.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  options.profiles_file = absl::GetFlag(FLAGS_profiles);
  options.trace_file = absl::GetFlag(FLAGS_trace_file);
  options.trace_format = absl::GetFlag(FLAGS_trace_format);
  options.trace_block_tokens = absl::GetFlag(FLAGS_trace_block_tokens);
  options.declare_series = absl::GetFlag(FLAGS_declare_series);
  const std::string unknown = absl::GetFlag(FLAGS_unknown_model);
  const std::optional<UnknownModelPolicy> policy = UnknownModelPolicyFromName(unknown);
  if (!policy) {
    return absl::InvalidArgumentError(
        absl::StrCat("--unknown_model = ", Quoted(unknown), ": must be ", kUnknownModelPolicyNames));
  }
  options.unknown_model = *policy;
  options.tls_cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  options.tls_key_file = absl::GetFlag(FLAGS_tls_key_file);
  options.tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  options.metrics_auth_user = absl::GetFlag(FLAGS_metrics_auth_user);
  options.web_config_file = absl::GetFlag(FLAGS_web_config_file);
  options.metrics_auth_password_file = absl::GetFlag(FLAGS_metrics_auth_password_file);
  options.live_compute_model = absl::GetFlag(FLAGS_live_compute_model);
  options.fleet_prometheus_url = absl::GetFlag(FLAGS_fleet_prometheus_url);
  options.fleet_job = absl::GetFlag(FLAGS_fleet_job);
  options.capacity_ladder = absl::GetFlag(FLAGS_capacity_ladder);
  options.capacity_use_order = absl::GetFlag(FLAGS_capacity_use_order);
  options.capacity_tiers = absl::GetFlag(FLAGS_capacity_tiers);
  options.capacity_tiers_inclusive = absl::GetFlag(FLAGS_capacity_tiers_inclusive);
  if (auto s = BoundsFromFlags(options); !s.ok()) return s;
  if (auto s = options.Validate(); !s.ok()) return s;
  return options;
}

// With --deaf_listener_seconds > 0: a watchdog that ends the process with status 3 when the gRPC
// listener goes deaf (docs/security.md); null when it is off or cannot run (said on stderr).
std::unique_ptr<ListenerWatchdog> WatchListener(const char* program, KvledgerServer& server,
                                                uint32_t deaf_seconds) {
  if (deaf_seconds == 0) return nullptr;
  const std::string& address = server.grpc_address();
  uint32_t port = 0;
  if (!absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port)) port = 0;
  auto started = ListenerWatchdog::Start(
      static_cast<uint16_t>(port), absl::Seconds(deaf_seconds),
      [program](const std::string& why) {
        std::cerr << program << ": " << why << "; exiting (status 3) to be restarted" << std::endl;
        std::_Exit(kExitDeafListener);
      },
      absl::Seconds(1), [metrics = &server.metrics()](int64_t queued) { metrics->WatchdogChecked(queued); });
  if (!started.ok()) {
    std::cerr << program << ": " << started.status().message() << "; the listener is not watched" << std::endl;
    return nullptr;
  }
  return *std::move(started);
}

// Waits for SIGINT or SIGTERM (blocked in every thread), giving freed heap back to the system every
// 10 s meanwhile: after a burst (many connections, a client that stopped reading) glibc would
// otherwise keep the peak resident. Returns the signal.
int WaitForStop(const sigset_t& stop_signals) {
  int signal = -1;
  const timespec trim_period{10, 0};
  while (signal < 0) {
    signal = sigtimedwait(&stop_signals, nullptr, &trim_period);
    if (signal < 0) malloc_trim(0);
  }
  return signal;
}

}  // namespace

int ServerMain(int argc, char** argv, const char* program, const char* summary, std::unique_ptr<RecordSink> sink) {
  for (int i = 1; i < argc; ++i) {
    if (IsHelpFlag(argv[i])) {
      PrintHelp(program, summary);
      return kExitOk;
    }
    if (absl::string_view(argv[i]) == "--") break;
  }
  if (const auto unknown = UnknownFlag(argc, argv)) {
    std::cerr << program << ": --" << *unknown << ": no such flag (see --help)\n";
    return kExitBadInput;
  }
  absl::SetProgramUsageMessage(summary);
  const auto positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    std::cerr << program << ": unexpected argument '" << positional[1] << "' (see --help)\n";
    return kExitBadInput;
  }
  if (absl::GetFlag(FLAGS_print_bounds)) {
    std::cout << BoundsMarkdown();
    return 0;
  }
  const absl::StatusOr<ServerOptions> options = OptionsFromFlags();
  if (!options.ok()) {
    std::cerr << program << ": " << options.status().message() << "\n";
    return kExitBadInput;
  }
  google::protobuf::SetLogHandler(&RateLimitedProtobufLog);
  // A client that closes mid-answer must never end the process: writes to its socket fail with
  // EPIPE instead (OpenSSL and gRPC write with write()).
  std::signal(SIGPIPE, SIG_IGN);
  // Block the stop signals in every thread (gRPC's included); this thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // Descriptors are connections: use every one the hard limit allows.
  const auto descriptor_limit = RaiseDescriptorLimit();
  if (!descriptor_limit.ok()) std::cerr << program << ": " << descriptor_limit.status().message() << std::endl;
  ConfigureGrpcProcess();
  auto server = KvledgerServer::Start(*options, std::move(sink));
  if (!server.ok()) {
    std::cerr << program << ": " << server.status().message() << "\n";
    // A flag's file that is unusable is a bad flag; an address that cannot be bound is not.
    return server.status().code() == absl::StatusCode::kInvalidArgument ? kExitBadInput : kExitFailed;
  }
  // The watchdog finds its listener before the line below says the server listens: a client that
  // waits for the line and then exhausts the descriptors finds it armed.
  const std::unique_ptr<ListenerWatchdog> watchdog = WatchListener(program, **server, options->deaf_listener_seconds);
  std::cerr << program << " " << kVersion << " listening: grpc=" << (*server)->grpc_address()
            << " metrics=" << (*server)->metrics_url() << " profiles="
            << (*server)->profile_count()
            << " open_files_limit=" << (descriptor_limit.ok() ? absl::StrCat(*descriptor_limit) : "unknown")
            << std::endl;
  const int signal = WaitForStop(stop_signals);
  if (signal == SIGTERM) {
    std::cerr << program << ": SIGTERM: still serving for " << options->shutdown_drain_seconds
              << " s (--shutdown_drain_seconds) while balancers move traffic away, then /metrics stays up until "
              << "each scraper has read it once more, at most " << options->shutdown_scrape_grace_seconds
              << " s (--shutdown_scrape_grace_seconds); Ctrl-C stops at once" << std::endl;
  } else {
    std::cerr << program << ": signal " << signal << ", stopping now" << std::endl;
  }
  (*server)->Shutdown(/*patient=*/signal == SIGTERM);  // Ctrl-C at a terminal stops at once
  std::cerr << program << ": stopped" << std::endl;
  return kExitOk;
}

}  // namespace kvledger
