#include "lib/profiles/builtin_catalog.h"

#include <cstdlib>
#include <iostream>

#include "google/protobuf/text_format.h"

namespace kvledger {

// Facts and sources: docs/models.md. Serving settings are deployment defaults that a --profiles
// file overrides: vLLM's 16-token KV page; for hybrids, vLLM's "align" mode block (Qwen3-Next:
// 544 tokens at TP=1 with a bf16 state) and SGLang's 256-token recurrent tracking (Kimi Linear).
const char* BuiltinCatalogText() {
  return R"pb(
profiles {
  name: "llama-3.1-8b" hidden_size: 4096 vocab_size: 128256
  layer_groups { name: "attention" num_layers: 32
    attention { num_heads: 32 num_kv_heads: 8 head_dim: 128 }
    dense { intermediate_size: 14336 } }
}
profiles {
  name: "llama-3.1-70b" hidden_size: 8192 vocab_size: 128256
  layer_groups { name: "attention" num_layers: 80
    attention { num_heads: 64 num_kv_heads: 8 head_dim: 128 }
    dense { intermediate_size: 28672 } }
}
profiles {
  name: "qwen3-8b" hidden_size: 4096 vocab_size: 151936
  layer_groups { name: "attention" num_layers: 36
    attention { num_heads: 32 num_kv_heads: 8 head_dim: 128 }
    dense { intermediate_size: 12288 } }
}
profiles {
  name: "qwen3-32b" hidden_size: 5120 vocab_size: 151936
  layer_groups { name: "attention" num_layers: 64
    attention { num_heads: 64 num_kv_heads: 8 head_dim: 128 }
    dense { intermediate_size: 25600 } }
}
profiles {
  name: "qwen3-235b-a22b" hidden_size: 4096 vocab_size: 151936
  layer_groups { name: "attention" num_layers: 94
    attention { num_heads: 64 num_kv_heads: 4 head_dim: 128 }
    moe { num_experts: 128 top_k: 8 expert_intermediate_size: 1536 } }
}
profiles {
  name: "deepseek-v3" hidden_size: 7168 vocab_size: 129280
  layer_groups { name: "mla_dense" num_layers: 3
    mla { num_heads: 128 q_lora_rank: 1536 kv_lora_rank: 512 qk_rope_head_dim: 64
          qk_nope_head_dim: 128 v_head_dim: 128 }
    dense { intermediate_size: 18432 } }
  layer_groups { name: "mla_moe" num_layers: 58
    mla { num_heads: 128 q_lora_rank: 1536 kv_lora_rank: 512 qk_rope_head_dim: 64
          qk_nope_head_dim: 128 v_head_dim: 128 }
    moe { num_experts: 256 top_k: 8 expert_intermediate_size: 2048 num_shared_experts: 1 } }
}
profiles {
  name: "mistral-7b-v0.1" hidden_size: 4096 vocab_size: 32000
  layer_groups { name: "sliding" num_layers: 32
    attention { num_heads: 32 num_kv_heads: 8 head_dim: 128 window_tokens: 4096 }
    dense { intermediate_size: 14336 } }
}
profiles {
  name: "gemma-2-9b" hidden_size: 3584 vocab_size: 256000
  layer_groups { name: "local" num_layers: 21
    attention { num_heads: 16 num_kv_heads: 8 head_dim: 256 window_tokens: 4096 }
    dense { intermediate_size: 14336 } }
  layer_groups { name: "global" num_layers: 21
    attention { num_heads: 16 num_kv_heads: 8 head_dim: 256 }
    dense { intermediate_size: 14336 } }
}
profiles {
  name: "gemma-3-12b" hidden_size: 3840 vocab_size: 262208
  layer_groups { name: "local" num_layers: 40
    attention { num_heads: 16 num_kv_heads: 8 head_dim: 256 window_tokens: 1024 }
    dense { intermediate_size: 15360 } }
  layer_groups { name: "global" num_layers: 8
    attention { num_heads: 16 num_kv_heads: 8 head_dim: 256 }
    dense { intermediate_size: 15360 } }
}
profiles {
  name: "gpt-oss-120b" hidden_size: 2880 vocab_size: 201088
  layer_groups { name: "banded" num_layers: 18
    attention { num_heads: 64 num_kv_heads: 8 head_dim: 64 window_tokens: 128 }
    moe { num_experts: 128 top_k: 4 expert_intermediate_size: 2880 } }
  layer_groups { name: "full" num_layers: 18
    attention { num_heads: 64 num_kv_heads: 8 head_dim: 64 }
    moe { num_experts: 128 top_k: 4 expert_intermediate_size: 2880 } }
}
profiles {
  name: "gpt-oss-20b" hidden_size: 2880 vocab_size: 201088
  layer_groups { name: "banded" num_layers: 12
    attention { num_heads: 64 num_kv_heads: 8 head_dim: 64 window_tokens: 128 }
    moe { num_experts: 32 top_k: 4 expert_intermediate_size: 2880 } }
  layer_groups { name: "full" num_layers: 12
    attention { num_heads: 64 num_kv_heads: 8 head_dim: 64 }
    moe { num_experts: 32 top_k: 4 expert_intermediate_size: 2880 } }
}
profiles {
  name: "kimi-linear-48b-a3b" hidden_size: 2304 vocab_size: 163840
  layer_groups { name: "kda_dense" num_layers: 1
    linear { num_qk_heads: 32 num_v_heads: 32 key_head_dim: 128 value_head_dim: 128 conv_kernel: 4 }
    dense { intermediate_size: 9216 } }
  layer_groups { name: "kda" num_layers: 19
    linear { num_qk_heads: 32 num_v_heads: 32 key_head_dim: 128 value_head_dim: 128 conv_kernel: 4 }
    moe { num_experts: 256 top_k: 8 expert_intermediate_size: 1024 num_shared_experts: 1 } }
  layer_groups { name: "mla" num_layers: 7
    mla { num_heads: 32 kv_lora_rank: 512 qk_rope_head_dim: 64 qk_nope_head_dim: 128 v_head_dim: 128 }
    moe { num_experts: 256 top_k: 8 expert_intermediate_size: 1024 num_shared_experts: 1 } }
  serving { recurrent_checkpoint_tokens: 256 }
}
profiles {
  name: "qwen3-next-80b-a3b" hidden_size: 2048 vocab_size: 151936
  layer_groups { name: "deltanet" num_layers: 36
    linear { num_qk_heads: 16 num_v_heads: 32 key_head_dim: 128 value_head_dim: 128 conv_kernel: 4 }
    moe { num_experts: 512 top_k: 10 expert_intermediate_size: 512 num_shared_experts: 1
          shared_intermediate_size: 512 } }
  layer_groups { name: "attention" num_layers: 12
    attention { num_heads: 16 num_kv_heads: 2 head_dim: 256 }
    moe { num_experts: 512 top_k: 10 expert_intermediate_size: 512 num_shared_experts: 1
          shared_intermediate_size: 512 } }
  serving { kv_page_tokens: 544 recurrent_checkpoint_tokens: 544 }
}
profiles {
  name: "generic" hidden_size: 4096 vocab_size: 128256
  layer_groups { name: "attention" num_layers: 32
    attention { num_heads: 32 num_kv_heads: 8 head_dim: 128 }
    dense { intermediate_size: 14336 } }
}
)pb";
}

v1::ProfileCatalog BuiltinCatalog() {
  v1::ProfileCatalog catalog;
  if (!google::protobuf::TextFormat::ParseFromString(BuiltinCatalogText(), &catalog)) {
    std::cerr << "kvledger: the built-in profile catalog does not parse\n";
    std::abort();
  }
  return catalog;
}

}  // namespace kvledger
