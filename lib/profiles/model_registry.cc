#include "lib/profiles/model_registry.h"
#include "lib/base/quote.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/profiles/builtin_catalog.h"

namespace kvledger {

std::optional<UnknownModelPolicy> UnknownModelPolicyFromName(absl::string_view name) {
  for (UnknownModelPolicy policy : {UnknownModelPolicy::kReject, UnknownModelPolicy::kGeneric}) {
    if (name == UnknownModelPolicyName(policy)) return policy;
  }
  return std::nullopt;
}

const char* UnknownModelPolicyName(UnknownModelPolicy policy) {
  return policy == UnknownModelPolicy::kGeneric ? "generic" : "reject";
}

ModelRegistry::ModelRegistry(const ProfileCatalog& catalog, uint32_t max_models, UnknownModelPolicy policy)
    : catalog_(catalog), policy_(policy), generic_(catalog.Find(kGenericProfileName)), labels_(catalog, max_models) {}

absl::StatusOr<Resolution> ModelRegistry::Resolve(absl::string_view model) const {
  if (const LabelSlots::Entry* entry = labels_.Find(model)) {  // a catalog profile, or a name with a slot
    return Resolution{entry->profile, LabelSlot{entry->slot, false}};
  }
  if (policy_ == UnknownModelPolicy::kGeneric && generic_ != nullptr) return Resolution{generic_, std::nullopt};
  return absl::InvalidArgumentError(absl::StrCat(
      "model = ", Quoted(model), ": no profile of that name; known profiles: ", absl::StrJoin(catalog_.Names(), ", "),
      " (an unknown model is costed as generic only where that is allowed: kvledger-server --unknown_model=generic, "
      "kvledger explain --unknown-model generic)"));
}

absl::StatusOr<const Profile*> ModelRegistry::ProfileFor(absl::string_view model) const {
  auto resolution = Resolve(model);
  if (!resolution.ok()) return resolution.status();
  return resolution->profile;
}

}  // namespace kvledger
