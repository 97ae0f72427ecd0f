// What the Ledger hands each accepted record to, besides its Aggregator (docs/architecture.md): the
// live rates and the capacity curves are two; a new consumer implements this and is added to the
// Ledger's list, changing no constructor.
#ifndef KVLEDGER_LIB_ACCOUNTING_RECORD_OBSERVER_H_
#define KVLEDGER_LIB_ACCOUNTING_RECORD_OBSERVER_H_

#include <cstdint>

#include "lib/accounting/derived_figures.h"
#include "lib/accounting/record_facts.h"

namespace kvledger {

class RecordObserver {
 public:
  virtual ~RecordObserver() = default;
  // An accepted record of the model with label slot `slot` (never one folded into "other": a consumer
  // per model would mix models), its figures, and the estimates they were derived from. Thread-safe.
  virtual void Observe(uint32_t slot, const RecordFacts& facts, const RecordFigures& figures,
                       const EstimateSource& source) = 0;
  // Whether it also takes records for the capacity curves only (IsCurvesOnly): only the capacity
  // curves do; no other figure counts them (they are not served requests, or repeat one).
  virtual bool TakesCurvesOnly() const { return false; }
};

}  // namespace kvledger

#endif  // KVLEDGER_LIB_ACCOUNTING_RECORD_OBSERVER_H_
