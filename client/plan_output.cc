#include "client/plan_output.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/wire/plan_json.h"

namespace kvledger::cli {
namespace {

// A tier's capacity as printed: its tokens, `inf`, or `absent` when there is no such tier.
std::string Capacity(const PlanConfig& config, size_t tier, const char* absent) {
  if (!config.HasTier(tier)) return absent;
  return config.Finite(tier) ? absl::StrCat(config.capacity_tokens[tier]) : "inf";
}

std::string Bytes(const PlanResult& r, size_t tier) {
  if (!r.config.Finite(tier)) return "-";
  return absl::StrFormat("%.1f GiB", Uint128ToDouble(r.capacity_bytes[tier]) / (1024.0 * 1024 * 1024));
}

std::string Percent(double ratio) { return absl::StrFormat("%.2f%%", 100 * ratio); }

// The seconds columns: unknown ("-") when no hit had both a reload and a recompute estimate.
std::string SecondsColumns(const PlanTotals& t) {
  if (t.compared == 0) return absl::StrFormat("%12s %12s %10s", "-", "-", "-");
  return absl::StrFormat("%12.3f %12.3f %10d", t.reload_seconds, t.recompute_seconds, t.cheaper_recomputed);
}

constexpr char kSecondsHeader[] = "    reload s  recompute s  cheaper rc";

void PrintByTier(std::ostream& out, const PlanResult& r) {
  out << absl::StrFormat("\nby record tier, device %s tokens, host %s, disk %s:\n", Capacity(r.config, 0, "-"),
                         Capacity(r.config, 1, "-"), Capacity(r.config, 2, "-"));
  out << absl::StrFormat("  %-7s %9s %9s %10s %10s %10s%s\n", "tier", "requests", "hits", "token hit", "attention",
                         "prefill", kSecondsHeader);
  for (int tier = 0; tier <= kTierCount; ++tier) {
    const bool total = tier == kTierCount;
    const PlanTotals& t = total ? r.total : r.by_tier[tier];
    if (!total && t.requests == 0) continue;
    out << absl::StrFormat("  %-7s %9d %9d %10s %10s %10s %s\n", total ? "total" : TierLabel(static_cast<Tier>(tier)),
                           t.requests, t.hit_requests, Percent(t.TokenHitRatio()), Percent(t.AttentionAvoided()),
                           Percent(t.PrefillAvoided()), SecondsColumns(t));
  }
  out << "  matched tokens served by";
  for (size_t t = 0; t < kPlanTierCount; ++t) {
    if (r.config.HasTier(t)) {
      out << " " << TierLabel(kPlanTiers[t]) << " " << Uint128ToString(r.matched_tokens_from[t]);
    }
  }
  out << "\n";
}

}  // namespace

std::string DescribeContext(const Profile& profile, const std::vector<TraceRequest>& trace, const PlanResult& r) {
  const BeyondContext& b = r.beyond_context;
  if (!r.context_tokens) {
    int64_t longest = 0;
    for (const TraceRequest& request : trace) longest = std::max(longest, request.input_length);
    return absl::StrFormat("context: not stated for %s (the longest prompt is %d tokens); --context-tokens N leaves "
                           "out the requests an engine of that context refuses", profile.name(), longest);
  }
  if (b.requests == 0) return absl::StrFormat("context: %d tokens; every prompt fits", *r.context_tokens);
  return absl::StrFormat("context: %d tokens; %d requests (%.1f%%, %s prompt tokens) exceed it (a prompt needs "
                         "room for one output token), the longest %d tokens, the first at line %d: an engine refuses "
                         "them, so they are not planned", *r.context_tokens, b.requests,
                         100.0 * static_cast<double>(b.requests) / static_cast<double>(trace.size()),
                         Uint128ToString(b.prompt_tokens), b.longest_prompt_tokens, b.first_line);
}

void PrintPlanText(std::ostream& out, const Profile& profile, const std::vector<TraceRequest>& trace,
                   const std::vector<PlanResult>& results) {
  const PlanTotals& first = results.front().total;
  out << absl::StrFormat("%d requests planned, %s prompt tokens, over %.1f s; model %s, blocks of %d tokens\n",
                         first.requests, Uint128ToString(first.prompt_tokens),
                         static_cast<double>(trace.back().timestamp_ms - trace.front().timestamp_ms) / 1000.0,
                         profile.name(), results.front().config.block_tokens);
  out << DescribeContext(profile, trace, results.front()) << "\n";
  out << "token hit: logical match / prompt tokens; attention and prefill: FLOPs avoided at the reused boundary\n\n";
  out << absl::StrFormat("%14s %11s %12s %12s %10s %10s %10s%s\n", "device tokens", "device KV", "host tokens",
                         "disk tokens", "token hit", "attention", "prefill", kSecondsHeader);
  for (const PlanResult& r : results) {
    out << absl::StrFormat("%14s %11s %12s %12s %10s %10s %10s %s\n", Capacity(r.config, 0, "-"), Bytes(r, 0),
                           Capacity(r.config, 1, "-"), Capacity(r.config, 2, "-"), Percent(r.total.TokenHitRatio()),
                           Percent(r.total.AttentionAvoided()), Percent(r.total.PrefillAvoided()),
                           SecondsColumns(r.total));
  }
  for (const PlanResult& r : results) PrintByTier(out, r);
}

void PrintPlanCsv(std::ostream& out, const std::vector<PlanResult>& results) {
  out << "device_capacity_tokens,host_capacity_tokens,disk_capacity_tokens,"
         "device_capacity_bytes,host_capacity_bytes,disk_capacity_bytes,tier";
  for (const PlanColumn& column : PlanTotalsColumns()) out << "," << column.name;
  out << "\n";
  for (const PlanResult& r : results) {
    std::string prefix;
    for (size_t t = 0; t < kPlanTierCount; ++t) absl::StrAppend(&prefix, Capacity(r.config, t, ""), ",");
    for (size_t t = 0; t < kPlanTierCount; ++t) {
      absl::StrAppend(&prefix, r.config.Finite(t) ? Uint128ToString(r.capacity_bytes[t]) : "", ",");
    }
    for (int tier = 0; tier <= kTierCount; ++tier) {
      const bool total = tier == kTierCount;
      const PlanTotals& totals = total ? r.total : r.by_tier[tier];
      if (!total && totals.requests == 0) continue;
      out << prefix << (total ? "total" : TierLabel(static_cast<Tier>(tier)));
      for (const PlanColumn& column : PlanTotalsColumns()) out << "," << column.value(totals);
      out << "\n";
    }
  }
}

}  // namespace kvledger::cli
