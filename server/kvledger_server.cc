#include "server/kvledger_server.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "lib/accounting/aggregator.h"
#include "lib/accounting/ledger.h"
#include "lib/base/quote.h"
#include "lib/profiles/model_registry.h"
#include "lib/profiles/profile_catalog.h"
#include "lib/advice/advisor.h"
#include "server/fleet_poller.h"
#include "server/http_api.h"
#include "server/http/listener.h"
#include "server/ledger_service.h"
#include "server/scrape_witness.h"
#include "server/metrics_exposition.h"
#include "server/server_metrics.h"

namespace kvledger {
namespace {

constexpr std::chrono::seconds kShutdownGrace{5};
constexpr absl::Duration kRefusalWindow = absl::Seconds(1);
constexpr absl::Duration kScrapeCheckEvery = absl::Milliseconds(20);
// The gRPC health service name of the ledger: what a readiness probe asks about ("" stays SERVING
// from start to SIGTERM, for liveness).
constexpr char kLedgerService[] = "kvledger.v1.Ledger";

absl::StatusOr<std::string> ReadFile(const char* flag, const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--", flag, " = \"", path, "\": cannot be read"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string HostOf(const std::string& address) { return address.substr(0, address.rfind(':')); }

// Reads a PEM file that must hold `marker` (e.g. a certificate), so that a wrong or swapped file is
// named at start-up instead of surfacing as a listener that cannot start.
absl::StatusOr<std::string> ReadPem(const char* flag, const std::string& path, absl::string_view marker,
                                    absl::string_view what) {
  auto text = ReadFile(flag, path);
  if (!text.ok()) return text.status();
  if (!absl::StrContains(*text, marker)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " = \"", path, "\": holds no PEM ", what, " (no \"", marker, "\" line)"));
  }
  return text;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(const ServerOptions& o) {
  if (o.tls_cert_file.empty()) return grpc::InsecureServerCredentials();
  auto cert = ReadPem("tls_cert_file", o.tls_cert_file, "-----BEGIN CERTIFICATE-----", "certificate");
  if (!cert.ok()) return cert.status();
  auto key = ReadPem("tls_key_file", o.tls_key_file, "PRIVATE KEY-----", "private key");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!o.tls_client_ca_file.empty()) {
    auto ca = ReadPem("tls_client_ca_file", o.tls_client_ca_file, "-----BEGIN CERTIFICATE-----", "CA certificate");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

struct KvledgerServer::State {
  ProfileCatalog catalog;
  std::unique_ptr<ModelRegistry> registry;
  std::unique_ptr<Aggregator> aggregator;
  std::unique_ptr<LiveRates> rates;
  std::unique_ptr<CapacityCurves> curves;  // null without a ladder
  std::unique_ptr<Ledger> ledger;
  // Load generators' records (the kvledger-synthetic call marker) take the whole record path into an
  // aggregator nothing exports: no family, live rate or label slot moves.
  std::unique_ptr<Aggregator> synthetic_aggregator;
  std::unique_ptr<Ledger> synthetic_ledger;
  std::unique_ptr<EngineStats> engine_stats;
  std::unique_ptr<ServerMetrics> metrics;  // null with a custom sink (the no-op server discards them too)
  std::unique_ptr<RecordSink> sink;  // when not the ledger
  std::unique_ptr<LedgerService> service;
  std::unique_ptr<grpc::Server> grpc_server;
  std::unique_ptr<MetricsExposition> exposition;
  ScrapeWitness scrapes;  // who read /metrics when: readiness at start, the SIGTERM sequence's last wait
  // --ready_after_scrape_seconds: marks the service SERVING after the first scrape.
  std::thread readiness;
  absl::Notification stop_readiness;
  std::unique_ptr<PlanningTrace> trace;  // --trace_file, for /api/v1/plan
  std::unique_ptr<HttpListener> http;
  // --fleet_prometheus_url; last, so the poller stops before what it writes to goes.
  std::unique_ptr<FleetRates> fleet;
  std::unique_ptr<FleetPoller> fleet_poller;
  ServerOptions options;
  bool stopped = false;
};

KvledgerServer::KvledgerServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

KvledgerServer::~KvledgerServer() { Shutdown(); }

size_t KvledgerServer::profile_count() const { return state_->catalog.Names().size(); }

ServerMetrics& KvledgerServer::metrics() { return *state_->metrics; }

uint64_t KvledgerServer::accepted_records() const {
  uint64_t total = 0;
  for (const auto& cell : state_->aggregator->Snapshot().cells) total += cell.totals.requests();
  return total;
}

void ConfigureGrpcProcess() {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
}

namespace {

// The gRPC server of `state`'s service with the options' bounds; its bound port in `port`.
absl::StatusOr<std::unique_ptr<grpc::Server>> BuildGrpcServer(const ServerOptions& options, LedgerService& service,
                                                              ServerMetrics& metrics, int* port) {
  auto credentials = Credentials(options);
  if (!credentials.ok()) return credentials.status();
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // never share a port silently
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_receive_message_bytes));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, static_cast<int>(options.max_concurrent_streams));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             static_cast<int>(options.max_connection_idle_seconds * 1000));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                             static_cast<int>(options.max_connection_age_seconds * 1000));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, 30000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             static_cast<int>(options.keepalive_min_ping_seconds * 1000));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  // Keepalive pings on an idle connection are allowed at that interval too (reporters ping theirs to
  // see a vanished replica), rather than only while calls are open.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  grpc::ResourceQuota quota("kvledger");
  quota.Resize(static_cast<size_t>(options.grpc_memory_quota_bytes));
  builder.SetResourceQuota(quota);
  // gRPC says only "cannot listen" (and logs a dump); a bind of our own names the reason first.
  if (!absl::EndsWith(options.grpc_address, ":0")) {
    if (absl::Status probe = ProbeListen(options.grpc_address); !probe.ok()) {
      return absl::UnavailableError(absl::StrCat("--grpc_address = \"", options.grpc_address,
                                                 "\": cannot listen (is the port in use?): ", probe.message()));
    }
  }
  builder.AddListeningPort(options.grpc_address, *credentials, port);
  builder.RegisterService(&service);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(metrics.NewInterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server && *port != 0) return server;
  if (!options.tls_cert_file.empty()) {
    return absl::UnavailableError(absl::StrCat(
        "--grpc_address = \"", options.grpc_address, "\": cannot listen, or gRPC refused the TLS certificate and "
        "key (--tls_cert_file = \"", options.tls_cert_file, "\", --tls_key_file = \"", options.tls_key_file,
        "\"): check that the key matches the certificate; gRPC's own reason is logged above"));
  }
  return absl::UnavailableError(absl::StrCat("--grpc_address = \"", options.grpc_address, "\": cannot listen"));
}

