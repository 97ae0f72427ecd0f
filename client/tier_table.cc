#include "client/tier_table.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace kvledger::cli {

void PrintTierTable(std::ostream& out, const v1::ModelCapacityCurve& m, const std::vector<TierSize>& only) {
  if (m.tiers_size() == 0) return;
  out << "a second tier below the device (exclusive LRU; a reload slower than recomputing is recomputed):\n"
      << absl::StrFormat("%7s %12s %12s %10s %10s %10s %14s %12s %22s\n", "tier", "size", "tokens", "token hit",
                         "attention", "prefill", "net s saved", "reload s", "slower: records (s)");
  for (const v1::TierPoint& p : m.tiers()) {
    const bool listed = std::any_of(only.begin(), only.end(), [&](const TierSize& t) {
      return TierLabel(t.kind) == p.tier() && t.bytes == p.tier_bytes();
    });
    if (!only.empty() && !listed) continue;
    const std::string seconds = p.seconds_known_requests() > 0 ? absl::StrFormat("%.1f", p.net_seconds_avoided()) : "-";
    const std::string reload = p.seconds_known_requests() > 0 ? absl::StrFormat("%.1f", p.reload_seconds()) : "-";
    out << absl::StrFormat("%7s %8.1f GiB %12d %9.2f%% %9.2f%% %9.2f%% %14s %12s %14d (%.1f)\n", p.tier(),
                           p.tier_bytes() / (1024.0 * 1024 * 1024), p.tier_tokens(), 100 * p.token_hit_ratio(),
                           100 * p.attention_avoided_ratio(), 100 * p.prefill_avoided_ratio(), seconds, reload,
                           p.slower_requests(), p.slower_excess_seconds());
  }
  if (m.tier_no_device_requests() > 0) {
    out << absl::StrFormat("%d records gave no device capacity (cache_capacity_blocks) for the tiers to stand "
                           "below; the server's --capacity_device_tokens is 0\n",
                           m.tier_no_device_requests());
  }
}

}  // namespace kvledger::cli
