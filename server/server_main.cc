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
ABSL_FLAG(uint32_t, max_models, kDefaults.max_models, "Distinct model label values before further models fold into model=\"other\"");
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
ABSL_FLAG(uint32_t, batch_dedup_entries, kDefaults.batch_dedup_entries,
          "RecordBatch batch ids remembered to answer retries without counting twice (0 = off)");
ABSL_FLAG(uint32_t, batch_dedup_bytes, kDefaults.batch_dedup_bytes,
          "Bytes the remembered RecordBatch outcomes may hold; the oldest are forgotten first");
ABSL_FLAG(uint32_t, batch_dedup_seconds, kDefaults.batch_dedup_seconds, "How long a RecordBatch batch id is remembered, seconds");
ABSL_FLAG(uint32_t, max_batch_records, kDefaults.max_batch_records, "Records in one RecordBatch or stream batch; a larger batch is refused whole");
ABSL_FLAG(uint32_t, max_listed_rejections, kDefaults.max_listed_rejections, "Rejection details listed in one reply (the counts stay exact)");
ABSL_FLAG(uint32_t, max_receive_message_bytes, kDefaults.max_receive_message_bytes, "Largest gRPC message accepted, bytes");
ABSL_FLAG(uint32_t, max_concurrent_streams, kDefaults.max_concurrent_streams, "Concurrent calls per gRPC connection");
ABSL_FLAG(uint32_t, max_connection_idle_seconds, kDefaults.max_connection_idle_seconds, "A connection without calls for this long is closed");
ABSL_FLAG(uint32_t, max_connection_age_seconds, kDefaults.max_connection_age_seconds, "A connection is closed gracefully after this long (clients reconnect and rebalance)");
ABSL_FLAG(uint32_t, keepalive_min_ping_seconds, kDefaults.keepalive_min_ping_seconds, "Least interval between client keepalive pings; more often closes the connection");
ABSL_FLAG(uint32_t, stream_idle_seconds, kDefaults.stream_idle_seconds, "A stream that sends no batch for this long ends with its summary (0 = never)");
ABSL_FLAG(std::string, fleet_prometheus_url, "",
          "http://HOST[:PORT][/PATH] of a Prometheus evaluating the kvledger.fleet rules: Advise answers from the "
          "fleet's live rates (empty: this replica's own)");
ABSL_FLAG(std::string, fleet_job, kDefaults.fleet_job, "The job label of this fleet's series in --fleet_prometheus_url");
ABSL_FLAG(uint32_t, fleet_refresh_seconds, kDefaults.fleet_refresh_seconds,
          "Seconds between reads of --fleet_prometheus_url");
ABSL_FLAG(bool, live_compute_model, kDefaults.live_compute_model,
          "Learn each model's prefill compute-time model (a fixed cost per pass + a rate) from the records; false: "
          "recompute estimates come from the profiles' prefill_flops_per_second only");
ABSL_FLAG(uint32_t, advice_half_life_seconds, kDefaults.advice_half_life_seconds,
          "Half-life of the live reload-bandwidth and prefill-compute rates Advise uses, seconds");
ABSL_FLAG(uint64_t, grpc_memory_quota_bytes, kDefaults.grpc_memory_quota_bytes, "Memory gRPC may use for connection and call buffers, bytes");
ABSL_FLAG(uint32_t, shutdown_drain_seconds, kDefaults.shutdown_drain_seconds,
          "On SIGTERM: seconds gRPC health reports NOT_SERVING while calls are still served");
ABSL_FLAG(uint32_t, shutdown_scrape_grace_seconds, kDefaults.shutdown_scrape_grace_seconds,
          "On SIGTERM: seconds /metrics stays up after the last call, for a final scrape");
ABSL_FLAG(uint32_t, ready_after_scrape_seconds, kDefaults.ready_after_scrape_seconds,
          "At start: gRPC health reports kvledger.v1.Ledger NOT_SERVING until /metrics has been scraped once, "
          "at most this many seconds, so a readiness probe keeps traffic away until Prometheus has the "
          "replica's series at 0 (0 = serving at once)");
ABSL_FLAG(uint32_t, deaf_listener_seconds, kDefaults.deaf_listener_seconds,
          "Exit with status 3 when connections wait this long in the gRPC listener's accept queue unaccepted "
          "(the listener went deaf, e.g. after running out of file descriptors), so a supervisor restarts "
          "the process (0 = never)");
ABSL_FLAG(std::string, capacity_ladder, kDefaults.capacity_ladder,
          "Capacity curves: the cache capacities in tokens at which records with prefix_block_ids are replayed, a "
          "list 1e6,4e6 or FROM:TO:POINTS, at most 16 (the unlimited capacity is always added); empty: no curves");
ABSL_FLAG(uint32_t, capacity_caches, kDefaults.capacity_caches,
          "Capacity curves: the (model, cache_id) pairs replayed; records of further caches are counted as untracked");
ABSL_FLAG(uint32_t, capacity_tracked_blocks, kDefaults.capacity_tracked_blocks,
          "Capacity curves: the blocks each cache's LRU stack tracks exactly (46 bytes each); past it the "
          "least recently used is forgotten");
ABSL_FLAG(std::string, web_config_file, "",
          "The HTTP port's TLS and basic auth, in the Prometheus exporter-toolkit web config format "
          "(tls_server_config, basic_auth_users with bcrypt hashes)");
ABSL_FLAG(std::string, metrics_auth_user, "", "HTTP basic auth user for /metrics (older; see --web_config_file)");
ABSL_FLAG(uint32_t, http_workers, kDefaults.http_workers, "HTTP answers written at once");
ABSL_FLAG(uint32_t, http_served_per_client, kDefaults.http_served_per_client,
          "HTTP answers in service at once for one client address");