// The HTTP port's TLS and basic auth: --web_config_file, and the older --metrics_auth_user with the
// first line of --metrics_auth_password_file.
absl::StatusOr<HttpSecurity> MetricsSecurity(const ServerOptions& options) {
  HttpSecurity security;
  WebConfig web;
  if (!options.web_config_file.empty()) {
    auto loaded = LoadWebConfig(options.web_config_file);
    if (!loaded.ok()) return loaded.status();
    web = *std::move(loaded);
  }
  if (web.tls) {
    auto tls = TlsContext::Make(*web.tls);
    if (!tls.ok()) return absl::InvalidArgumentError(absl::StrCat("--web_config_file: ", tls.status().message()));
    security.tls = *std::move(tls);
  }
  if (!web.basic_auth_users.empty()) {
    if (!options.metrics_auth_user.empty()) {
      return absl::InvalidArgumentError(
          "--metrics_auth_user and basic_auth_users in --web_config_file: give one of them");
    }
    security.auth = BasicAuthenticator::FromHashes(web.basic_auth_users);
  }
  if (options.metrics_auth_user.empty()) return security;
  auto password = ReadFile("metrics_auth_password_file", options.metrics_auth_password_file);
  if (!password.ok()) return password.status();
  const std::string first = password->substr(0, password->find_first_of("\r\n"));
  if (first.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_auth_password_file = \"", options.metrics_auth_password_file,
        "\": the first line is empty; an empty password would let anyone scrape"));
  }
  security.auth = BasicAuthenticator::FromPassword(options.metrics_auth_user, first);
  return security;
}

