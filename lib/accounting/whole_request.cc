// The whole request (docs/cost-model.md §12): where the TTFT went, h with the scheduling wait, the TTFT
// bought by reuse with queueing held fixed, decode, the prefill's share of the end-to-end latency and
// the KV bytes the request held. Every figure needs all of its inputs; none is made from a missing one.
//
// One rule for parts that overlap (an asynchronous reload during the wait): a TTFT holds the suffix
// prefill first, then the wait, then the reload, each charged only what is left of the TTFT; no
// figure counts more wait and reload than TTFT - suffix prefill.
#include <algorithm>
#include <cmath>
#include <optional>

#include "lib/accounting/derived_figures.h"
#include "lib/accounting/figure_schema.h"
#include "lib/cost_model/model_shape.h"

namespace kvledger {
namespace {

// The parts charged to the TTFT (the rule above), in integer nanounits so that the rest is exact and
// never negative; an unknown queue is charged nothing. Needs the TTFT, the suffix prefill and the
// reload paid.
void ChargeTtft(const RecordFacts& facts, RecordFigures& d) {
  WholeRequest& w = d.whole;
  if (!facts.ttft_seconds || !facts.suffix_prefill_seconds || !w.reload_paid_seconds) return;
  const Uint128 ttft = ToNanoUnits(*facts.ttft_seconds);
  TtftParts parts;
  parts.suffix_prefill = std::min(ToNanoUnits(*facts.suffix_prefill_seconds), ttft);
  const Uint128 queue = facts.queue_seconds ? ToNanoUnits(*facts.queue_seconds) : 0;
  parts.queue = std::min(queue, ttft - parts.suffix_prefill);
  const Uint128 reload = ToNanoUnits(*w.reload_paid_seconds);
  parts.reload = std::min(reload, ttft - parts.suffix_prefill - parts.queue);
  parts.rest = ttft - parts.suffix_prefill - parts.queue - parts.reload;
  w.reload_charged_nanounits = parts.reload;
  if (!facts.queue_seconds) return;
  const Uint128 sum = queue + reload + ToNanoUnits(*facts.suffix_prefill_seconds);
  w.ttft_overlap_nanounits = sum > ttft ? sum - ttft : 0;
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

double Seconds(Uint128 nanounits) { return Uint128ToDouble(nanounits) / kNanoUnitsPerUnit; }

// The end-to-end latency, and the prefill's share of it as served and (with an estimate) without
// reuse: each once, in nanounits, and its seconds from that.
void DeriveShares(RecordFigures& d) {
  WholeRequest& w = d.whole;
  w.e2e_nanounits = ToNanoUnits(*d.ttft_seconds) + ToNanoUnits(*w.decode_seconds);
  w.e2e_seconds = Seconds(*w.e2e_nanounits);
  if (!w.reload_charged_nanounits) return;
  const Uint128 reload = ChargedReload(d), suffix = ChargedSuffix(d);
  w.e2e_prefill_nanounits = reload + suffix;
  w.e2e_prefill_seconds = Seconds(*w.e2e_prefill_nanounits);
  if (!d.estimated_recompute_seconds) return;
  const Uint128 estimate = ToNanoUnits(*d.estimated_recompute_seconds);
  w.e2e_without_reuse_nanounits = *w.e2e_nanounits - reload + estimate;
  w.e2e_without_reuse_seconds = Seconds(*w.e2e_without_reuse_nanounits);
  w.e2e_without_reuse_prefill_nanounits = suffix + estimate;
  w.e2e_without_reuse_prefill_seconds = Seconds(*w.e2e_without_reuse_prefill_nanounits);
}

}  // namespace

void DeriveWholeRequest(const RecordFacts& facts, const ModelShape& shape, RecordFigures& d) {
  WholeRequest& w = d.whole;
  w.queue_seconds = facts.queue_seconds;
  if (facts.output_tokens) w.output_tokens = static_cast<uint64_t>(*facts.output_tokens);
  w.decode_seconds = facts.decode_seconds;
  // Nothing matched, nothing reloaded: such a record paid no reload whether or not it reported one.
  // A match that restored nothing may still have paid for a failed reload: unknown unless measured.
  w.reload_paid_seconds = facts.reload_seconds;
  if (!w.reload_paid_seconds && d.logical_match_tokens == 0) w.reload_paid_seconds = 0.0;
  ChargeTtft(facts, d);

  const std::optional<double>& estimate = d.estimated_recompute_seconds;
  const std::optional<double>& full = w.estimated_full_prefill_seconds;
  if (full && *full > 0 && w.ttft_parts) {
    const double h = Seconds(w.ttft_parts->queue + w.ttft_parts->reload) / *full;
    if (std::isfinite(h)) w.overhead_with_wait = h;
  }
  if (estimate && w.reload_charged_nanounits && *facts.ttft_seconds > 0) {
    w.ttft_without_reuse_nanounits = ToNanoUnits(*facts.ttft_seconds) - ChargedReload(d) + ToNanoUnits(*estimate);
    w.ttft_without_reuse_seconds = Seconds(*w.ttft_without_reuse_nanounits);
  }
  if (w.decode_seconds && w.output_tokens && *w.output_tokens >= 2) {
    w.time_per_output_token_seconds = *w.decode_seconds / static_cast<double>(*w.output_tokens - 1);
  }
  if (!facts.ttft_seconds || !w.decode_seconds) return;
  DeriveShares(d);
  w.kv_byte_seconds = KvByteSeconds(shape, d, *facts.ttft_seconds, *w.output_tokens, *w.decode_seconds);
}

}  // namespace kvledger
