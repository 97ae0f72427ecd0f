#include "lib/profiles/profile_catalog.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/profiles/builtin_catalog.h"
#include "tests/testing/status_matchers.h"

namespace kvledger {
namespace {

using ::kvledger::testing::StatusIs;
using ::testing::HasSubstr;

class ProfileCatalogFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
};

// The built-in catalog parses and holds every model of docs/models.md plus the generic profile.
TEST(ProfileCatalogTest, BuiltinHasEveryModel) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  EXPECT_THAT(catalog.Names(),
              ::testing::UnorderedElementsAre(
                  "llama-3.1-8b", "llama-3.1-70b", "qwen3-8b", "qwen3-32b", "qwen3-235b-a22b",
                  "deepseek-v3", "mistral-7b-v0.1", "gemma-2-9b", "gemma-3-12b", "gpt-oss-120b",
                  "gpt-oss-20b", "kimi-linear-48b-a3b", "qwen3-next-80b-a3b", kGenericProfileName));
}

// An entry without layer groups overrides only the serving settings it sets.
TEST_F(ProfileCatalogFileTest, TextProtoOverridesServingSettings) {
  auto catalog = ProfileCatalog::LoadFile(Write("serving.textproto", R"pb(
    profiles { name: "qwen3-next-80b-a3b" serving { kv_page_tokens: 1056 recurrent_checkpoint_tokens: 1056 } }
    profiles { name: "llama-3.1-8b" serving { prefill_flops_per_second: 4e14 } })pb"));
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  const Profile* next = catalog->Find("qwen3-next-80b-a3b");
  EXPECT_EQ(next->shape().groups.at(0).alignment_tokens, 1056u);
  EXPECT_EQ(next->definition().serving().cache_bytes_per_element(), 2u);  // default kept
  EXPECT_EQ(catalog->Find("llama-3.1-8b")->prefill_flops_per_second(), 4e14);
  EXPECT_EQ(catalog->Find("llama-3.1-8b")->shape().groups.at(0).alignment_tokens, 16u);
  EXPECT_EQ(catalog->Find("llama-3.1-8b")->context_tokens(), std::nullopt);  // the catalog states none
}

// A deployment's context is a serving setting: given, it is kept; out of range, it names the rule.
TEST_F(ProfileCatalogFileTest, ContextTokensIsAServingSetting) {
  auto catalog = ProfileCatalog::LoadFile(Write("context.textproto", R"pb(
    profiles { name: "llama-3.1-8b" serving { context_tokens: 131072 } })pb"));
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  EXPECT_EQ(catalog->Find("llama-3.1-8b")->context_tokens(), 131072u);
  EXPECT_EQ(catalog->Find("llama-3.1-8b")->prefill_flops_per_second(), 0);  // nothing else moved
  EXPECT_THAT(ProfileCatalog::LoadFile(Write("small.textproto",
                                             "profiles { name: \"llama-3.1-8b\" serving { context_tokens: 1 } }")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("profile 'llama-3.1-8b': serving.context_tokens = 1: must be in [2, 2147483648]")));
}

// A JSON file adds a whole new profile.
TEST_F(ProfileCatalogFileTest, JsonAddsProfile) {
  auto catalog = ProfileCatalog::LoadFile(Write("add.json", R"({"profiles": [{
    "name": "tiny", "hiddenSize": 64,
    "layerGroups": [{"name": "attention", "numLayers": 2,
      "attention": {"numHeads": 4, "numKvHeads": 2, "headDim": 16},
      "dense": {"intermediateSize": 256}}],
    "serving": {"kvPageTokens": 32, "cacheBytesPerElement": 1}}]})"));
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  const Profile* tiny = catalog->Find("tiny");
  ASSERT_NE(tiny, nullptr);
  EXPECT_EQ(BytesPerCachedToken(tiny->shape()), 2u * 2 * 2 * 16 * 1);
  EXPECT_NE(catalog->Find("llama-3.1-8b"), nullptr);
}

TEST_F(ProfileCatalogFileTest, ErrorsNameFileProfileAndField) {
  EXPECT_THAT(ProfileCatalog::LoadFile("/nonexistent/profiles.textproto"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("cannot be read")));
  EXPECT_THAT(ProfileCatalog::LoadFile(Write("syntax.textproto", "profiles { name: \"x\" bogus: 1 }")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 1 column")));
  EXPECT_THAT(ProfileCatalog::LoadFile(Write("unknown.textproto", "profiles { name: \"nope\" }")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("profile 'nope': layer_groups: empty, and no built-in profile")));
  EXPECT_THAT(ProfileCatalog::LoadFile(Write("bad.textproto",
                                             "profiles { name: \"llama-3.1-8b\" serving { kv_page_tokens: 0 } }")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("profile 'llama-3.1-8b': serving.kv_page_tokens = 0")));
}

}  // namespace
}  // namespace kvledger
