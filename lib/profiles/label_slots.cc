#include "lib/profiles/label_slots.h"

#include "absl/hash/hash.h"

namespace kvledger {
namespace {

size_t TableSize(uint32_t slots) {
  size_t size = 8;
  while (size < 2 * static_cast<size_t>(slots)) size *= 2;
  return size;
}

}  // namespace

LabelSlots::LabelSlots(const ProfileCatalog& catalog, uint32_t max_models)
    : max_models_(max_models),
      known_slots_(static_cast<uint32_t>(catalog.Names().size())),
      table_mask_(TableSize(known_slots_ + max_models) - 1),
      table_(new std::atomic<const Entry*>[table_mask_ + 1]) {
  for (size_t i = 0; i <= table_mask_; ++i) table_[i].store(nullptr, std::memory_order_relaxed);
  MutexLock lock(&mu_);
  for (const auto& name : catalog.Names()) InsertLocked(name, catalog.Find(name));
}

void LabelSlots::InsertLocked(absl::string_view model, const Profile* profile) {
  const auto slot = static_cast<uint32_t>(entries_.size());
  entries_.push_back(std::make_unique<Entry>(Entry{std::string(model), slot, profile}));
  labels_.push_back(ModelLabel{std::string(model), profile});
  size_t i = absl::Hash<absl::string_view>{}(model) & table_mask_;
  while (table_[i].load(std::memory_order_relaxed) != nullptr) i = (i + 1) & table_mask_;
  table_[i].store(entries_.back().get(), std::memory_order_release);
}

const LabelSlots::Entry* LabelSlots::Find(absl::string_view model) const {
  for (size_t i = absl::Hash<absl::string_view>{}(model) & table_mask_;; i = (i + 1) & table_mask_) {
    const Entry* entry = table_[i].load(std::memory_order_acquire);
    if (entry == nullptr || entry->model == model) return entry;
  }
}

LabelSlot LabelSlots::Claim(absl::string_view model, const Profile* profile) {
  if (const Entry* entry = Find(model)) return LabelSlot{entry->slot, false};  // known profiles: always
  // The label of folded names is reserved: a client's model "other" is folded too, so /metrics never
  // carries two series with the same labels.
  if (model == kOtherModelLabel) return LabelSlot{other_slot(), true};
  if (used_slots_.load(std::memory_order_acquire) >= max_models_) return LabelSlot{other_slot(), true};
  MutexLock lock(&mu_);
  if (const Entry* entry = Find(model)) return LabelSlot{entry->slot, false};
  const uint32_t used = static_cast<uint32_t>(entries_.size()) - known_slots_;
  if (used >= max_models_) return LabelSlot{other_slot(), true};
  InsertLocked(model, profile);
  used_slots_.store(used + 1, std::memory_order_release);
  return LabelSlot{static_cast<uint32_t>(entries_.size() - 1), false};
}

std::vector<ModelLabel> LabelSlots::LabelsBySlot() const {
  MutexLock lock(&mu_);
  return labels_;
}

}  // namespace kvledger
