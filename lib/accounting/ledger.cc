#include "lib/accounting/ledger.h"

#include <string>

#include "lib/accounting/rejection.h"
#include "lib/accounting/validation.h"

namespace kvledger {
Checked<DerivedFigures> Evaluate(const RecordFacts& facts, const ModelRegistry& registry) {
  if (Verdict v = ValidateFields(facts); !v.ok()) return v;
  auto profile = registry.ProfileFor(facts.model);
  if (!profile.ok()) return Rejection{RejectReason::kUnknownModel, std::string(profile.status().message())};
  if (Verdict v = ValidateAgainstProfile(facts, **profile); !v.ok()) return v;
  return Derive(facts, **profile);
}

Verdict Ledger::Record(const RecordFacts& facts) {
  auto figures = Evaluate(facts, registry_);
  if (!figures.ok()) {
    aggregator_.AddRejection(figures.rejection().reason);
    return figures.verdict();
  }
  const LabelSlot label = registry_.ClaimLabel(facts.model, figures->profile);
  aggregator_.Add(label.slot, *figures, label.folded);
  return Verdict();
}

}  // namespace kvledger