// /metrics, streamed, its duration and size observed; each page delivered whole to a client that
// says it is a scraper is told to `witness` (its address and when it began).
HttpListener::Route MetricsRoute(MetricsExposition* exposition, ServerMetrics* metrics, ScrapeWitness* witness) {
  return {"/metrics", [exposition, metrics, witness](const HttpRequest& request) {
            HttpResponse response = HttpResponse::Of(200, kExpositionContentType, "");
            const double began = MonotonicSeconds();
            response.stream = [exposition, metrics](const HttpResponse::Writer& write) {
              const absl::Time start = absl::Now();
              size_t bytes = 0;
              bool going = true;
              metrics->SampleProcess();
              exposition->Write([&](std::string& piece) {
                bytes += piece.size();
                going = going && write(piece);
              });
              metrics->Scraped(absl::ToDoubleSeconds(absl::Now() - start), bytes);
            };
            if (request.scraper) {
              response.delivered = [witness, peer = request.peer, began](bool whole) {
                if (whole) witness->Delivered(peer, began);
              };
            }
            return response;
          }};
}

// --declare_series: each cell at 0 from the start. Only catalog profiles have a label of their own
// before a record claims one.
absl::Status DeclareSeries(const ServerOptions& options, const ModelRegistry& registry, Aggregator& aggregator) {
  auto declared = options.DeclaredSeries();
  if (!declared.ok()) return declared.status();
  for (const auto& [model, tier] : *declared) {
    auto resolution = registry.Resolve(model);
    if (!resolution.ok() || !resolution->label || registry.catalog().Find(model) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("--declare_series: ", Quoted(model),
                                                     ": not a profile of the catalog (kvledger profiles lists them)"));
    }
    aggregator.Declare(resolution->label->slot, tier);
  }
  return absl::OkStatus();
}

// --capacity_ladder, --capacity_tiers and their bounds: the live capacity curves, or none for an empty
// ladder. A tier's measured bandwidth is the one Advise answers with (the fleet's, else this replica's).
// `fleet` is read at each call: the fleet's rates start after the curves.
absl::StatusOr<std::unique_ptr<CapacityCurves>> StartCurves(const ServerOptions& options, const ModelRegistry& registry,
                                                            const LiveRates* rates,
                                                            const std::unique_ptr<FleetRates>* fleet) {
  auto ladder = options.CapacityLadder();
  if (!ladder.ok()) return ladder.status();
  if (ladder->empty()) return nullptr;
  CurveLimits limits{options.capacity_caches, *SamplesPerCache(options.capacity_memory_bytes, options.capacity_caches),
                     static_cast<double>(options.capacity_cache_idle_seconds), *options.CapacityUseOrder()};
  limits.tiers.sizes = *options.CapacityTiers();
  limits.tiers.device_tokens = options.capacity_device_tokens;
  limits.tiers.inclusive = options.capacity_tiers_inclusive;
  limits.tiers.measured_bandwidth = [&registry, rates, fleet](absl::string_view model, Tier kind) {
    return ReloadBandwidthUsed(registry, std::string(model), kind, rates, fleet->get()).rate;
  };
  return CapacityCurves::Create(*std::move(ladder), registry.slots().slot_count(), std::move(limits));
}

}  // namespace

