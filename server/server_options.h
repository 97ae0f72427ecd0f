// Everything kvledger-server is configured with: one typed struct, a default per field, built
// from flags in main() and checked once by Validate().
#ifndef KVLEDGER_SERVER_SERVER_OPTIONS_H_
#define KVLEDGER_SERVER_SERVER_OPTIONS_H_

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/accounting/record_facts.h"
#include "lib/capacity/ladder.h"
#include "lib/capacity/second_tier.h"
#include "lib/capacity/use_order.h"
#include "lib/profiles/model_registry.h"
#include "server/http/limits.h"

// The server's numeric bounds besides the HTTP listener's, each declared once: flag name, type,
// default, range and meaning. ServerOptions' fields, the flags, their checks and the bounds table of
// docs/operations.md (kvledger-server --print_bounds) are all made from this list. Why some defaults:
// - batch_dedup_*: 524,288 all-accepted batches of 112 bytes each (server/batch_dedup.h) fit 64 MiB;
//   at 2,000 batches a second per replica that is over 4 minutes of retries.
// - max_connection_age_seconds 120: a replica added behind a DNS name gets traffic within about two
//   and a half minutes (clients reconnect, re-resolve and rebalance after the age and its 30 s grace);
//   a reconnect every two minutes costs a client one handshake.
// X(name, type, default, min, max, meaning)
#define KVLEDGER_SERVER_BOUNDS(X)                                                                                   \
  X(max_models, uint32_t, 64, 1, 10000,                                                                            \
    "label values for models without a profile (with --unknown_model=generic); later ones fold into "              \
    "model=\"other\"")                                                                                             \
  X(max_batch_records, uint32_t, 10000, 1, 1000000,                                                                \
    "records in one RecordBatch or stream batch; a larger batch is refused whole")                                 \
  X(max_listed_rejections, uint32_t, 1000, 0, 100000,                                                              \
    "rejection details one reply lists; the counts stay exact, so every reply fits a default 4 MB client")         \
  X(max_receive_message_bytes, uint32_t, 4u << 20, 1024, 256u << 20,                                               \
    "largest gRPC message accepted; larger ones get RESOURCE_EXHAUSTED before they are parsed")                    \
  X(max_concurrent_streams, uint32_t, 64, 1, 100000, "concurrent calls per gRPC connection")                       \
  X(max_connection_idle_seconds, uint32_t, 300, 1, 604800, "a gRPC connection without calls this long is closed")  \
  X(max_connection_age_seconds, uint32_t, 120, 1, 604800,                                                          \
    "a gRPC connection is closed gracefully (30 s grace) after this long, so clients re-resolve and rebalance")    \
  X(keepalive_min_ping_seconds, uint32_t, 30, 1, 3600,                                                             \
    "least interval between client pings without calls; more often closes the connection")                        \
  X(grpc_memory_quota_bytes, uint64_t, uint64_t{512} << 20, uint64_t{16} << 20, uint64_t{64} << 30,                 \
    "memory gRPC may use for connection and call buffers")                                                         \
  X(stream_idle_seconds, uint32_t, 300, 0, 86400,                                                                  \
    "a StreamRecords call that sends no batch this long ends with its summary (0 = never)")                        \
  X(advice_half_life_seconds, uint32_t, 300, 1, 86400,                                                             \
    "half-life of the live reload-bandwidth rates and of the prefill compute-time model")                          \
  X(fleet_refresh_seconds, uint32_t, 15, 1, 3600, "seconds between reads of --fleet_prometheus_url")               \
  X(ready_after_scrape_seconds, uint32_t, 0, 0, 3600,                                                              \
    "at start, gRPC health reports kvledger.v1.Ledger NOT_SERVING until a scraper's /metrics page was "            \
    "delivered, at most this long (0 = serving at once)")                                                          \
  X(shutdown_drain_seconds, uint32_t, 5, 0, 3600,                                                                  \
    "on SIGTERM: seconds gRPC health reports NOT_SERVING while calls are still served")                           \
  X(shutdown_scrape_grace_seconds, uint32_t, 20, 0, 3600,                                                          \
    "on SIGTERM: seconds at most /metrics stays up after the last call, for each active scraper's final scrape")   \
  X(deaf_listener_seconds, uint32_t, 30, 0, 86400,                                                                 \
    "connections unaccepted in the gRPC accept queue this long end the process with status 3 (0 = never)")        \
  X(capacity_caches, uint32_t, 16, 1, 100000,                                                                      \
    "capacity curves: the (model, cache_id) pairs replayed at once; a new one's records are counted untracked "   \
    "while every place is held by a cache active within --capacity_cache_idle_seconds")                            \
  X(capacity_cache_idle_seconds, uint32_t, 600, 1, 604800,                                                        \
    "capacity curves: a cache without a record this long gives its place to a new cache when all are taken")     \
  X(capacity_memory_bytes, uint64_t, uint64_t{256} << 20, uint64_t{1} << 20, uint64_t{64} << 30,                \
    "capacity curves: bytes all caches' stacks may hold together, an equal share each of --capacity_caches; "     \
    "a cache's depths are exact within its share and sampled past it")                                          \
  X(capacity_device_tokens, uint64_t, 0, 0, uint64_t{1} << 50,                                                    \
    "second-tier what-if: a device cache's capacity in tokens where a record gives none (cache_capacity_blocks); " \
    "0 = tiers only below caches whose records give it")                                                        \
  X(bulk_call_bytes, uint32_t, 65536, 0, 256u << 20,                                                             \
    "a Record or RecordBatch call or stream batch of at least this many bytes (records with block ids) is "      \
    "applied on the bulk lane: one thread at the lowest CPU priority taking each client address's calls in "     \
    "turn, so replaying ids never starves smaller calls (0 = every call where it arrives)")                      \
  X(bulk_lane_bytes, uint64_t, uint64_t{64} << 20, uint64_t{1} << 20, uint64_t{4} << 30,                        \
    "bytes of calls the bulk lane holds waiting, a quarter per client address (at least 4 x "                    \
    "--max_receive_message_bytes); a call past it gets RESOURCE_EXHAUSTED, to be retried, before anything of it " \
    "is applied")                                                                                                 \
  X(batch_dedup_entries, uint32_t, 524288, 0, 10000000,                                                            \
    "RecordBatch and RecordEngineStats batch ids remembered so a retried batch is not counted twice (0 = off)")    \
  X(batch_dedup_bytes, uint64_t, uint64_t{64} << 20, uint64_t{64} << 10, uint64_t{4} << 30,                      \
    "bytes the remembered batch outcomes may hold; the oldest are forgotten first")                                \
  X(batch_dedup_seconds, uint32_t, 600, 1, 86400, "how long a batch id is remembered")

