#include "lib/profiles/model_registry.h"

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
  EXPECT_THAT(registry.Resolve("llama-9"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model = \"llama-9\": no profile of that name; known profiles: deepseek-v3, ")));
}

// With the generic policy an unknown model is costed with the generic profile under its own label.
TEST(ModelRegistryTest, GenericPolicyKeepsTheName) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  ModelRegistry registry(catalog, 8, UnknownModelPolicy::kGeneric);
  auto r = registry.Resolve("my-finetune");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->profile->name(), "generic");
  EXPECT_EQ(registry.Labels().at(0).model, "my-finetune");
}

// Slots go first come first served; past max_models names fold into "other" and are not stored.
TEST(ModelRegistryTest, FoldsPastTheCap) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  ModelRegistry registry(catalog, 2, UnknownModelPolicy::kReject);
  EXPECT_EQ(registry.Resolve("qwen3-8b")->label_slot, 0u);
  EXPECT_EQ(registry.Resolve("deepseek-v3")->label_slot, 1u);
  auto folded = registry.Resolve("gemma-2-9b");
  EXPECT_EQ(folded->label_slot, registry.other_slot());
  EXPECT_TRUE(folded->folded);
  EXPECT_EQ(folded->profile->name(), "gemma-2-9b");  // still costed with its own profile
  EXPECT_EQ(registry.Resolve("qwen3-8b")->label_slot, 0u);
  EXPECT_EQ(registry.Labels().size(), 2u);
}

}  // namespace
}  // namespace kvledger
