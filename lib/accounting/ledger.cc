#include "lib/accounting/ledger.h"

#include <string>

#include "lib/accounting/rejection.h"
#include "lib/accounting/validation.h"

namespace kvledger {
absl::StatusOr<DerivedFigures> Evaluate(const RecordFacts& facts, const ModelRegistry& registry) {
  if (auto s = ValidateFields(facts); !s.ok()) return s;
  auto profile = registry.ProfileFor(facts.model);
  if (!profile.ok()) return Reject(RejectReason::kUnknownModel, std::string(profile.status().message()));
  if (auto s = ValidateAgainstProfile(facts, **profile); !s.ok()) return s;
  return Derive(facts, **profile);
}

absl::Status Ledger::Record(const RecordFacts& facts) {
  auto figures = Evaluate(facts, registry_);
  if (!figures.ok()) {
    aggregator_.AddRejection(ReasonOf(figures.status()));
    return figures.status();
  }
  const LabelSlot label = registry_.ClaimLabel(facts.model, figures->profile);
  aggregator_.Add(label.slot, *figures, label.folded);
  return absl::OkStatus();
}

}  // namespace kvledger
