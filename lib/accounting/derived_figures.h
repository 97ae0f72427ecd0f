// Derive(): every figure kvledger computes from one validated record and its model's profile
// (docs/cost-model.md). Pure, deterministic, thread-safe.
#ifndef KVLEDGER_LIB_ACCOUNTING_DERIVED_FIGURES_H_
#define KVLEDGER_LIB_ACCOUNTING_DERIVED_FIGURES_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "lib/base/enum_table.h"
#include "lib/accounting/compute_time.h"
#include "lib/accounting/record_facts.h"
#include "lib/cost_model/exact_int.h"
#include "lib/profiles/profile.h"

namespace kvledger {

// The three boundaries avoided work is reported at (the `boundary` label).
enum class Boundary : uint8_t { kLogical = 0, kRecoverable = 1, kReused = 2 };
inline constexpr EnumTable<Boundary, 3> kBoundaryLabels = {
    {{Boundary::kLogical, "logical"}, {Boundary::kRecoverable, "recoverable"}, {Boundary::kReused, "reused"}}};
static_assert(IsDense(kBoundaryLabels));
inline constexpr int kBoundaryCount = static_cast<int>(kBoundaryLabels.size());
inline constexpr std::array kAllBoundaries = ValuesOf(kBoundaryLabels);
inline const char* BoundaryLabel(Boundary boundary) { return LabelOf(kBoundaryLabels, boundary, "unknown"); }

enum class BoundarySourceKind : uint8_t { kEngine = 1, kStateBoundaries = 2, kModel = 3 };

struct GroupFigure {
  const LayerGroupShape* group = nullptr;
  uint64_t modelled_boundary_tokens = 0;
  std::optional<int64_t> reported_boundary_tokens;
  Uint128 attention_baseline_flops = 0;
  Uint128 attention_avoided_flops = 0;  // at the reused boundary
};

// Where a TTFT went; rest = TTFT - the parts, never negative. Summed in nanounits (exact).
struct TtftParts {
  Uint128 queue = 0;
  Uint128 reload = 0;
  Uint128 suffix_prefill = 0;
  Uint128 rest = 0;
};

struct WholeRequest {
  std::optional<double> queue_seconds;  // as reported
  std::optional<uint64_t> output_tokens;
  std::optional<double> decode_seconds;
  // The reload the record paid: reload_seconds, or 0 when nothing was matched; absent otherwise.
  std::optional<double> reload_paid_seconds;
  // The part of it the TTFT holds (whole_request.cc: suffix prefill first, then the wait, then the
  // reload): TTFT, suffix prefill and reload paid known.
  std::optional<Uint128> reload_charged_nanounits;
  // Queue, reload, suffix prefill and TTFT all known: the parts as charged to the TTFT (they sum to
  // it exactly), and by how much the parts as reported exceeded it (0 when they fit).
  std::optional<TtftParts> ttft_parts;
  std::optional<Uint128> ttft_overlap_nanounits;
  // The suffix pass (measured, else modelled) + the estimated recompute of the reused prefix.
  std::optional<double> estimated_full_prefill_seconds;
  // h with the wait: (queue + reload as charged) / full prefill, for records with ttft_parts.
  std::optional<double> overhead_with_wait;
  // TTFT - reload charged + estimated recompute: TTFT, suffix, estimate and reload paid known.
  std::optional<double> ttft_without_reuse_seconds;
  std::optional<Uint128> ttft_without_reuse_nanounits;  // the same, as counted (the double is made from it)
  std::optional<double> time_per_output_token_seconds;  // decode_seconds / (output_tokens - 1)
  // TTFT + decode; within it the prefill as served (reload charged + suffix prefill); and the same
  // request without reuse (TTFT - reload charged + estimate + decode) with its prefill (suffix +
  // estimate). Each share lies in [0, 1].
  // Each is computed once, in the nanounits the counters add; the seconds are made from them.
  std::optional<double> e2e_seconds;
  std::optional<double> e2e_prefill_seconds;
  std::optional<double> e2e_without_reuse_seconds;
  std::optional<double> e2e_without_reuse_prefill_seconds;
  std::optional<Uint128> e2e_nanounits, e2e_prefill_nanounits, e2e_without_reuse_nanounits,
      e2e_without_reuse_prefill_nanounits;
  std::optional<double> kv_byte_seconds;  // Little's law, §12
};

struct RecordFigures {
  const Profile* profile = nullptr;
  Tier tier = Tier::kNone;
  uint64_t prompt_tokens = 0;
  uint64_t logical_match_tokens = 0;
  uint64_t recoverable_tokens = 0;
  uint64_t reused_tokens = 0;
  BoundarySourceKind recoverable_source = BoundarySourceKind::kModel;
  uint64_t modelled_recoverable_tokens = 0;
  bool model_disagrees = false;
  uint64_t recompute_alignment_tokens = 0;  // logical_match - recoverable
  uint64_t recompute_restore_tokens = 0;    // recoverable - reused

