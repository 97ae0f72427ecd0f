#include "server/server_options.h"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/base/quote.h"
#include "lib/capacity/sampled_stack.h"
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

template <typename T>
ServerBound Bound(std::string flag, T value, T default_value, uint64_t min, uint64_t max, const char* meaning) {
  return {std::move(flag), absl::StrCat(value), InBound(value, min, max), static_cast<uint64_t>(default_value), min, max,
          meaning};
}

}  // namespace

std::vector<ServerBound> ServerOptions::Bounds() const {
  const ServerOptions defaults;
  std::vector<ServerBound> out;
#define KVLEDGER_HTTP_BOUND(name, type, default_value, min, max, meaning) \
  out.push_back(Bound<type>("http_" #name, http.name, defaults.http.name, min, max, meaning));
  KVLEDGER_HTTP_BOUNDS(KVLEDGER_HTTP_BOUND)
#undef KVLEDGER_HTTP_BOUND
#define KVLEDGER_SERVER_BOUND(name, type, default_value, min, max, meaning) \
  out.push_back(Bound<type>(#name, name, defaults.name, min, max, meaning));
  KVLEDGER_SERVER_BOUNDS(KVLEDGER_SERVER_BOUND)
#undef KVLEDGER_SERVER_BOUND
  return out;
}

absl::Status BoundError(absl::string_view flag, absl::string_view value, uint64_t min, uint64_t max) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " = ", value, ": must be in [", min, ", ", max, "]"));
}

std::string BoundsMarkdown() {
  std::string out = "| flag | default | range | meaning |\n|---|---|---|---|\n";
  for (const ServerBound& b : ServerOptions().Bounds()) {
    absl::StrAppend(&out, "| `--", b.flag, "` | ", b.default_value, " | ", b.min, " – ", b.max, " | ", b.meaning,
                    " |\n");
  }
  return out;
}

absl::StatusOr<std::vector<uint64_t>> ServerOptions::CapacityLadder() const {
  return ParseCapacityLadder(capacity_ladder, "--capacity_ladder");
}

absl::StatusOr<std::vector<TierSize>> ServerOptions::CapacityTiers() const {
  return ParseTierLadder(capacity_tiers, "--capacity_tiers");
}

absl::StatusOr<UseOrder> ServerOptions::CapacityUseOrder() const {
  return ParseUseOrder("--capacity_use_order", capacity_use_order);
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
  if (auto s = CapacityUseOrder(); !s.ok()) return s.status();
  if (auto s = CapacityTiers(); !s.ok()) return s.status();
  for (const ServerBound& b : Bounds()) {
    if (!b.in_range) return BoundError(b.flag, b.value, b.min, b.max);
  }
  if (auto s = SamplesPerCache(capacity_memory_bytes, capacity_caches); !s.ok()) return s.status();
  if (bulk_call_bytes > 0 && bulk_lane_bytes < uint64_t{4} * max_receive_message_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--bulk_lane_bytes = ", bulk_lane_bytes, ": must be at least 4 x --max_receive_message_bytes (",
        uint64_t{4} * max_receive_message_bytes, "), so that a client's largest call fits its quarter of the lane"));
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
