// The record path: validate -> resolve the model -> derive -> aggregate (docs/architecture.md).
// The same Evaluate() serves the server's Explain, the CLI's offline explain and the tests.
#ifndef KVLEDGER_LIB_ACCOUNTING_LEDGER_H_
#define KVLEDGER_LIB_ACCOUNTING_LEDGER_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/accounting/aggregator.h"
#include "lib/accounting/derived_figures.h"
#include "lib/accounting/record_facts.h"
#include "lib/profiles/model_registry.h"

namespace kvledger {

// Validates `facts` and derives its figures without recording anything or claiming a label slot.
// Errors are Reject() statuses (INVALID_ARGUMENT with a reason).
absl::StatusOr<DerivedFigures> Evaluate(const RecordFacts& facts, const ModelRegistry& registry);

// Accounts records into an Aggregator. Thread-safe; the registry and aggregator must outlive it.
class Ledger {
 public:
  Ledger(ModelRegistry& registry, Aggregator& aggregator)
      : registry_(registry), aggregator_(aggregator) {}

  // Counts an accepted record, or counts the rejection by reason and returns it. A record is
  // either counted once or rejected; never both, never partly.
  absl::Status Record(const RecordFacts& facts);

  const ModelRegistry& registry() const { return registry_; }

 private:
  ModelRegistry& registry_;
  Aggregator& aggregator_;
};

}  // namespace kvledger

#endif  // KVLEDGER_LIB_ACCOUNTING_LEDGER_H_
