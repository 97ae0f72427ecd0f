#include "server/server_options.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/base/quote.h"
#include "lib/planning/capacity.h"
#include "lib/planning/plan.h"
#include "server/fleet_poller.h"

namespace kvledger {
namespace {

absl::Status CheckHostPort(const char* flag, const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " = \"", address, "\": must be HOST:PORT, e.g. 127.0.0.1:0"));
  }
  for (size_t i = colon + 1; i < address.size(); ++i) {
    if (address[i] < '0' || address[i] > '9') {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " = \"", address, "\": port must be a number in [0, 65535]"));
    }
  }
  if (address.size() - colon - 1 > 5 || std::stoi(address.substr(colon + 1)) > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " = \"", address, "\": port must be a number in [0, 65535]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<uint64_t>> ServerOptions::CapacityLadder() const {
  return ParseCapacityLadder(capacity_ladder, "--capacity_ladder");
}

absl::StatusOr<std::vector<std::pair<std::string, Tier>>> ServerOptions::DeclaredSeries() const {
  std::vector<std::pair<std::string, Tier>> out;
  if (declare_series.empty()) return out;
  for (absl::string_view item : absl::StrSplit(declare_series, ',')) {
    const std::vector<absl::string_view> parts = absl::StrSplit(item, absl::MaxSplits(':', 1));
    if (parts[0].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--declare_series = ", Quoted(declare_series),
                                                     ": an empty item (write PROFILE or PROFILE:TIER, comma-separated)"));
    }
    if (parts.size() == 1) {
      out.emplace_back(std::string(parts[0]), Tier::kNone);
      out.emplace_back(std::string(parts[0]), Tier::kDevice);
      continue;
    }
    const std::optional<Tier> tier = TierFromLabel(parts[1]);
    if (!tier) {
      return absl::InvalidArgumentError(absl::StrCat("--declare_series = ", Quoted(item), ": the tier must be ",
                                                     TierLabelList()));
    }
    out.emplace_back(std::string(parts[0]), *tier);
  }
  return out;
}

absl::Status ServerOptions::Validate() const {
  if (auto s = CheckHostPort("grpc_address", grpc_address); !s.ok()) return s;
  if (auto s = CheckHostPort("metrics_address", metrics_address); !s.ok()) return s;
  if (auto s = DeclaredSeries(); !s.ok()) return s.status();
  if (auto s = CapacityLadder(); !s.ok()) return s.status();
  if (max_models < 1 || max_models > 10000) {
    return absl::InvalidArgumentError(absl::StrCat("--max_models = ", max_models, ": must be in [1, 10000]"));
  }
  struct Bound {
    const char* flag;
    uint64_t value, lo, hi;
  };
  for (const Bound& b : {Bound{"max_batch_records", max_batch_records, 1, 1000000},
                         Bound{"max_listed_rejections", max_listed_rejections, 0, 100000},
                         Bound{"max_receive_message_bytes", max_receive_message_bytes, 1024, 256u << 20},
                         Bound{"max_concurrent_streams", max_concurrent_streams, 1, 100000},
                         Bound{"max_connection_idle_seconds", max_connection_idle_seconds, 1, 604800},
                         Bound{"max_connection_age_seconds", max_connection_age_seconds, 1, 604800},
                         Bound{"keepalive_min_ping_seconds", keepalive_min_ping_seconds, 1, 3600},
                         Bound{"shutdown_drain_seconds", shutdown_drain_seconds, 0, 3600},
                         Bound{"stream_idle_seconds", stream_idle_seconds, 0, 86400},
                         Bound{"advice_half_life_seconds", advice_half_life_seconds, 1, 86400},
                         Bound{"fleet_refresh_seconds", fleet_refresh_seconds, 1, 3600},
                         Bound{"shutdown_scrape_grace_seconds", shutdown_scrape_grace_seconds, 0, 3600},
                         Bound{"deaf_listener_seconds", deaf_listener_seconds, 0, 86400},
                         Bound{"ready_after_scrape_seconds", ready_after_scrape_seconds, 0, 3600},
                         Bound{"capacity_caches", capacity_caches, 1, 100000},
                         Bound{"capacity_tracked_blocks", capacity_tracked_blocks, 1, uint64_t{1} << 30},
                         Bound{"batch_dedup_bytes", batch_dedup_bytes, uint64_t{64} << 10, uint64_t{4} << 30},
                         Bound{"batch_dedup_entries", batch_dedup_entries, 0, 10000000},
                         Bound{"batch_dedup_seconds", batch_dedup_seconds, 1, 86400},
                         Bound{"grpc_memory_quota_bytes", grpc_memory_quota_bytes, uint64_t{16} << 20,
                               uint64_t{64} << 30},
                         Bound{"http_workers", http_workers, 1, 256},
                         Bound{"http_served_per_client", http_served_per_client, 1, 256},
                         Bound{"http_connections_per_client", http_connections_per_client, 1, 1000000},
                         Bound{"http_connections", http_connections, 8, 1000000},
                         Bound{"http_max_in_flight", http_max_in_flight, 1, 100000},
                         Bound{"http_in_flight_per_client", http_in_flight_per_client, 1, 100000},
                         Bound{"http_head_bytes", http_head_bytes, 1024, 1 << 20},
                         Bound{"http_head_seconds", http_head_seconds, 1, 3600},
                         Bound{"http_idle_seconds", http_idle_seconds, 1, 86400},
                         Bound{"http_answer_seconds", http_answer_seconds, 1, 3600},
                         Bound{"http_parked_bytes", http_parked_bytes, 0, uint64_t{64} << 30}}) {
    if (b.value < b.lo || b.value > b.hi) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", b.flag, " = ", b.value, ": must be in [", b.lo, ", ", b.hi, "]"));
    }
  }
  if (tls_cert_file.empty() != tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert_file and --tls_key_file: give both or neither");
  }
  if (!tls_client_ca_file.empty() && tls_cert_file.empty()) {
    return absl::InvalidArgumentError("--tls_client_ca_file: needs --tls_cert_file and --tls_key_file");
  }
  if (!fleet_prometheus_url.empty()) {
    if (auto url = ParsePrometheusUrl("fleet_prometheus_url", fleet_prometheus_url); !url.ok()) return url.status();
  }
  if (fleet_job.empty() || !std::all_of(fleet_job.begin(), fleet_job.end(), [](char c) {
        return absl::ascii_isalnum(c) || c == '_' || c == '-' || c == '.' || c == ':';
      })) {
    return absl::InvalidArgumentError(absl::StrCat("--fleet_job = ", Quoted(fleet_job),
                                                   ": must be a job label of letters, digits, _ - . or :"));
  }
  if (metrics_auth_user.empty() != metrics_auth_password_file.empty()) {
    return absl::InvalidArgumentError(
        "--metrics_auth_user and --metrics_auth_password_file: give both or neither");
  }
  return absl::OkStatus();
}

}  // namespace kvledger
