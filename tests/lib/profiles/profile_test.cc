#include "lib/profiles/profile.h"

#include <map>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "lib/profiles/profile_catalog.h"
#include "tests/testing/status_matchers.h"

namespace kvledger {
namespace {

using ::kvledger::testing::StatusIs;
using ::testing::HasSubstr;

v1::ModelProfile Parse(const std::string& text) {
  v1::ModelProfile p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p)) << text;
  return p;
}

uint64_t KvElementsPerToken(const Profile& p) {
  return BytesPerCachedToken(p.shape()) / p.definition().serving().cache_bytes_per_element();
}

// Every full-attention and MoE model's KV elements per token equal the table in docs/models.md.
TEST(ProfileTest, CatalogKvElementsPerTokenMatchTheTable) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const std::map<std::string, uint64_t> table = {
      {"llama-3.1-8b", 65536},     {"llama-3.1-70b", 163840}, {"qwen3-8b", 73728},
      {"qwen3-32b", 131072},       {"qwen3-235b-a22b", 96256}, {"deepseek-v3", 35136},
      // Sliding-window and hybrid models: per-position elements before windows cap them.
      {"mistral-7b-v0.1", 65536},  {"gemma-2-9b", 42 * 2 * 8 * 256}, {"gemma-3-12b", 48 * 2 * 8 * 256},
      {"gpt-oss-120b", 36 * 2 * 8 * 64}, {"gpt-oss-20b", 24 * 2 * 8 * 64},
      {"kimi-linear-48b-a3b", 7 * 576}, {"qwen3-next-80b-a3b", 12 * 2 * 2 * 256}};
  for (const auto& [name, elements] : table) {
    const Profile* p = catalog.Find(name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_EQ(KvElementsPerToken(*p), elements) << name;
  }
}

// Recurrent state per sequence equals docs/models.md: state + conv state per KDA / DeltaNet layer.
TEST(ProfileTest, CatalogRecurrentStateMatchesTheTable) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  EXPECT_EQ(StateBytesPerSequence(catalog.Find("kimi-linear-48b-a3b")->shape()),
            20u * (524288 + 36864) * 2);
  EXPECT_EQ(StateBytesPerSequence(catalog.Find("qwen3-next-80b-a3b")->shape()),
            36u * (524288 + 24576) * 2);
}

// Hand-counted FLOPs for llama-3.1-8b (docs/cost-model.md §5): per layer, projections
// 4096*(4096 + 2*1024) + 4096*4096 and SwiGLU 3*4096*14336 parameters, 2 FLOPs each;
// attention 2*32*(128+128) FLOPs per pair.
TEST(ProfileTest, Llama8bFlopConstants) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const Profile* p = catalog.Find("llama-3.1-8b");
  ASSERT_NE(p, nullptr);
  const auto& g = p->shape().groups.at(0);
  EXPECT_EQ(g.token_flops, 2u * (4096u * (4096 + 2048) + 4096u * 4096 + 3u * 4096 * 14336));
  EXPECT_EQ(g.pair_flops, 2u * 32 * 256);
  EXPECT_EQ(g.alignment_tokens, 16u);
  EXPECT_EQ(p->attention_summary(), "full");
}

// DeepSeek-V3 MLA: pair FLOPs use d_qk = 128 + 64 and d_v = 128; MoE touches 8 routed + 1 shared.
TEST(ProfileTest, DeepSeekMlaAndMoeConstants) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const Profile* p = catalog.Find("deepseek-v3");
  ASSERT_NE(p, nullptr);
  const auto& moe = p->shape().groups.at(1);
  EXPECT_EQ(moe.pair_flops, 2u * 128 * (192 + 128));
  const uint64_t q = 7168ull * 1536 + 1536ull * 128 * 192;
  const uint64_t kv = 7168ull * (512 + 64) + 512ull * 128 * (128 + 128);
  const uint64_t o = 128ull * 128 * 7168;
  const uint64_t ffn = 7168ull * 256 + 3ull * 7168 * 8 * 2048 + 3ull * 7168 * 1 * 2048;
  EXPECT_EQ(moe.token_flops, 2 * (q + kv + o + ffn));
  EXPECT_TRUE(moe.latent);
  EXPECT_EQ(p->attention_summary(), "mla");
}

TEST(ProfileTest, HybridSummaryAndAlignment) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  const Profile* kimi = catalog.Find("kimi-linear-48b-a3b");
  EXPECT_EQ(kimi->attention_summary(), "linear+mla");
  EXPECT_EQ(kimi->shape().groups.at(0).alignment_tokens, 256u);  // checkpoint interval
  EXPECT_EQ(kimi->shape().groups.at(2).alignment_tokens, 16u);   // KV page
  EXPECT_EQ(catalog.Find("gemma-2-9b")->attention_summary(), "sliding_window+full");
}

// Validation errors name the profile, the field path, the value and the rule.
TEST(ProfileTest, ValidationNamesProfileFieldAndProblem) {
  EXPECT_THAT(Profile::Make(Parse(R"pb(name: "m" hidden_size: 64
      layer_groups { name: "a" num_layers: 2 attention { num_heads: 32 num_kv_heads: 3 head_dim: 8 }
                     dense { intermediate_size: 128 } })pb")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "profile 'm': layer_groups[0].attention.num_kv_heads = 3: must divide num_heads = 32"));
  EXPECT_THAT(Profile::Make(Parse(R"pb(name: "m" hidden_size: 64
      layer_groups { name: "a" num_layers: 2 dense { intermediate_size: 128 } })pb")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "profile 'm': layer_groups[0]: needs a mixer (attention, mla or linear)"));
  EXPECT_THAT(Profile::Make(Parse(R"pb(name: "m" hidden_size: 64
      layer_groups { name: "r" num_layers: 2
                     linear { num_qk_heads: 1 num_v_heads: 1 key_head_dim: 8 value_head_dim: 8 }
                     dense { intermediate_size: 128 } })pb")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("serving.recurrent_checkpoint_tokens: must be set")));
  EXPECT_THAT(Profile::Make(Parse(R"pb(name: "m" hidden_size: 64
      layer_groups { name: "a" num_layers: 1 attention { num_heads: 1 num_kv_heads: 1 head_dim: 8 }
                     dense { intermediate_size: 8 } }
      layer_groups { name: "a" num_layers: 1 attention { num_heads: 1 num_kv_heads: 1 head_dim: 8 }
                     dense { intermediate_size: 8 } })pb")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("layer_groups[1].name: 'a' is used")));
  EXPECT_THAT(Profile::Make(Parse(R"pb(name: "m" hidden_size: 0)pb")),
              StatusIs(absl::StatusCode::kInvalidArgument, "profile 'm': hidden_size = 0: must be in [1, 1048576]"));
  EXPECT_THAT(Profile::Make(Parse(R"pb(name: "bad name")pb")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("profile 'bad name': name:")));
}

}  // namespace
}  // namespace kvledger
