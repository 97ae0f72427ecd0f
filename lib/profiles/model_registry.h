// Maps a record's model name to the profile that costs it, and to a bounded label slot.
//
// Every profile of the catalog (built-in and from --profiles) has its own label slot from the start,
// so a known model is never folded, whatever names clients send. Names without a profile (accepted
// only with UnknownModelPolicy::kGeneric) get slots first come, first served, up to max_models;
// later distinct unknown names are folded into the slot labelled "other" (still costed). Names past
// the cap are never stored, so memory stays bounded whatever clients send.
// Thread-safe. Looking up a name that already has a slot (the steady state) takes no lock: slots
// live in an insert-only open-addressing table whose entries are published with release stores.
#ifndef KVLEDGER_LIB_PROFILES_MODEL_REGISTRY_H_
#define KVLEDGER_LIB_PROFILES_MODEL_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "lib/base/mutex.h"
#include "lib/profiles/profile_catalog.h"

namespace kvledger {

enum class UnknownModelPolicy { kReject, kGeneric };

inline constexpr char kOtherModelLabel[] = "other";

struct LabelSlot {
  uint32_t slot = 0;    // < other_slot(), or == other_slot() for "other"
  bool folded = false;  // true when this record went to "other"
};

struct ModelLabel {
  std::string model;      // label value
  const Profile* profile;  // profile of the first record that claimed the slot
};

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

  // The label slot of `model`, claiming a free one for a new name. Call only for a record that is
  // being counted (so rejected records never use up slots); `profile` is what ProfileFor returned,
  // kept for kvledger_model_info.
  LabelSlot ClaimLabel(absl::string_view model, const Profile* profile);

  // Labels of slots 0..n-1 in slot order: the catalog's profiles first, then the unknown names
  // claimed so far (the "other" slot is not included).
  std::vector<ModelLabel> Labels() const;
  uint32_t max_models() const { return max_models_; }
  // Slots 0..known-1 are the catalog's profiles; unknown names get known..other_slot()-1.
  uint32_t known_slots() const { return known_slots_; }
  uint32_t other_slot() const { return known_slots_ + max_models_; }
  // Slots an Aggregator needs: every label plus "other".
  uint32_t label_slots() const { return other_slot() + 1; }
  const ProfileCatalog& catalog() const { return catalog_; }

 private:
  struct Entry {
    std::string model;
    uint32_t slot;
    const Profile* profile;
  };
  // The entry for `model`, or nullptr. Lock-free.
  const Entry* Find(absl::string_view model) const;
  // Gives `model` the next slot.
  void InsertLocked(absl::string_view model, const Profile* profile) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ProfileCatalog& catalog_;
  const uint32_t max_models_;
  const uint32_t known_slots_;
  const UnknownModelPolicy policy_;
  const Profile* generic_;
  // Capacity is a power of two >= 2 * max_models, so probes are short and always end at a null.
  const size_t table_mask_;
  std::unique_ptr<std::atomic<const Entry*>[]> table_;
  std::atomic<uint32_t> used_slots_{0};  // slots handed to unknown names
  mutable Mutex mu_;  // serializes inserts; guards labels_ and owns the entries
  std::vector<std::unique_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  std::vector<ModelLabel> labels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvledger

#endif  // KVLEDGER_LIB_PROFILES_MODEL_REGISTRY_H_
