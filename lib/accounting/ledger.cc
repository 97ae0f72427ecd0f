#include "lib/accounting/ledger.h"

#include <string>

#include "lib/accounting/rejection.h"
#include "lib/accounting/validation.h"

namespace kvledger {
Checked<RecordFigures> Evaluate(const RecordFacts& facts, const absl::StatusOr<Resolution>& model,
                                const EstimateSource& source) {
  if (Verdict v = ValidateFields(facts); !v.ok()) return v.rejection();
  if (!model.ok()) return Rejection{RejectReason::kUnknownModel, std::string(model.status().message()), "model"};
  if (Verdict v = ValidateAgainstProfile(facts, *model->profile); !v.ok()) return v.rejection();
  return Derive(facts, *model->profile, source);
}

Checked<RecordFigures> Evaluate(const RecordFacts& facts, const ModelRegistry& registry,
                                const EstimateSource& source) {
  return Evaluate(facts, registry.Resolve(facts.model), source);
}

EstimateSource LiveEstimateSource(const absl::StatusOr<Resolution>& model, const LiveRates* rates) {
  EstimateSource source;
  if (rates != nullptr && model.ok() && model->label && !model->label->folded) {
    source.live = rates->ComputeModel(model->label->slot);
  }
  return source;
}

Verdict Ledger::Record(const RecordFacts& facts) {
  const absl::StatusOr<Resolution> model = registry_.Resolve(facts.model);
  const EstimateSource source = LiveEstimateSource(model, rates_);
  auto figures = Evaluate(facts, model, source);
  if (!figures.ok()) {
    aggregator_.AddRejection(figures.rejection().reason);
    return figures.verdict();
  }
  const LabelSlot label = model->label                     ? *model->label
                          : claims_ == LabelClaims::kClaim ? registry_.ClaimLabel(facts.model, figures->profile)
                                                           : LabelSlot{registry_.slots().other_slot(), true};
  // A record rebuilt from a cache's events, or marked curves_only, feeds the capacity curves only.
  const bool curves_only = IsCurvesOnly(facts);
  if (!curves_only) aggregator_.Add(label.slot, *figures, label.folded);
  // Observers are per model: a record folded into "other" would mix models.
  if (!label.folded) {
    for (RecordObserver* observer : observers_) {
      if (!curves_only || observer->TakesCurvesOnly()) observer->Observe(label.slot, facts, *figures, source);
    }
  }
  return Verdict();
}

}  // namespace kvledger
