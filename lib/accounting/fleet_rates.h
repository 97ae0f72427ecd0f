// Fleet rates (docs/operations.md, "Advise across replicas"): the live rates of every replica at
// once. Each replica exports the undecayed sums behind its live rates as counters (LiveRates::
// TotalsNow: kvledger_live_reload_sums_total and kvledger_live_compute_fit_sums_total); the recording
// rules of the group kvledger.fleet add their increase over a window over the replicas; a replica
// given --fleet_prometheus_url reads the added sums back and answers Advise from them. Sums add where
// rates do not: the fleet's bandwidth is Σ bytes / Σ seconds over every replica's samples in the
// window and its compute model the least-squares line through all of them, as if one replica had
// accounted every record. Counters over a window, not gauges of decayed sums: a restarted replica's
// earlier samples stay in the window (increase() sees the reset) and a replica that missed a scrape
// keeps its samples, so neither moves the answer. Keyed by model label, so a replica that never saw
// a model answers for it too. Window sums are extrapolated by increase(), so their counts need not
// be whole.
//
// Thread-safe: the table is replaced whole.
#ifndef KVLEDGER_LIB_ACCOUNTING_FLEET_RATES_H_
#define KVLEDGER_LIB_ACCOUNTING_FLEET_RATES_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "lib/accounting/live_rates.h"
#include "lib/base/mutex.h"

namespace kvledger {

// The ranges a fleet rate must fall in to be used: 1 B/s to 100 TB/s of reload bandwidth, 1 GFLOP/s
// to 10 EFLOP/s of prefill, at most an hour of fixed cost per pass. Anything outside is a broken or
// hostile Prometheus, not a fleet.
inline constexpr double kPlausibleBandwidth[2] = {1, 1e14};
inline constexpr double kPlausibleFlopsPerSecond[2] = {1e9, 1e19};
inline constexpr double kPlausiblePassSeconds = 3600;

// One sample of a Prometheus instant vector: its labels and value.
struct LabeledSample {
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;
  const std::string* Label(const std::string& name) const;  // null when absent
};

class FleetRates {
 public:
  struct Table {
    absl::flat_hash_map<std::pair<std::string, Tier>, DecayedRate> reload;  // (model, tier)
    absl::flat_hash_map<std::string, DecayedComputeFit> compute;             // model
  };
  // The table of the fleet rules' samples: `reload` labelled {model, tier, term} (kReloadParts),
  // `compute` labelled {model, term} (ComputeFitParts()). Samples of one series are added (e.g. one
  // per cluster label). A sample without those labels, with an unknown tier or term, or a value that
  // is negative or not finite, is an error naming it.
  // The rates the sums make must also be plausible (kPlausible*): a table from a Prometheus that
  // answers garbage is refused whole, naming the first rate outside its range.
  static absl::StatusOr<Table> FromSamples(const std::vector<LabeledSample>& reload,
                                           const std::vector<LabeledSample>& compute);

  // A table older than `max_age_seconds` (by `clock`) is not used: the replica answers from its own
  // rates again.
  explicit FleetRates(double max_age_seconds, LiveRates::Clock clock = MonotonicSeconds);

  void Update(Table table);
  // The fleet's rate or compute model (basis kFleet), or nothing: no fresh table, or no fleet
  // evidence for the model (and tier).
  std::optional<RateEvidence> ReloadBandwidth(const std::string& model, Tier tier) const;
  std::optional<ComputeTime> ComputeModel(const std::string& model) const;
  // Seconds since the last Update, none before the first.
  std::optional<double> AgeSeconds() const;

 private:
  std::shared_ptr<const Table> Fresh() const;

  const double max_age_;
  const LiveRates::Clock clock_;
  mutable Mutex mu_;
  std::shared_ptr<const Table> table_ ABSL_GUARDED_BY(mu_);
  double updated_at_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kvledger

#endif  // KVLEDGER_LIB_ACCOUNTING_FLEET_RATES_H_
