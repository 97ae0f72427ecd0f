// The record path: validate -> resolve the model -> derive -> aggregate (docs/architecture.md).
// The same Evaluate() serves the server's Explain, the CLI's offline explain and the tests.
#ifndef KVLEDGER_LIB_ACCOUNTING_LEDGER_H_
#define KVLEDGER_LIB_ACCOUNTING_LEDGER_H_

#include <utility>
#include <vector>

#include "lib/accounting/aggregator.h"
#include "lib/accounting/derived_figures.h"
#include "lib/accounting/live_rates.h"
#include "lib/accounting/record_facts.h"
#include "lib/accounting/record_observer.h"
#include "lib/accounting/record_sink.h"
#include "lib/accounting/rejection.h"
#include "lib/profiles/model_registry.h"

namespace kvledger {

// Validates `facts` and derives its figures without recording anything or claiming a label slot;
// estimates from `source` (docs/cost-model.md §8).
Checked<RecordFigures> Evaluate(const RecordFacts& facts, const ModelRegistry& registry,
                                const EstimateSource& source = {});
// The same, with the model already resolved (the record path resolves once).
Checked<RecordFigures> Evaluate(const RecordFacts& facts, const absl::StatusOr<Resolution>& model,
                                const EstimateSource& source = {});
// The live compute-time fit of a resolved model, when `rates` has one ready: what a record of that
// model, and the server's Explain of one, is estimated from. Nothing for a model without its own
// label slot.
EstimateSource LiveEstimateSource(const absl::StatusOr<Resolution>& model, const LiveRates* rates);
// What offline explain (one record, no server) estimates from: the record alone above its floor,
// said in the figures' basis. A server never uses it: its records and its Explain estimate alike.
inline EstimateSource OfflineEstimateSource() { return EstimateSource{std::nullopt, /*record_alone=*/true}; }

// Whether a record of a name without a label slot claims one (the exported ledger) or is counted
// under "other" without claiming (a ledger of synthetic records, which must not take a slot that
// real traffic would show under).
enum class LabelClaims { kClaim, kNever };

// Accounts records into an Aggregator and hands each accepted one, unless folded into "other", to
// `rates` (which its estimates come from) and then to every other observer, in order. Thread-safe; the
// registry, aggregator, rates and observers must outlive it.
class Ledger final : public RecordSink {
 public:
  Ledger(ModelRegistry& registry, Aggregator& aggregator, LiveRates* rates = nullptr,
         LabelClaims claims = LabelClaims::kClaim, std::vector<RecordObserver*> observers = {})
      : registry_(registry), aggregator_(aggregator), rates_(rates), claims_(claims),
        observers_(std::move(observers)) {
    if (rates_ != nullptr) observers_.insert(observers_.begin(), rates_);
  }

  // Counts an accepted record, or counts the rejection by reason and returns it. A record is
  // either counted once or rejected; never both, never partly.
  Verdict Record(const RecordFacts& facts) override;


 private:
  ModelRegistry& registry_;
  Aggregator& aggregator_;
  LiveRates* const rates_;
  const LabelClaims claims_;
  std::vector<RecordObserver*> observers_;
};

}  // namespace kvledger

#endif  // KVLEDGER_LIB_ACCOUNTING_LEDGER_H_
