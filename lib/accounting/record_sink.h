// Where the service hands each record: the Ledger counts it; a benchmark baseline discards it. The
// service knows only this interface.
#ifndef KVLEDGER_LIB_ACCOUNTING_RECORD_SINK_H_
#define KVLEDGER_LIB_ACCOUNTING_RECORD_SINK_H_

#include "lib/accounting/record_facts.h"
#include "lib/accounting/rejection.h"

namespace kvledger {

class RecordSink {
 public:
  virtual ~RecordSink() = default;
  // Takes one record: accepted, or rejected with its reason. Thread-safe.
  virtual Verdict Record(const RecordFacts& facts) = 0;
};

}  // namespace kvledger

#endif  // KVLEDGER_LIB_ACCOUNTING_RECORD_SINK_H_
