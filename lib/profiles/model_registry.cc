#include "lib/profiles/model_registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/profiles/builtin_catalog.h"

namespace kvledger {

ModelRegistry::ModelRegistry(const ProfileCatalog& catalog, uint32_t max_models,
                             UnknownModelPolicy policy)
    : catalog_(catalog),
      max_models_(max_models),
      policy_(policy),
      generic_(catalog.Find(kGenericProfileName)) {}

absl::StatusOr<const Profile*> ModelRegistry::ProfileFor(absl::string_view model) const {
  if (const Profile* profile = catalog_.Find(model)) return profile;
  if (policy_ == UnknownModelPolicy::kGeneric && generic_ != nullptr) return generic_;
  return absl::InvalidArgumentError(absl::StrCat(
      "model = \"", model, "\": no profile of that name; known profiles: ",
      absl::StrJoin(catalog_.Names(), ", "), " (or start the server with --unknown_model=generic)"));
}

absl::StatusOr<ResolvedModel> ModelRegistry::Resolve(absl::string_view model) {
  auto found = ProfileFor(model);
  if (!found.ok()) return found.status();
  const Profile* profile = *found;
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = slots_.find(model);
    if (it != slots_.end()) return ResolvedModel{profile, it->second, false};
    if (labels_.size() >= max_models_) return ResolvedModel{profile, other_slot(), true};
  }
  absl::MutexLock lock(&mu_);
  auto it = slots_.find(model);
  if (it != slots_.end()) return ResolvedModel{profile, it->second, false};
  if (labels_.size() >= max_models_) return ResolvedModel{profile, other_slot(), true};
  const auto slot = static_cast<uint32_t>(labels_.size());
  slots_.emplace(model, slot);
  labels_.push_back(ModelLabel{std::string(model), profile});
  return ResolvedModel{profile, slot, false};
}

std::vector<ModelLabel> ModelRegistry::Labels() const {
  absl::ReaderMutexLock lock(&mu_);
  return labels_;
}

}  // namespace kvledger
