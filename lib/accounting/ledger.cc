#include "lib/accounting/ledger.h"

#include <string>

#include "lib/accounting/rejection.h"
#include "lib/accounting/validation.h"

namespace kvledger {
namespace {

absl::StatusOr<DerivedFigures> EvaluateWith(const RecordFacts& facts, const Profile* profile) {
  if (auto s = ValidateAgainstProfile(facts, *profile); !s.ok()) return s;
  return Derive(facts, *profile);
}

}  // namespace

absl::StatusOr<DerivedFigures> Evaluate(const RecordFacts& facts, const ModelRegistry& registry) {
  if (auto s = ValidateFields(facts); !s.ok()) return s;
  auto profile = registry.ProfileFor(facts.model);
  if (!profile.ok()) return Reject(RejectReason::kUnknownModel, std::string(profile.status().message()));
  return EvaluateWith(facts, *profile);
}

absl::Status Ledger::Record(const RecordFacts& facts) {
  absl::StatusOr<DerivedFigures> figures;
  ResolvedModel resolved;
  if (auto s = ValidateFields(facts); !s.ok()) {
    figures = s;
  } else if (auto r = registry_.Resolve(facts.model); !r.ok()) {
    figures = Reject(RejectReason::kUnknownModel, std::string(r.status().message()));
  } else {
    resolved = *r;
    figures = EvaluateWith(facts, resolved.profile);
  }
  if (!figures.ok()) {
    aggregator_.AddRejection(ReasonOf(figures.status()));
    return figures.status();
  }
  aggregator_.Add(resolved.label_slot, *figures, resolved.folded);
  return absl::OkStatus();
}

}  // namespace kvledger