// --fleet_prometheus_url: the fleet's rates, read by a poller of their own (Validate checked the URL).
void KvledgerServer::ReadFleetRates(const ServerOptions& options, State& state) {
  if (options.fleet_prometheus_url.empty()) return;
  const absl::Duration refresh = absl::Seconds(options.fleet_refresh_seconds);
  state.fleet = std::make_unique<FleetRates>(4 * absl::ToDoubleSeconds(refresh));
  state.fleet_poller =
      std::make_unique<FleetPoller>(*ParsePrometheusUrl("fleet_prometheus_url", options.fleet_prometheus_url),
                                    options.fleet_job, refresh, *state.fleet, state.metrics.get());
}

std::string KvledgerServer::metrics_url() const {
  return absl::StrCat(state_->http->scheme(), "://", metrics_address_, "/metrics");
}

absl::StatusOr<std::unique_ptr<KvledgerServer>> KvledgerServer::Start(const ServerOptions& options,
                                                                      std::unique_ptr<RecordSink> sink) {
  if (auto s = options.Validate(); !s.ok()) return s;
  auto state = std::make_unique<State>();
  state->options = options;
  auto catalog = ProfileCatalog::LoadFile(options.profiles_file);
  if (!catalog.ok()) return absl::InvalidArgumentError(catalog.status().message());
  state->catalog = *std::move(catalog);
  if (!options.trace_file.empty()) {
    auto trace = LoadPlanningTrace(options.trace_file, options.trace_format, options.trace_block_tokens);
    if (!trace.ok()) return trace.status();
    state->trace = *std::move(trace);
  }
  state->registry = std::make_unique<ModelRegistry>(state->catalog, options.max_models, options.unknown_model);
  state->aggregator = std::make_unique<Aggregator>(state->registry->slots().slot_count());
  if (absl::Status s = DeclareSeries(options, *state->registry, *state->aggregator); !s.ok()) return s;
  state->rates = std::make_unique<LiveRates>(state->registry->slots().slot_count(), options.advice_half_life_seconds,
                                             MonotonicSeconds, LiveRates::kDefaultRefitSeconds,
                                             options.live_compute_model);
  if (auto curves = StartCurves(options, *state->registry, state->rates.get(), &state->fleet); curves.ok()) {
    state->curves = *std::move(curves);
  } else {
    return curves.status();
  }
  std::vector<RecordObserver*> observers;
  if (state->curves != nullptr) observers.push_back(state->curves.get());
  state->ledger = std::make_unique<Ledger>(*state->registry, *state->aggregator, state->rates.get(),
                                           LabelClaims::kClaim, std::move(observers));
  state->synthetic_aggregator = std::make_unique<Aggregator>(state->registry->slots().slot_count());
  state->synthetic_ledger = std::make_unique<Ledger>(*state->registry, *state->synthetic_aggregator, nullptr,
                                                     LabelClaims::kNever);
  state->sink = std::move(sink);
  RecordSink& records = state->sink ? *state->sink : static_cast<RecordSink&>(*state->ledger);
  RecordSink& synthetic = state->sink ? *state->sink : static_cast<RecordSink&>(*state->synthetic_ledger);
  if (!state->sink) state->engine_stats = std::make_unique<EngineStats>(*state->registry, state->rates.get());
  state->metrics = std::make_unique<ServerMetrics>(kVersion);
  ReadFleetRates(options, *state);
  state->service = std::make_unique<LedgerService>(RecordSinks{records, synthetic}, *state->registry, LedgerServiceOptions::From(options),
                                                   state->rates.get(), state->engine_stats.get(), state->metrics.get(),
                                                   state->fleet.get(), state->curves.get());
  int grpc_port = 0;
  auto grpc_server = BuildGrpcServer(options, *state->service, *state->metrics, &grpc_port);
  if (!grpc_server.ok()) return grpc_server.status();
  state->grpc_server = *std::move(grpc_server);
  // Without ConfigureGrpcProcess() (an in-process test) there is no health service to mark.
  if (auto* health = state->grpc_server->GetHealthCheckService()) health->SetServingStatus(kLedgerService, true);
  auto security = MetricsSecurity(options);
  if (!security.ok()) {
    state->grpc_server->Shutdown();
    return security.status();
  }
  state->exposition = std::make_unique<MetricsExposition>(*state->aggregator, *state->registry, state->rates.get(),
                                                          state->engine_stats.get(),
                                                          std::vector<const prometheus::Collectable*>{&state->metrics->registry()},
                                                          state->curves.get(), state->fleet.get());
  std::vector<HttpListener::Route> routes = {
      MetricsRoute(state->exposition.get(), state->metrics.get(), &state->scrapes)};
  for (auto& route : HttpApiRoutes(*state->registry, *state->aggregator, *state->rates, state->fleet.get(), state->trace.get(),
                                   state->curves.get())) routes.push_back(std::move(route));
  auto http = HttpListener::Start(options.metrics_address, options.http, *std::move(security),
                                  std::move(routes));
  if (!http.ok()) {
    state->grpc_server->Shutdown();
    return http.status();
  }
  state->http = *std::move(http);
  StartReadiness(*state);
  auto server = std::unique_ptr<KvledgerServer>(new KvledgerServer(std::move(state)));
  server->grpc_address_ = absl::StrCat(HostOf(options.grpc_address), ":", grpc_port);
  server->metrics_address_ = server->state_->http->address();
  return server;
}

