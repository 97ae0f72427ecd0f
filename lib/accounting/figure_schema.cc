#include "lib/accounting/figure_schema.h"

namespace kvledger {

const char* CauseLabel(Cause cause) { return cause == Cause::kAlignment ? "alignment" : "restore"; }

}  // namespace kvledger
