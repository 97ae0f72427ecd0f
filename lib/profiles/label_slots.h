// Bounded label values for the exposition: which `model` label a name is counted under.
//
// Every profile of the catalog (built-in and from --profiles) has its own slot from the start, so a
// known model is never folded, whatever names clients send. Names without a profile get slots first
// come, first served, up to max_models; later distinct names share the slot labelled "other". Names
// past the cap are never stored, so memory stays bounded whatever clients send.
// Thread-safe. Finding a name that already has a slot (the steady state) takes no lock: slots live in
// an insert-only open-addressing table whose entries are published with release stores.
#ifndef KVLEDGER_LIB_PROFILES_LABEL_SLOTS_H_
#define KVLEDGER_LIB_PROFILES_LABEL_SLOTS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "lib/base/mutex.h"
#include "lib/profiles/profile_catalog.h"

namespace kvledger {

struct LabelSlot {
  uint32_t slot = 0;    // < other_slot(), or == other_slot() for "other"
  bool folded = false;  // true when this record went to "other"
};

struct ModelLabel {
  std::string model;       // label value
  const Profile* profile;  // profile of the first record that claimed the slot
};

class LabelSlots {
 public:
  struct Entry {
    std::string model;
    uint32_t slot;
    const Profile* profile;
  };

  // `catalog` must outlive the slots. max_models >= 1: slots for names without a profile.
  LabelSlots(const ProfileCatalog& catalog, uint32_t max_models);

  // The entry of a name that has a slot, or nullptr. Lock-free.
  const Entry* Find(absl::string_view model) const;
  // The slot of `model`, claiming a free one for a new name (or "other" past the cap, and always for
  // a name equal to the reserved label "other"). Call only for a record that is being counted, so
  // rejected records never use up slots; `profile` is kept for kvledger_model_info.
  LabelSlot Claim(absl::string_view model, const Profile* profile);

  // Labels of slots 0..n-1 in slot order: the catalog's profiles first, then the names claimed so far
  // (the "other" slot is not included).
  std::vector<ModelLabel> LabelsBySlot() const;
  // Slots 0..known-1 are the catalog's profiles; other names get known..other_slot()-1.
  uint32_t known_slots() const { return known_slots_; }
  uint32_t other_slot() const { return known_slots_ + max_models_; }
  // Slots an Aggregator needs: every label plus "other".
  uint32_t slot_count() const { return other_slot() + 1; }

 private:
  // Gives `model` the next slot.
  void InsertLocked(absl::string_view model, const Profile* profile) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint32_t max_models_;
  const uint32_t known_slots_;
  // Capacity is a power of two >= 2 * slots, so probes are short and always end at a null.
  const size_t table_mask_;
  std::unique_ptr<std::atomic<const Entry*>[]> table_;
  std::atomic<uint32_t> used_slots_{0};  // slots handed to names without a profile
  mutable Mutex mu_;                     // serializes inserts; guards labels_ and owns the entries
  std::vector<std::unique_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  std::vector<ModelLabel> labels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvledger

#endif  // KVLEDGER_LIB_PROFILES_LABEL_SLOTS_H_