ABSL_FLAG(uint32_t, http_connections_per_client, kDefaults.http_connections_per_client,
          "Open HTTP connections of one client address; more get 503");
ABSL_FLAG(uint32_t, http_connections, kDefaults.http_connections,
          "Open HTTP connections in all (at most a quarter of the descriptors); when full an idle one makes room");
ABSL_FLAG(uint32_t, http_max_in_flight, kDefaults.http_max_in_flight,
          "HTTP requests in service or waiting for a worker; more get 503 at once");
ABSL_FLAG(uint32_t, http_in_flight_per_client, kDefaults.http_in_flight_per_client,
          "HTTP requests of one client address in service or waiting; more get 503 (an address with none is always "
          "admitted)");
ABSL_FLAG(uint32_t, http_head_bytes, kDefaults.http_head_bytes, "Largest HTTP request line and headers; more get 431");
ABSL_FLAG(uint32_t, http_head_seconds, kDefaults.http_head_seconds,
          "Seconds from an HTTP request's first byte to its empty line");
ABSL_FLAG(uint32_t, http_idle_seconds, kDefaults.http_idle_seconds, "Seconds a kept-alive HTTP connection may idle");
ABSL_FLAG(uint32_t, http_answer_seconds, kDefaults.http_answer_seconds,
          "Seconds a client has to read a whole HTTP answer before it is cut");
ABSL_FLAG(uint64_t, http_parked_bytes, kDefaults.http_parked_bytes,
          "Bytes of HTTP answers held for clients too slow to take them from a worker (they read them from memory)");
ABSL_FLAG(std::string, metrics_auth_password_file, "", "File whose first line is the /metrics basic auth password");

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
absl::StatusOr<ServerOptions> OptionsFromFlags() {
  ServerOptions options;
  options.grpc_address = absl::GetFlag(FLAGS_grpc_address);
  options.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  options.profiles_file = absl::GetFlag(FLAGS_profiles);
  options.max_models = absl::GetFlag(FLAGS_max_models);
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
  options.http_workers = absl::GetFlag(FLAGS_http_workers);
  options.http_served_per_client = absl::GetFlag(FLAGS_http_served_per_client);
  options.http_connections_per_client = absl::GetFlag(FLAGS_http_connections_per_client);
  options.http_connections = absl::GetFlag(FLAGS_http_connections);
  options.http_max_in_flight = absl::GetFlag(FLAGS_http_max_in_flight);
  options.http_in_flight_per_client = absl::GetFlag(FLAGS_http_in_flight_per_client);
  options.http_head_bytes = absl::GetFlag(FLAGS_http_head_bytes);
  options.http_head_seconds = absl::GetFlag(FLAGS_http_head_seconds);
  options.http_idle_seconds = absl::GetFlag(FLAGS_http_idle_seconds);
  options.http_answer_seconds = absl::GetFlag(FLAGS_http_answer_seconds);
  options.http_parked_bytes = absl::GetFlag(FLAGS_http_parked_bytes);
  options.metrics_auth_password_file = absl::GetFlag(FLAGS_metrics_auth_password_file);
  options.max_batch_records = absl::GetFlag(FLAGS_max_batch_records);
  options.max_listed_rejections = absl::GetFlag(FLAGS_max_listed_rejections);
  options.max_receive_message_bytes = absl::GetFlag(FLAGS_max_receive_message_bytes);
  options.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  options.max_connection_idle_seconds = absl::GetFlag(FLAGS_max_connection_idle_seconds);
  options.max_connection_age_seconds = absl::GetFlag(FLAGS_max_connection_age_seconds);
  options.keepalive_min_ping_seconds = absl::GetFlag(FLAGS_keepalive_min_ping_seconds);
  options.grpc_memory_quota_bytes = absl::GetFlag(FLAGS_grpc_memory_quota_bytes);
  options.stream_idle_seconds = absl::GetFlag(FLAGS_stream_idle_seconds);
  options.advice_half_life_seconds = absl::GetFlag(FLAGS_advice_half_life_seconds);
  options.live_compute_model = absl::GetFlag(FLAGS_live_compute_model);
  options.fleet_prometheus_url = absl::GetFlag(FLAGS_fleet_prometheus_url);
  options.fleet_job = absl::GetFlag(FLAGS_fleet_job);
  options.fleet_refresh_seconds = absl::GetFlag(FLAGS_fleet_refresh_seconds);
  options.shutdown_drain_seconds = absl::GetFlag(FLAGS_shutdown_drain_seconds);
  options.deaf_listener_seconds = absl::GetFlag(FLAGS_deaf_listener_seconds);
  options.ready_after_scrape_seconds = absl::GetFlag(FLAGS_ready_after_scrape_seconds);
  options.capacity_ladder = absl::GetFlag(FLAGS_capacity_ladder);
  options.capacity_caches = absl::GetFlag(FLAGS_capacity_caches);
  options.capacity_tracked_blocks = absl::GetFlag(FLAGS_capacity_tracked_blocks);
  options.shutdown_scrape_grace_seconds = absl::GetFlag(FLAGS_shutdown_scrape_grace_seconds);
  options.batch_dedup_entries = absl::GetFlag(FLAGS_batch_dedup_entries);
  options.batch_dedup_bytes = absl::GetFlag(FLAGS_batch_dedup_bytes);
  options.batch_dedup_seconds = absl::GetFlag(FLAGS_batch_dedup_seconds);
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