  Uint128 attention_baseline_flops = 0;
  std::array<Uint128, kBoundaryCount> attention_avoided_flops{};
  Uint128 prefill_baseline_flops = 0;
  std::array<Uint128, kBoundaryCount> prefill_avoided_flops{};
  Uint128 reused_bytes = 0;

  // docs/cost-model.md §8: the marginal seconds of the reused prefix's FLOPs under the compute-time
  // model (0 for a miss). Absent when there is no model: no ready live fit, no profile throughput and
  // (offline) no record above the floor.
  std::optional<double> estimated_recompute_seconds;
  Basis estimate_basis = Basis::kNone;  // where the estimate's model came from
  // With a full-prefill estimate: the measured suffix prefill seconds, else the model's pass.
  double suffix_prefill_seconds_used = 0;
  // An estimate and a suffix time exist and reload_seconds was measured: the record takes part in
  // the reload-versus-recompute comparison (and its counters).
  bool reload_compared = false;
  bool reload_slower_than_recompute = false;  // only when reload_compared
  // h and 1/(R_block + h); absent unless reload_compared.
  std::optional<double> overhead_fraction;
  std::optional<double> e2e_speedup;

  // As reported; unset = not measured.
  std::optional<double> reload_seconds;
  std::optional<double> suffix_prefill_seconds;
  std::optional<double> ttft_seconds;

  // A router's prediction (docs/cost-model.md §11): all 0 without one.
  bool has_prediction = false;
  uint64_t predicted_match_tokens = 0;
  uint64_t prediction_realised_tokens = 0;  // min(predicted, logical match)
  uint64_t prediction_over_tokens = 0;      // predicted - realised
  uint64_t prediction_under_tokens = 0;     // logical match - realised

  // The whole request (docs/cost-model.md §12): each figure absent when an input it needs is.
  WholeRequest whole;

  absl::InlinedVector<GroupFigure, 4> groups;  // no allocation for up to 4 groups

  double Alpha(uint64_t tokens) const {
    return static_cast<double>(tokens) / static_cast<double>(prompt_tokens);
  }
  // FLOPs reuse avoided at the reused boundary, and the prefill FLOPs left to compute (the suffix):
  // the one definition the recompute estimate, the live compute rate and Advise all use.
  Uint128 ReusedAttentionFlops() const { return attention_avoided_flops[static_cast<size_t>(Boundary::kReused)]; }
  Uint128 ReusedPrefillFlops() const { return prefill_avoided_flops[static_cast<size_t>(Boundary::kReused)]; }
  Uint128 RemainingPrefillFlops() const { return prefill_baseline_flops - ReusedPrefillFlops(); }
  // The prefill as one pass without reuse, and the suffix's pass after it: what the compute-time
  // model costs (compute_time.h).
  PassFlops FullPass() const {
    return {prompt_tokens, Uint128ToDouble(prefill_baseline_flops), Uint128ToDouble(attention_baseline_flops)};
  }
  PassFlops SuffixPass() const {
    return {prompt_tokens - reused_tokens, Uint128ToDouble(RemainingPrefillFlops()),
            Uint128ToDouble(attention_baseline_flops - ReusedAttentionFlops())};
  }
  // Fractions of the baseline left after reuse up to the reused boundary.
  double AttentionRemaining() const;
  double PrefillRemaining() const;
  // Attention share beta of the full prefill.
  double AttentionShare() const;
};

// `facts` must have passed ValidateFields and ValidateAgainstProfile for `profile`. `source` says
// what the seconds estimates may be made from (by default: the profile's throughput only).
RecordFigures Derive(const RecordFacts& facts, const Profile& profile, const EstimateSource& source = {});

// Fills d.whole from the record's whole-request fields (docs/cost-model.md §12); Derive's last step,
// after the boundaries, the work and the recompute estimate. In whole_request.cc.
void DeriveWholeRequest(const RecordFacts& facts, const ModelShape& shape, RecordFigures& d);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_ACCOUNTING_DERIVED_FIGURES_H_
