#include "lib/profiles/model_registry.h"

#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace kvledger {
namespace {

using ::kvledger::testing::StatusIs;
using ::testing::HasSubstr;

// An unknown model is rejected with a message that lists the known profiles.
TEST(ModelRegistryTest, UnknownModelListsKnownProfiles) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  ModelRegistry registry(catalog, 8, UnknownModelPolicy::kReject);
  EXPECT_THAT(registry.ProfileFor("llama-9"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model = \"llama-9\": no profile of that name; known profiles: deepseek-v3, ")));
}

// With the generic policy an unknown model is costed with the generic profile under its own label.
TEST(ModelRegistryTest, GenericPolicyKeepsTheName) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  ModelRegistry registry(catalog, 8, UnknownModelPolicy::kGeneric);
  auto profile = registry.ProfileFor("my-finetune");
  ASSERT_TRUE(profile.ok());
  EXPECT_EQ((*profile)->name(), "generic");
  const LabelSlot slot = registry.ClaimLabel("my-finetune", *profile);
  EXPECT_EQ(slot.slot, registry.slots().known_slots());  // the first slot after the catalog's
  EXPECT_EQ(registry.slots().LabelsBySlot().at(slot.slot).model, "my-finetune");
  EXPECT_EQ(registry.slots().LabelsBySlot().at(slot.slot).profile, *profile);
}

// A client's model named "other" can never take a slot of its own (it would share the folded
// label): it is folded, even while slots are free; and no profile may be named "other".
TEST(ModelRegistryTest, TheFoldedLabelIsReserved) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  ModelRegistry registry(catalog, 4, UnknownModelPolicy::kGeneric);
  const LabelSlot other = registry.ClaimLabel("other", catalog.Find("generic"));
  EXPECT_TRUE(other.folded);
  EXPECT_EQ(other.slot, registry.slots().other_slot());
  for (const auto& label : registry.slots().LabelsBySlot()) EXPECT_NE(label.model, "other");
  v1::ModelProfile definition = catalog.Find("llama-3.1-8b")->definition();
  definition.set_name("other");
  EXPECT_EQ(Profile::Make(definition).status().message(),
            "profile 'other': name: \"other\" is reserved for the label of folded model names");
}

// Unknown names get slots first come first served; past max_models they fold into "other" and are
// not stored. Known profiles keep their own labels even after junk names took every slot.
TEST(ModelRegistryTest, FoldsPastTheCap) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  ModelRegistry registry(catalog, 2, UnknownModelPolicy::kGeneric);
  const Profile* generic = catalog.Find("generic");
  const uint32_t known = registry.slots().known_slots();
  EXPECT_EQ(known, catalog.Names().size());
  EXPECT_EQ(registry.ClaimLabel("junk-a", generic).slot, known);
  EXPECT_EQ(registry.ClaimLabel("junk-b", generic).slot, known + 1);
  const LabelSlot folded = registry.ClaimLabel("junk-c", generic);
  EXPECT_EQ(folded.slot, registry.slots().other_slot());
  EXPECT_TRUE(folded.folded);
  const LabelSlot llama = registry.ClaimLabel("llama-3.1-8b", catalog.Find("llama-3.1-8b"));
  EXPECT_FALSE(llama.folded);
  EXPECT_LT(llama.slot, known);
  EXPECT_EQ(registry.slots().LabelsBySlot().at(llama.slot).model, "llama-3.1-8b");
  EXPECT_EQ(registry.ClaimLabel("junk-a", generic).slot, known);
  EXPECT_EQ(registry.slots().LabelsBySlot().size(), known + 2);
  EXPECT_EQ(registry.slots().slot_count(), known + 3);
}

// Concurrent first sightings: every name gets exactly one slot, slots are distinct and dense, and
// names past the cap fold, whichever thread sees them first.
TEST(ModelRegistryTest, ConcurrentClaimsAssignEachNameOnce) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  ModelRegistry registry(catalog, 20, UnknownModelPolicy::kGeneric);
  std::mutex mu;
  std::map<std::string, std::set<uint32_t>> seen;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        const std::string name = "model-" + std::to_string((i * 7 + t) % 30);
        const LabelSlot label = registry.ClaimLabel(name, catalog.Find("generic"));
        std::lock_guard<std::mutex> lock(mu);
        seen[name].insert(label.slot);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<uint32_t> slots;
  int folded_names = 0;
  const uint32_t known = registry.slots().known_slots();
  for (const auto& [name, name_slots] : seen) {
    ASSERT_EQ(name_slots.size(), 1u) << name;
    const uint32_t slot = *name_slots.begin();
    if (slot == registry.slots().other_slot()) {
      ++folded_names;
    } else {
      EXPECT_TRUE(slots.insert(slot).second) << "slot " << slot << " given twice";
    }
  }
  EXPECT_EQ(slots.size(), 20u);
  EXPECT_EQ(folded_names, 10);
  EXPECT_EQ(*slots.begin(), known);
  EXPECT_EQ(*slots.rbegin(), known + 19);
  const auto labels = registry.slots().LabelsBySlot();
  ASSERT_EQ(labels.size(), known + 20);
  for (uint32_t i = known; i < labels.size(); ++i) EXPECT_EQ(*seen[labels[i].model].begin(), i);
}

}  // namespace
}  // namespace kvledger