void KvledgerServer::StartReadiness(State& state) {
  auto* health = state.grpc_server->GetHealthCheckService();
  if (health == nullptr || state.options.ready_after_scrape_seconds == 0) return;
  health->SetServingStatus(kLedgerService, false);
  const absl::Time until = absl::Now() + absl::Seconds(state.options.ready_after_scrape_seconds);
  state.readiness = std::thread([&state, health, until] {
    while (!state.stop_readiness.WaitForNotificationWithTimeout(kScrapeCheckEvery)) {
      if (state.scrapes.Any() || absl::Now() >= until) {
        health->SetServingStatus(kLedgerService, true);
        return;
      }
    }
  });
}

void KvledgerServer::Shutdown(bool patient) {
  if (!state_ || state_->stopped) return;
  state_->stopped = true;
  state_->stop_readiness.Notify();
  if (state_->readiness.joinable()) state_->readiness.join();
  // 1. Health turns NOT_SERVING at once; calls are still served while balancers notice.
  if (auto* health = state_->grpc_server->GetHealthCheckService()) health->Shutdown();
  if (patient) absl::SleepFor(absl::Seconds(state_->options.shutdown_drain_seconds));
  // 2. Record calls are refused UNAVAILABLE before anything is applied, with the draining trailer,
  //    for kRefusalWindow (at most the drain period) while connections are still up, so that clients
  //    hear it and retry on another replica rather than meet a closing connection; then open streams
  //    end with their summaries, new calls are refused by gRPC, and calls in flight get a grace period.
  state_->service->Drain();
  if (patient) absl::SleepFor(std::min(kRefusalWindow, absl::Seconds(state_->options.shutdown_drain_seconds)));
  state_->service->EndOpenStreams();
  state_->grpc_server->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  state_->grpc_server->Wait();
  // 3. Nothing more is acknowledged: /metrics stays up until every scraper active now has scraped
  //    once more, at most the grace period.
  if (patient) {
    const double acknowledged_all = MonotonicSeconds();
    state_->scrapes.Freeze();
    const absl::Time deadline = absl::Now() + absl::Seconds(state_->options.shutdown_scrape_grace_seconds);
    while (absl::Now() < deadline && !state_->scrapes.AllSince(acknowledged_all)) {
      absl::SleepFor(kScrapeCheckEvery);
    }
  }
  state_->http.reset();
  state_->fleet_poller.reset();
}

}  // namespace kvledger