namespace kvledger {

// One bound as it stands: its flag, value (as given), default, range and meaning.
struct ServerBound {
  std::string flag;
  std::string value;
  bool in_range;
  uint64_t default_value, min, max;
  const char* meaning;
};

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
  // Capacity curves (docs/cost-model.md §14): the capacities, in tokens, at which records with prefix
  // block ids are replayed (a list or FROM:TO:POINTS, at most 16, besides the unlimited one; empty: no
  // curves), and the order a request's blocks are used in (lib/capacity/use_order.h).
  std::string capacity_ladder = kDefaultCapacityLadder;
  std::string capacity_use_order = std::string(UseOrderName(UseOrder::kTailFirst));
  // The second tiers costed below each cache's device (docs/cost-model.md §15):
  // KIND:SIZE[:BYTES_PER_SECOND[:WAIT_SECONDS]],... (lib/capacity/second_tier.h); empty: none.
  std::string capacity_tiers = kDefaultTierLadder;
  // Whether those tiers hold copies of the device's blocks (write-through) rather than what it evicts.
  bool capacity_tiers_inclusive = false;
  // The HTTP listener's bounds (server/http/limits.h), each a --http_NAME flag.
  HttpLimits http;
  // The server's other bounds, each a flag of its name (KVLEDGER_SERVER_BOUNDS above).
#define KVLEDGER_SERVER_OPTIONS_FIELD(name, type, default_value, min, max, meaning) type name = default_value;
  KVLEDGER_SERVER_BOUNDS(KVLEDGER_SERVER_OPTIONS_FIELD)
#undef KVLEDGER_SERVER_OPTIONS_FIELD

  // Every bound with its value, in the order of --print_bounds: the HTTP ones, then the others.
  std::vector<ServerBound> Bounds() const;

  // INVALID_ARGUMENT naming the flag when a value is unusable.
  absl::Status Validate() const;
  // declare_series as (profile name, tier) pairs; INVALID_ARGUMENT naming the flag and the item.
  absl::StatusOr<std::vector<std::pair<std::string, Tier>>> DeclaredSeries() const;
  // capacity_ladder's finite capacities, ascending; INVALID_ARGUMENT naming the flag.
  absl::StatusOr<std::vector<uint64_t>> CapacityLadder() const;
  // capacity_use_order as an order; INVALID_ARGUMENT naming the flag.
  absl::StatusOr<UseOrder> CapacityUseOrder() const;
  // capacity_tiers as tier sizes; INVALID_ARGUMENT naming the flag.
  absl::StatusOr<std::vector<TierSize>> CapacityTiers() const;
};

// Whether `value` lies in [min, max] (a negative one never does).
template <typename T>
bool InBound(T value, uint64_t min, uint64_t max) {
  if constexpr (std::is_signed_v<T>) {
    if (value < 0) return false;
  }
  return static_cast<uint64_t>(value) >= min && static_cast<uint64_t>(value) <= max;
}
// The one message of a bound's value out of its range, naming the flag.
absl::Status BoundError(absl::string_view flag, absl::string_view value, uint64_t min, uint64_t max);

// Every bound's flag, default, range and meaning as a Markdown table: kvledger-server --print_bounds,
// and the bounds table of docs/operations.md (a test keeps the two equal).
std::string BoundsMarkdown();

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_SERVER_OPTIONS_H_
