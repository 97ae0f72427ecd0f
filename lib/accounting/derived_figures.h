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
#include "lib/accounting/record_facts.h"
#include "lib/cost_model/exact_int.h"
#include "lib/profiles/profile.h"

namespace kvledger {

// The three boundaries avoided work is reported at (the `boundary` label).
enum class Boundary : uint8_t { kLogical = 0, kRecoverable = 1, kReused = 2 };
inline constexpr int kBoundaryCount = 3;
const char* BoundaryLabel(Boundary boundary);  // "logical", "recoverable", "reused"

enum class BoundarySourceKind : uint8_t { kEngine = 1, kStateBoundaries = 2, kModel = 3 };

struct GroupFigure {
  const LayerGroupShape* group = nullptr;
  uint64_t modelled_boundary_tokens = 0;
  std::optional<int64_t> reported_boundary_tokens;
  Uint128 attention_baseline_flops = 0;
  Uint128 attention_avoided_flops = 0;  // at the reused boundary
};

struct DerivedFigures {
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

  // docs/cost-model.md §8. Absent when there is no rate: neither a profile throughput nor a measured
  // suffix prefill time (> 0) for remaining work.
  std::optional<double> estimated_recompute_seconds;
  // With an estimate: the measured suffix prefill seconds, else the profile's estimate of them.
  double suffix_prefill_seconds_used = 0;
  // An estimate exists and reload_seconds was measured: the record takes part in the
  // reload-versus-recompute comparison (and its counters).
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

  absl::InlinedVector<GroupFigure, 4> groups;  // no allocation for up to 4 groups

  double Alpha(uint64_t tokens) const {
    return static_cast<double>(tokens) / static_cast<double>(prompt_tokens);
  }
  // Fractions of the baseline left after reuse up to the reused boundary.
  double AttentionRemaining() const;
  double PrefillRemaining() const;
  // Attention share beta of the full prefill.
  double AttentionShare() const;
};

// `facts` must have passed ValidateFields and ValidateAgainstProfile for `profile`.
DerivedFigures Derive(const RecordFacts& facts, const Profile& profile);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_ACCOUNTING_DERIVED_FIGURES_H_
