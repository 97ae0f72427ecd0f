// Maps a record's model name to the profile that costs it (the catalog, and what to do with a name
// that has none), and owns the bounded label slots (LabelSlots) the exposition counts it under. The
// record path asks once: Resolve finds profile and slot in one lock-free lookup of the slot table,
// and only a counted record with a new name claims a slot.
// Thread-safe.
#ifndef KVLEDGER_LIB_PROFILES_MODEL_REGISTRY_H_
#define KVLEDGER_LIB_PROFILES_MODEL_REGISTRY_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/profiles/label_slots.h"
#include "lib/profiles/profile_catalog.h"

namespace kvledger {

enum class UnknownModelPolicy { kReject, kGeneric };
// The policy's names as the server's --unknown_model and the CLI's --unknown-model take them.
inline constexpr char kUnknownModelPolicyNames[] = "reject or generic";
std::optional<UnknownModelPolicy> UnknownModelPolicyFromName(absl::string_view name);
const char* UnknownModelPolicyName(UnknownModelPolicy policy);  // "reject", "generic"

// What the record path learns about a model name in one lookup.
struct Resolution {
  const Profile* profile = nullptr;
  // The name's label slot when it already has one (every catalog profile, and unknown names that
  // claimed one); otherwise ClaimLabel gives it one if the record is counted.
  std::optional<LabelSlot> label;
};

class ModelRegistry {
 public:
  // `catalog` must outlive the registry. max_models >= 1: label slots for names without a profile.
  ModelRegistry(const ProfileCatalog& catalog, uint32_t max_models, UnknownModelPolicy policy);

  // The profile that costs `model` and its label slot if it has one, in one lock-free lookup,
  // without claiming a slot. INVALID_ARGUMENT for a model with no profile (policy kReject); the
  // message lists the known profiles.
  absl::StatusOr<Resolution> Resolve(absl::string_view model) const;
  absl::StatusOr<const Profile*> ProfileFor(absl::string_view model) const;  // Resolve(model)->profile

  // The label slot of `model`, claiming a free one for a new name (LabelSlots::Claim).
  LabelSlot ClaimLabel(absl::string_view model, const Profile* profile) { return labels_.Claim(model, profile); }

  // The exposition's side: label values by slot, slot counts.
  const LabelSlots& slots() const { return labels_; }
  const ProfileCatalog& catalog() const { return catalog_; }

 private:
  const ProfileCatalog& catalog_;
  const UnknownModelPolicy policy_;
  const Profile* generic_;
  LabelSlots labels_;
};

}  // namespace kvledger

#endif  // KVLEDGER_LIB_PROFILES_MODEL_REGISTRY_H_
