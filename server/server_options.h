// Everything kvledger-server is configured with: one typed struct, a default per field, built
// from flags in main() and checked once by Validate().
#ifndef KVLEDGER_SERVER_SERVER_OPTIONS_H_
#define KVLEDGER_SERVER_SERVER_OPTIONS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/accounting/record_facts.h"
#include "lib/profiles/model_registry.h"

namespace kvledger {

struct ServerOptions {
  // gRPC listen address HOST:PORT; port 0 picks a free port.
  std::string grpc_address = "127.0.0.1:50051";
  // Prometheus /metrics listen address HOST:PORT; port 0 picks a free port.
  std::string metrics_address = "127.0.0.1:9464";
  // Text-proto or JSON ProfileCatalog adding/overriding built-in profiles; empty = built-ins only.
  std::string profiles_file;
  // A prefix-reuse trace (docs/planning.md) read and checked at start, for /api/v1/plan and the
  // explorer's "Your trace" section; empty = none. Its format is trace_format (auto: told from its
  // first line) and its blocks trace_block_tokens long (0: the format's own).
  std::string trace_file;
  std::string trace_format = "auto";
  uint32_t trace_block_tokens = 0;
  // Series exported at 0 before their first record: a comma list of PROFILE (its tiers none and
  // device) or PROFILE:TIER (docs/operations.md, "Series before the first record").
  std::string declare_series;
  // Distinct model label values before further models fold into model="other".
  uint32_t max_models = 64;
  UnknownModelPolicy unknown_model = UnknownModelPolicy::kReject;
  // gRPC TLS: PEM certificate chain and private key; both or neither. With a client CA file the
  // server also requires and verifies client certificates (mutual TLS).
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  // The HTTP port's TLS and basic auth, in the Prometheus exporter-toolkit format
  // (server/http/security.h); empty = plain HTTP, no auth.
  std::string web_config_file;
  // The older way to one basic-auth user: a name and a file holding the password (first line).
  // Kept working; not together with basic_auth_users in web_config_file.
  std::string metrics_auth_user;
  std::string metrics_auth_password_file;
  // The HTTP listener's bounds (server/http/listener.h: HttpLimits), each a --http_* flag.
  uint32_t http_workers = 8;
  uint32_t http_served_per_client = 2;
  uint32_t http_connections_per_client = 64;
  uint32_t http_connections = 1024;
  uint32_t http_max_in_flight = 64;
  uint32_t http_in_flight_per_client = 8;
  uint32_t http_head_bytes = 16384;
  uint32_t http_head_seconds = 5;
  uint32_t http_idle_seconds = 60;
  uint32_t http_answer_seconds = 30;
  uint64_t http_parked_bytes = uint64_t{64} << 20;
  // RecordBatch batch ids remembered for deduplication: the most recent this many (0 = off), at
  // most this old.
  // 524,288 all-accepted batches of 112 bytes each (server/batch_dedup.h) fit the 64 MiB: at 2,000
  // batches a second per replica that is over 4 minutes of retries.
  uint32_t batch_dedup_entries = 524288;
  uint32_t batch_dedup_bytes = 64 << 20;
  uint32_t batch_dedup_seconds = 600;
  // Resource bounds (docs/security.md): records per batch (larger batches are refused whole),
  // rejection details listed per reply (counts stay exact), the largest message accepted, HTTP/2
  // streams per connection, connection idle time and age, the least interval between client pings
  // without data (more often: the connection is closed), and the memory gRPC may use for its buffers.
  uint32_t max_batch_records = 10000;
  uint32_t max_listed_rejections = 1000;
  uint32_t max_receive_message_bytes = 4 << 20;
  uint32_t max_concurrent_streams = 64;
  uint32_t max_connection_idle_seconds = 300;
  // 120 s: a replica added behind a DNS name gets traffic within about two and a half minutes (each
  // client reconnects, re-resolves and rebalances after the age and its 30 s grace); at 3,600 s a new
  // replica could wait an hour. A reconnect every two minutes costs a client one handshake.
  uint32_t max_connection_age_seconds = 120;
  uint32_t keepalive_min_ping_seconds = 30;
  uint64_t grpc_memory_quota_bytes = uint64_t{512} << 20;
  // A stream that sends no batch for this long ends with its summary (0 = never).
  uint32_t stream_idle_seconds = 300;
  // Half-life of the live reload-bandwidth rates and of the prefill compute-time model (behind Advise
  // and every recompute estimate).
  uint32_t advice_half_life_seconds = 300;
  // Learn the compute-time model from records (docs/cost-model.md §8). Off: estimates come from the
  // profiles' stated prefill_flops_per_second only, and every counter is a pure function of the
  // accepted records, whatever their order.
  bool live_compute_model = true;
  // Advise from the fleet's live rates (server/fleet_poller.h): a Prometheus that evaluates the
  // shipped kvledger.fleet rules, http://HOST[:PORT][/PATH]; empty = this replica's rates only. The
  // rules' series of job fleet_job are read every fleet_refresh_seconds; a table older than 4 refresh
  // periods is not used.
  std::string fleet_prometheus_url;
  std::string fleet_job = "kvledger";
  uint32_t fleet_refresh_seconds = 15;
  // Start: with a value > 0, gRPC health reports kvledger.v1.Ledger NOT_SERVING (the overall ""
  // status stays SERVING, for liveness) until /metrics has been scraped once, at most this long:
  // a readiness probe on that service then keeps traffic away until Prometheus has the replica's
  // cells at 0, so rate() and increase() see its first records. 0: serving at once.
  uint32_t ready_after_scrape_seconds = 0;
  // Shutdown (SIGTERM): gRPC health reports NOT_SERVING for drain_seconds while calls are still
  // served (so balancers move traffic away), then record calls are refused UNAVAILABLE for up to
  // 1 s, open streams get their summaries, new calls are refused and calls in flight get 5 s; then
  // /metrics stays up until each active scraper has scraped again, at most scrape_grace_seconds,
  // so the last scrape sees every acknowledged record.
  uint32_t shutdown_drain_seconds = 5;
  uint32_t shutdown_scrape_grace_seconds = 20;
  // kvledger-server's listener watchdog (server/listener_watchdog.h): connections left unaccepted in
  // the gRPC accept queue this long end the process with kExitDeafListener (0 = never watch).
  uint32_t deaf_listener_seconds = 30;
  // Capacity curves (docs/cost-model.md §14): the capacities, in tokens, at which records with prefix
  // block ids are replayed (a list or FROM:TO:POINTS, at most 16, besides the unlimited one; empty: no
  // curves), the (model, cache_id) pairs replayed, and the blocks each one's stack tracks exactly.
  std::string capacity_ladder = "65536:33554432:10";
  uint32_t capacity_caches = 16;
  uint32_t capacity_tracked_blocks = 1u << 20;

  // INVALID_ARGUMENT naming the flag when a value is unusable.
  absl::Status Validate() const;
  // declare_series as (profile name, tier) pairs; INVALID_ARGUMENT naming the flag and the item.
  absl::StatusOr<std::vector<std::pair<std::string, Tier>>> DeclaredSeries() const;
  // capacity_ladder's finite capacities, ascending; INVALID_ARGUMENT naming the flag.
  absl::StatusOr<std::vector<uint64_t>> CapacityLadder() const;
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_SERVER_OPTIONS_H_
