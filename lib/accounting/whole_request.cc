// The whole request (docs/cost-model.md §12): where the TTFT went, h with the scheduling wait, the TTFT
// bought by reuse with queueing held fixed, decode, the cache's share of the end-to-end latency and
// the KV bytes the request held. Every figure needs all of its inputs; none is made from a missing one.
#include <optional>

#include "lib/accounting/derived_figures.h"
#include "lib/accounting/figure_schema.h"
#include "lib/cost_model/model_shape.h"

namespace kvledger {
namespace {

// queue + reload + suffix prefill against the TTFT, decided in integer nanounits so that the rest is
// exact and never negative.
void DecomposeTtft(const RecordFacts& facts, RecordFigures& d) {
  WholeRequest& w = d.whole;
  if (!facts.ttft_seconds || !facts.queue_seconds || !facts.suffix_prefill_seconds || !w.reload_paid_seconds) return;
  TtftParts parts;
  parts.queue = ToNanoUnits(*facts.queue_seconds);
  parts.reload = ToNanoUnits(*w.reload_paid_seconds);
  parts.suffix_prefill = ToNanoUnits(*facts.suffix_prefill_seconds);
  const Uint128 ttft = ToNanoUnits(*facts.ttft_seconds);
  const Uint128 sum = parts.queue + parts.reload + parts.suffix_prefill;
  if (sum > ttft) {
    w.ttft_overlap_nanounits = sum - ttft;
    return;
  }
  w.ttft_overlap_nanounits = 0;
  parts.rest = ttft - sum;
  w.ttft_parts = parts;
}

// KV bytes x seconds held (Little's law): the reused prefix from arrival to the first token, the
// whole prompt through decode, and the output's KV growing linearly through decode.
double KvByteSeconds(const ModelShape& shape, const RecordFigures& d, double ttft, uint64_t output_tokens,
                     double decode) {
  const Uint128 prompt_bytes = CacheBytes(shape, d.prompt_tokens);
  const Uint128 final_bytes = CacheBytes(shape, d.prompt_tokens + output_tokens - 1);
  return Uint128ToDouble(CacheBytes(shape, d.reused_tokens)) * ttft + Uint128ToDouble(prompt_bytes) * decode +
         Uint128ToDouble(final_bytes - prompt_bytes) * decode / 2;
}

}  // namespace

void DeriveWholeRequest(const RecordFacts& facts, const ModelShape& shape, RecordFigures& d) {
  WholeRequest& w = d.whole;
  w.queue_seconds = facts.queue_seconds;
  if (facts.output_tokens) w.output_tokens = static_cast<uint64_t>(*facts.output_tokens);
  w.decode_seconds = facts.decode_seconds;
  // Nothing reused, nothing reloaded: such a record paid no reload whether or not it reported one.
  w.reload_paid_seconds = facts.reload_seconds;
  if (!w.reload_paid_seconds && d.reused_tokens == 0) w.reload_paid_seconds = 0.0;
  DecomposeTtft(facts, d);

  const std::optional<double>& estimate = d.estimated_recompute_seconds;
  const std::optional<double>& full = w.estimated_full_prefill_seconds;
  if (full && *full > 0 && w.reload_paid_seconds && facts.queue_seconds) {
    w.overhead_with_wait = (*w.reload_paid_seconds + *facts.queue_seconds) / *full;
  }
  if (estimate && w.reload_paid_seconds && facts.ttft_seconds && *facts.ttft_seconds > 0 &&
      ToNanoUnits(*w.reload_paid_seconds) <= ToNanoUnits(*facts.ttft_seconds)) {
    w.ttft_without_reuse_seconds = *facts.ttft_seconds - *w.reload_paid_seconds + *estimate;
  }
  if (w.decode_seconds && w.output_tokens && *w.output_tokens >= 2) {
    w.time_per_output_token_seconds = *w.decode_seconds / static_cast<double>(*w.output_tokens - 1);
  }
  if (!facts.ttft_seconds || !w.decode_seconds) return;
  w.e2e_seconds = *facts.ttft_seconds + *w.decode_seconds;
  if (estimate && w.reload_paid_seconds && facts.suffix_prefill_seconds) {
    w.e2e_cache_seconds = *w.reload_paid_seconds + *facts.suffix_prefill_seconds + *estimate;
  }
  w.kv_byte_seconds = KvByteSeconds(shape, d, *facts.ttft_seconds, *w.output_tokens, *w.decode_seconds);
}

}  // namespace kvledger
