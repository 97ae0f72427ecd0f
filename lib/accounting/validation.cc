#include "lib/accounting/validation.h"
#include "lib/base/quote.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/accounting/rejection.h"
#include "lib/cost_model/number_format.h"

namespace kvledger {
namespace {

// Every byte in '!'..'~': one unsigned comparison a byte, no early exit, so the loop vectorizes.
bool PrintableWithoutSpaces(absl::string_view s) {
  bool printable = true;
  for (char c : s) printable &= static_cast<unsigned char>(c - '!') <= static_cast<unsigned char>('~' - '!');
  return printable;
}

[[gnu::noinline, gnu::cold]] Verdict LatencyRejection(const char* field, double value, RejectReason reason) {
  return Verdict(reason, field, absl::StrCat(field, " = ", FormatDouble(value),
                                     ": must be finite, >= 0 and <= ", kMaxLatencySeconds, " seconds"));
}

// The check inline, the message apart: a record's latencies are checked on every record.
inline Verdict CheckLatency(const char* field, const std::optional<double>& seconds, RejectReason reason) {
  if (!seconds || (*seconds >= 0 && *seconds <= kMaxLatencySeconds)) return Verdict();  // NaN fails both
  return LatencyRejection(field, *seconds, reason);
}

// The whole-request fields (docs/cost-model.md §12).
Verdict ValidateWholeRequest(const RecordFacts& f) {
  if (auto s = CheckLatency("queue_seconds", f.queue_seconds, RejectReason::kInvalidQueueSeconds); !s.ok()) return s;
  if (f.queue_seconds && f.ttft_seconds && *f.queue_seconds > *f.ttft_seconds) {
    return Verdict(RejectReason::kInvalidQueueSeconds, "queue_seconds",
                   absl::StrCat("queue_seconds = ", FormatDouble(*f.queue_seconds), ": must be <= ttft_seconds = ",
                                FormatDouble(*f.ttft_seconds), " (the wait ends before the first token)"));
  }
  if (f.output_tokens && (*f.output_tokens < 1 || *f.output_tokens > kMaxPromptTokens)) {
    return Verdict(RejectReason::kInvalidOutputTokens, "output_tokens", absl::StrCat("output_tokens = ", *f.output_tokens,
                                                                    ": must be in [1, ", kMaxPromptTokens, "]"));
  }
  if (auto s = CheckLatency("decode_seconds", f.decode_seconds, RejectReason::kInvalidDecodeSeconds); !s.ok()) return s;
  if (f.decode_seconds && !f.output_tokens) {
    return Verdict(RejectReason::kInvalidDecodeSeconds, "decode_seconds",
                   absl::StrCat("decode_seconds = ", FormatDouble(*f.decode_seconds),
                                ": needs output_tokens (the time per output token is decode_seconds / "
                                "(output_tokens - 1))"));
  }
  if (f.decode_seconds && *f.decode_seconds > 0 && *f.output_tokens < 2) {
    return Verdict(RejectReason::kInvalidDecodeSeconds, "decode_seconds",
                   absl::StrCat("decode_seconds = ", FormatDouble(*f.decode_seconds),
                                ": must be 0 when output_tokens = ", *f.output_tokens,
                                " (one token has no time between the first and the last)"));
  }
  if (f.decode_seconds && *f.decode_seconds == 0 && *f.output_tokens >= 2) {
    return Verdict(RejectReason::kInvalidDecodeSeconds, "decode_seconds",
                   absl::StrCat("decode_seconds = 0: must be > 0 when output_tokens = ", *f.output_tokens,
                                " (", *f.output_tokens - 1, " tokens were decoded after the first)"));
  }
  return Verdict();
}

// The prefill latencies, then the whole request's.
Verdict ValidateLatencies(const RecordFacts& f) {
  if (auto s = CheckLatency("reload_seconds", f.reload_seconds, RejectReason::kInvalidReloadSeconds); !s.ok()) return s;
  if (auto s = CheckLatency("suffix_prefill_seconds", f.suffix_prefill_seconds,
                            RejectReason::kInvalidSuffixPrefillSeconds); !s.ok()) return s;
  if (auto s = CheckLatency("ttft_seconds", f.ttft_seconds, RejectReason::kInvalidTtftSeconds); !s.ok()) return s;
  return ValidateWholeRequest(f);
}

// recompute_tokens in [logical_match - recoverable (or 0), logical_match].
Verdict ValidateRecompute(const RecordFacts& f) {
  if (!f.recompute_tokens) return Verdict();
  const int64_t lo = f.recoverable_tokens ? f.logical_match_tokens - *f.recoverable_tokens : 0;
  if (*f.recompute_tokens >= lo && *f.recompute_tokens <= f.logical_match_tokens) return Verdict();
  const std::string lo_text =
      f.recoverable_tokens ? absl::StrCat("logical_match_tokens - recoverable_tokens = ", lo) : std::string("0");
  return Verdict(RejectReason::kInvalidRecomputeTokens, "recompute_tokens",
                 absl::StrCat("recompute_tokens = ", *f.recompute_tokens, ": must be in [", lo_text,
                              ", logical_match_tokens = ", f.logical_match_tokens,
                              "] (reused = logical_match - recompute may not exceed the recoverable boundary)"));
}

// A cache's reuse distances instead of ids, and the capacity they were measured against
// (docs/cost-model.md §14).
Verdict ValidateReuseDistances(const RecordFacts& f) {
  const size_t n = f.prefix_block_reuse_distances.size();
  const auto bad = [](std::string message) {
    return Verdict(RejectReason::kInvalidPrefixBlockReuseDistances, "prefix_block_reuse_distances", std::move(message));
  };
  const bool blocks_given = n > 0 || !f.prefix_block_ids.empty();
  if (f.cache_capacity_blocks && (*f.cache_capacity_blocks < 1 || *f.cache_capacity_blocks > kMaxCacheCapacityBlocks ||
                                  !blocks_given)) {
    return Verdict(RejectReason::kInvalidCacheCapacityBlocks, "cache_capacity_blocks",
                   absl::StrCat("cache_capacity_blocks = ", *f.cache_capacity_blocks,
                                blocks_given ? ": must be in [1, 2^40]"
                                             : ": needs prefix_block_ids or prefix_block_reuse_distances (the cache "
                                               "they were looked up or measured in)"));
  }
  if (n == 0) return Verdict();
  if (!f.prefix_block_ids.empty()) {
    return bad(absl::StrCat("prefix_block_reuse_distances: ", n, " given with ", f.prefix_block_ids.size(),
                            " prefix_block_ids: give one or the other"));
  }
  if (!f.block_tokens || !f.cache_capacity_blocks) {
    return bad(absl::StrCat("prefix_block_reuse_distances: ", n, " distances: need block_tokens and "
                            "cache_capacity_blocks"));
  }
  const auto blocks = static_cast<size_t>((f.prompt_tokens + *f.block_tokens - 1) / *f.block_tokens);
  if (n > std::min(blocks, kMaxPrefixBlockIds)) {
    return bad(absl::StrCat("prefix_block_reuse_distances: ", n, " distances: must be at most ", kMaxPrefixBlockIds,
                            " and at most the prompt's blocks, ceil(prompt_tokens = ", f.prompt_tokens,
                            " / block_tokens = ", *f.block_tokens, ") = ", blocks));
  }
  return Verdict();
}

// The output's blocks and the curves-only mark, which only make sense beside a prompt's blocks.
Verdict ValidateCurvesOnlyInputs(const RecordFacts& f) {
  const size_t outputs = f.output_block_ids.size();
  if (outputs > 0 && f.prefix_block_ids.empty()) {
    return Verdict(RejectReason::kInvalidOutputBlockIds, "output_block_ids",
                   absl::StrCat("output_block_ids: ", outputs, " ids: need prefix_block_ids (the prompt they follow)"));
  }
  if (outputs > kMaxPrefixBlockIds) {
    return Verdict(RejectReason::kInvalidOutputBlockIds, "output_block_ids",
                   absl::StrCat("output_block_ids: ", outputs, " ids: must be at most ", kMaxPrefixBlockIds));
  }
  if (f.curves_only && f.prefix_block_ids.empty() && f.prefix_block_reuse_distances.empty()) {
    return Verdict(RejectReason::kInvalidCurvesOnly, "curves_only",
                   "curves_only = true: needs prefix_block_ids (a record for the capacity curves only carries "
                   "its blocks)");
  }
  return Verdict();
}

// The capacity curves' inputs (docs/cost-model.md §14).
Verdict ValidateBlockIds(const RecordFacts& f) {
  if (f.cache_id.size() > kMaxCacheIdBytes || !PrintableWithoutSpaces(f.cache_id)) {
    return Verdict(RejectReason::kInvalidCacheId, "cache_id",
                   absl::StrCat("cache_id = ", Quoted(f.cache_id), ": must be at most ", kMaxCacheIdBytes,
                                " printable ASCII characters without spaces"));
  }
  if (f.block_tokens && (*f.block_tokens < 1 || *f.block_tokens > kMaxBlockTokens)) {
    return Verdict(RejectReason::kInvalidBlockTokens, "block_tokens",
                   absl::StrCat("block_tokens = ", *f.block_tokens, ": must be in [1, ", kMaxBlockTokens, "]"));
  }
  if (auto s = ValidateReuseDistances(f); !s.ok()) return s;
  if (auto s = ValidateCurvesOnlyInputs(f); !s.ok()) return s;
  const size_t ids = f.prefix_block_ids.size();
  if (ids == 0) return Verdict();
  if (!f.block_tokens) {
    return Verdict(RejectReason::kInvalidPrefixBlockIds, "prefix_block_ids",
                   absl::StrCat("prefix_block_ids: ", ids, " ids: need block_tokens (the tokens each id covers)"));
  }
  const auto blocks = static_cast<size_t>((f.prompt_tokens + *f.block_tokens - 1) / *f.block_tokens);
  if (ids > std::min(blocks, kMaxPrefixBlockIds)) {
    return Verdict(RejectReason::kInvalidPrefixBlockIds, "prefix_block_ids",
                   absl::StrCat("prefix_block_ids: ", ids, " ids: must be at most ", kMaxPrefixBlockIds,
                                " and at most the prompt's blocks, ceil(prompt_tokens = ", f.prompt_tokens,
                                " / block_tokens = ", *f.block_tokens, ") = ", blocks));
  }
  return Verdict();
}

}  // namespace

std::string ModelNameProblem(absl::string_view model, absl::string_view field) {
  if (!model.empty() && model.size() <= kMaxModelNameBytes && PrintableWithoutSpaces(model)) return {};
  return absl::StrCat(field, " = ", Quoted(model), ": must be 1-", kMaxModelNameBytes,
                      " printable ASCII characters without spaces");
}

Verdict ValidateFields(const RecordFacts& f) {
  if (f.request_id.size() > kMaxRequestIdBytes) {
    return Verdict(RejectReason::kInvalidRequestId, "request_id",
                  absl::StrCat("request_id = ", Quoted(f.request_id), " (", f.request_id.size(),
                               " bytes): must be at most ", kMaxRequestIdBytes, " bytes"));
  }
  if (std::string problem = ModelNameProblem(f.model); !problem.empty()) {
    return Verdict(RejectReason::kInvalidModel, "model", std::move(problem));
  }
  if (f.tier_value < 0 || f.tier_value >= kTierCount) {
    return Verdict(RejectReason::kInvalidTier, "tier",
                  absl::StrCat("tier = ", f.tier_value,
                               ": must be one of TIER_DEVICE (1), TIER_HOST (2), TIER_DISK (3), "
                               "TIER_REMOTE (4), TIER_MIXED (5), TIER_UNKNOWN (6), or TIER_UNSPECIFIED (0) "
                               "for a miss"));
  }
  if (f.prompt_tokens < 1 || f.prompt_tokens > kMaxPromptTokens) {
    return Verdict(RejectReason::kInvalidPromptTokens, "prompt_tokens",
                  absl::StrCat("prompt_tokens = ", f.prompt_tokens, ": must be in [1, ",
                               kMaxPromptTokens, "]"));
  }
  if (f.logical_match_tokens < 0 || f.logical_match_tokens > f.prompt_tokens) {
    return Verdict(RejectReason::kInvalidLogicalMatchTokens, "logical_match_tokens",
                  absl::StrCat("logical_match_tokens = ", f.logical_match_tokens,
                               ": must be in [0, prompt_tokens = ", f.prompt_tokens, "]"));
  }
  if (f.predicted_match_tokens &&
      (*f.predicted_match_tokens < 0 || *f.predicted_match_tokens > f.prompt_tokens)) {
    return Verdict(RejectReason::kInvalidPredictedMatchTokens, "predicted_match_tokens",
                  absl::StrCat("predicted_match_tokens = ", *f.predicted_match_tokens,
                               ": must be in [0, prompt_tokens = ", f.prompt_tokens, "]"));
  }
  if (f.tier_value == 0 && f.logical_match_tokens > 0) {
    return Verdict(RejectReason::kInvalidTier, "tier",
                  absl::StrCat("tier = TIER_UNSPECIFIED: must be set when logical_match_tokens > 0 "
                               "(logical_match_tokens = ", f.logical_match_tokens, ")"));
  }
  if (f.recoverable_tokens &&
      (*f.recoverable_tokens < 0 || *f.recoverable_tokens > f.logical_match_tokens)) {
    return Verdict(RejectReason::kInvalidRecoverableTokens, "recoverable_tokens",
                  absl::StrCat("recoverable_tokens = ", *f.recoverable_tokens,
                               ": must be in [0, logical_match_tokens = ", f.logical_match_tokens, "]"));
  }
  if (auto s = ValidateRecompute(f); !s.ok()) return s;
  if (auto s = ValidateLatencies(f); !s.ok()) return s;
  if (f.state_boundaries.size() > kMaxStateBoundaries) {
    return Verdict(RejectReason::kInvalidStateBoundaries, "state_boundaries",
                  absl::StrCat("state_boundaries: ", f.state_boundaries.size(),
                               " entries: must be at most ", kMaxStateBoundaries));
  }
  return ValidateBlockIds(f);
}

Verdict ValidateAgainstProfile(const RecordFacts& f, const Profile& profile) {
  if (f.state_boundaries.empty()) return Verdict();
  std::vector<bool> seen(profile.shape().groups.size(), false);
  int64_t minimum = f.logical_match_tokens;
  for (size_t i = 0; i < f.state_boundaries.size(); ++i) {
    const auto& b = f.state_boundaries[i];
    const int group = profile.GroupIndex(b.state_group);
    if (group < 0) {
      std::vector<std::string> names;
      for (const auto& g : profile.shape().groups) names.push_back(g.name);
      return Verdict(RejectReason::kInvalidStateBoundaries, "state_boundaries",
                    absl::StrCat("state_boundaries[", i, "].state_group = ", Quoted(b.state_group),
                                 ": must name a layer group of profile '", profile.name(),
                                 "' (", absl::StrJoin(names, ", "), ")"));
    }
    if (seen[group]) {
      return Verdict(RejectReason::kInvalidStateBoundaries, "state_boundaries",
                    absl::StrCat("state_boundaries[", i, "].state_group = ", Quoted(b.state_group),
                                 ": must appear only once"));
    }
    seen[group] = true;
    if (b.boundary_tokens < 0 || b.boundary_tokens > f.logical_match_tokens) {
      return Verdict(RejectReason::kInvalidStateBoundaries, "state_boundaries",
                    absl::StrCat("state_boundaries[", i, "].boundary_tokens = ", b.boundary_tokens,
                                 ": must be in [0, logical_match_tokens = ", f.logical_match_tokens, "]"));
    }
    minimum = std::min(minimum, b.boundary_tokens);
  }
  if (f.recoverable_tokens && *f.recoverable_tokens != minimum) {
    return Verdict(RejectReason::kInvalidStateBoundaries, "state_boundaries",
                  absl::StrCat("state_boundaries: minimum boundary_tokens = ", minimum,
                               ": must equal recoverable_tokens = ", *f.recoverable_tokens,
                               " (the recoverable boundary is the minimum over state groups)"));
  }
  if (f.recompute_tokens && *f.recompute_tokens < f.logical_match_tokens - minimum) {
    return Verdict(RejectReason::kInvalidRecomputeTokens, "recompute_tokens",
                  absl::StrCat("recompute_tokens = ", *f.recompute_tokens,
                               ": must be >= logical_match_tokens - min(state_boundaries) = ",
                               f.logical_match_tokens - minimum));
  }
  return Verdict();
}

}  // namespace kvledger
