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
  registry.ClaimLabel("my-finetune", *profile);
  EXPECT_EQ(registry.Labels().at(0).model, "my-finetune");
  EXPECT_EQ(registry.Labels().at(0).profile, *profile);
}

// Slots go first come first served; past max_models names fold into "other" and are not stored.
TEST(ModelRegistryTest, FoldsPastTheCap) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  ModelRegistry registry(catalog, 2, UnknownModelPolicy::kReject);
  auto claim = [&](const char* model) { return registry.ClaimLabel(model, catalog.Find(model)); };
  EXPECT_EQ(claim("qwen3-8b").slot, 0u);
  EXPECT_EQ(claim("deepseek-v3").slot, 1u);
  const LabelSlot folded = claim("gemma-2-9b");
  EXPECT_EQ(folded.slot, registry.other_slot());
  EXPECT_TRUE(folded.folded);
  EXPECT_EQ(*registry.ProfileFor("gemma-2-9b"), catalog.Find("gemma-2-9b"));  // still its own profile
  EXPECT_EQ(claim("qwen3-8b").slot, 0u);
  EXPECT_EQ(registry.Labels().size(), 2u);
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
  for (const auto& [name, name_slots] : seen) {
    ASSERT_EQ(name_slots.size(), 1u) << name;
    const uint32_t slot = *name_slots.begin();
    if (slot == registry.other_slot()) {
      ++folded_names;
    } else {
      EXPECT_TRUE(slots.insert(slot).second) << "slot " << slot << " given twice";
    }
  }
  EXPECT_EQ(slots.size(), 20u);
  EXPECT_EQ(folded_names, 10);
  EXPECT_EQ(*slots.rbegin(), 19u);
  const auto labels = registry.Labels();
  ASSERT_EQ(labels.size(), 20u);
  for (uint32_t i = 0; i < labels.size(); ++i) EXPECT_EQ(*seen[labels[i].model].begin(), i);
}

}  // namespace
}  // namespace kvledger
