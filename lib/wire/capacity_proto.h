// The live capacity curves as the wire message the CapacityCurve RPC, GET /api/v1/capacity and
// `kvledger capacity` share (docs/cost-model.md §14).
#ifndef KVLEDGER_LIB_WIRE_CAPACITY_PROTO_H_
#define KVLEDGER_LIB_WIRE_CAPACITY_PROTO_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kvledger/v1/capacity.pb.h"
#include "lib/capacity/capacity_curves.h"
#include "lib/profiles/model_registry.h"

namespace kvledger {

// Every model's curve (or `model`'s alone), by model name. NOT_FOUND naming the model when it has
// none.
absl::StatusOr<v1::CapacityCurve> CurveToProto(const CapacityCurves& curves, const ModelRegistry& registry,
                                               absl::string_view model = {});

// A curve's second tiers (`sizes`, as its CapacityCurves was given them) into `out`'s tiers, with
// their tokens for `profile` (none when null).
void TiersToProto(const CapacityCurves::ModelCurve& curve, const std::vector<TierSize>& sizes, const Profile* profile,
                  v1::ModelCapacityCurve& out);

// The refusal of a server without a ladder, for the RPC and the HTTP API alike.
absl::Status NoCurvesStatus();

}  // namespace kvledger

#endif  // KVLEDGER_LIB_WIRE_CAPACITY_PROTO_H_
