#include "lib/profiles/profile.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/cost_model/number_format.h"

namespace kvledger {
namespace {

// Bounds that keep every per-record count far inside 128 bits (docs/cost-model.md §7).
constexpr uint64_t kMaxLayersPerModel = 1024;
constexpr uint64_t kMaxGroups = 16;
constexpr uint64_t kMaxDimension = 1u << 20;  // hidden, FFN, ranks, head dims, vocab
constexpr uint64_t kMaxHeads = 4096;
constexpr uint64_t kMaxExperts = 1u << 16;
constexpr uint64_t kMaxWindow = 1ull << 32;

class Checker {
 public:
  explicit Checker(const std::string& profile) : profile_(profile) {}

  // Records the first failure only; later checks become no-ops.
  void Require(bool ok, const std::string& path, uint64_t value, const std::string& rule) {
    if (ok || !status_.ok()) return;
    status_ = absl::InvalidArgumentError(
        absl::StrCat("profile '", profile_, "': ", path, " = ", value, ": ", rule));
  }
  void Range(const std::string& path, uint64_t value, uint64_t lo, uint64_t hi) {
    Require(value >= lo && value <= hi, path, value, absl::StrCat("must be in [", lo, ", ", hi, "]"));
  }
  void Fail(const std::string& path, const std::string& problem) {
    if (!status_.ok()) return;
    status_ = absl::InvalidArgumentError(absl::StrCat("profile '", profile_, "': ", path, ": ", problem));
  }
  const absl::Status& status() const { return status_; }

 private:
  std::string profile_;
  absl::Status status_;
};

bool ValidName(const std::string& name, bool allow_upper) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
                    c == '.' || (allow_upper && ((c >= 'A' && c <= 'Z') || c == '/' || c == ':'));
    if (!ok) return false;
  }
  return true;
}

// Token-wise parameters of the FFN touched per token (SwiGLU: 3 matrices).
uint64_t FfnParams(const v1::LayerGroup& g, uint64_t hidden, Checker& check, const std::string& at) {
  if (g.has_dense()) {
    check.Range(at + ".dense.intermediate_size", g.dense().intermediate_size(), 1, kMaxDimension);
    return 3 * hidden * g.dense().intermediate_size();
  }
  if (g.has_moe()) {
    const auto& m = g.moe();
    check.Range(at + ".moe.num_experts", m.num_experts(), 1, kMaxExperts);
    check.Range(at + ".moe.top_k", m.top_k(), 1, 1024);
    check.Require(m.top_k() <= m.num_experts(), at + ".moe.top_k", m.top_k(),
                  absl::StrCat("must be <= num_experts = ", m.num_experts()));
    check.Range(at + ".moe.expert_intermediate_size", m.expert_intermediate_size(), 1, kMaxDimension);
    check.Range(at + ".moe.num_shared_experts", m.num_shared_experts(), 0, 64);
    check.Range(at + ".moe.shared_intermediate_size", m.shared_intermediate_size(), 0, kMaxDimension);
    const uint64_t shared_size =
        m.shared_intermediate_size() ? m.shared_intermediate_size() : m.expert_intermediate_size();
    return hidden * m.num_experts()  // router
           + 3 * hidden * m.top_k() * m.expert_intermediate_size() +
           3 * hidden * m.num_shared_experts() * shared_size;
  }
  check.Fail(at, "needs an ffn (dense or moe)");
  return 0;
}

}  // namespace

int Profile::GroupIndex(absl::string_view name) const {
  for (size_t i = 0; i < shape_.groups.size(); ++i) {
    if (shape_.groups[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<Profile> Profile::Make(const v1::ModelProfile& definition) {
  Checker check(definition.name());
  if (!ValidName(definition.name(), /*allow_upper=*/true)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "profile '", definition.name(),
        "': name: must be 1-128 characters of letters, digits, '-', '_', '.', '/', ':'"));
  }
  if (definition.name() == kOtherModelLabel) {
    return absl::InvalidArgumentError(absl::StrCat("profile '", definition.name(), "': name: \"", kOtherModelLabel,
                                                   "\" is reserved for the label of folded model names"));
  }
  Profile p;
  p.definition_ = definition;
  auto* serving = p.definition_.mutable_serving();
  if (!serving->has_kv_page_tokens()) serving->set_kv_page_tokens(kDefaultKvPageTokens);
  if (!serving->has_cache_bytes_per_element()) serving->set_cache_bytes_per_element(kDefaultBytesPerElement);
  if (!serving->has_state_bytes_per_element()) serving->set_state_bytes_per_element(kDefaultBytesPerElement);
  if (!serving->has_prefill_flops_per_second()) serving->set_prefill_flops_per_second(0);

  const uint64_t hidden = definition.hidden_size();
  check.Range("hidden_size", hidden, 1, kMaxDimension);
  check.Range("vocab_size", definition.vocab_size(), 0, kMaxDimension);
  check.Range("layer_groups (count)", definition.layer_groups_size(), 1, kMaxGroups);
  check.Range("serving.kv_page_tokens", serving->kv_page_tokens(), 1, kMaxAlignmentTokens);
  check.Range("serving.cache_bytes_per_element", serving->cache_bytes_per_element(), 1, 8);
  check.Range("serving.state_bytes_per_element", serving->state_bytes_per_element(), 1, 8);
  const double fps = serving->prefill_flops_per_second();
  if (!(fps == 0 || (fps >= 1e9 && fps <= 1e22))) {
    check.Fail("serving.prefill_flops_per_second",
               absl::StrCat(FormatDouble(fps), ": must be 0 (unknown) or in [1e9, 1e22] FLOP/s"));
  }
  for (const auto& [field, bandwidth] :
       {std::pair{"serving.device_reload_bytes_per_second", serving->device_reload_bytes_per_second()},
        std::pair{"serving.host_reload_bytes_per_second", serving->host_reload_bytes_per_second()},
        std::pair{"serving.disk_reload_bytes_per_second", serving->disk_reload_bytes_per_second()},
        std::pair{"serving.remote_reload_bytes_per_second", serving->remote_reload_bytes_per_second()}}) {
    if (!(bandwidth == 0 || (bandwidth >= 1e3 && bandwidth <= 1e15))) {
      check.Fail(field, absl::StrCat(FormatDouble(bandwidth), ": must be 0 (unknown) or in [1e3, 1e15] bytes/s"));
    }
  }

  const uint64_t cache_bytes = serving->cache_bytes_per_element();
  const uint64_t state_bytes = serving->state_bytes_per_element();
  uint64_t total_layers = 0;
  std::set<std::string> names;
  std::vector<std::string> kinds;
  for (int i = 0; i < definition.layer_groups_size(); ++i) {
    const auto& g = definition.layer_groups(i);
    const std::string at = absl::StrCat("layer_groups[", i, "]");
    if (!ValidName(g.name(), /*allow_upper=*/false)) {
      check.Fail(at + ".name", absl::StrCat("'", g.name(), "' must be 1-128 characters of a-z, 0-9, '-', '_', '.'"));
    } else if (!names.insert(g.name()).second) {
      check.Fail(at + ".name", absl::StrCat("'", g.name(), "' is used by another layer group"));
    }
    check.Range(at + ".num_layers", g.num_layers(), 1, kMaxLayersPerModel);
    total_layers += g.num_layers();

    LayerGroupShape s;
    s.name = g.name();
    s.num_layers = g.num_layers();
    s.alignment_tokens = serving->kv_page_tokens();
    uint64_t projection_params = 0;
    if (g.has_attention()) {
      const auto& a = g.attention();
      check.Range(at + ".attention.num_heads", a.num_heads(), 1, kMaxHeads);
      check.Range(at + ".attention.num_kv_heads", a.num_kv_heads(), 1, kMaxHeads);
      check.Require(a.num_kv_heads() == 0 || a.num_heads() % a.num_kv_heads() == 0,
                    at + ".attention.num_kv_heads", a.num_kv_heads(),
                    absl::StrCat("must divide num_heads = ", a.num_heads()));
      check.Range(at + ".attention.head_dim", a.head_dim(), 1, kMaxHeads);
      check.Range(at + ".attention.window_tokens", a.window_tokens(), 0, kMaxWindow);
      const uint64_t q = uint64_t{a.num_heads()} * a.head_dim();
      const uint64_t kv = uint64_t{a.num_kv_heads()} * a.head_dim();
      s.kind = a.window_tokens() ? MixerKind::kSlidingWindow : MixerKind::kFullCausal;
      s.window_tokens = a.window_tokens();
      s.pair_flops = 2 * uint64_t{a.num_heads()} * (2 * uint64_t{a.head_dim()});
      projection_params = hidden * q + 2 * hidden * kv + q * hidden;
      s.kv_bytes_per_token = 2 * kv * cache_bytes;
      kinds.push_back(MixerKindName(s.kind));
    } else if (g.has_mla()) {
      const auto& m = g.mla();
      check.Range(at + ".mla.num_heads", m.num_heads(), 1, kMaxHeads);
      check.Range(at + ".mla.q_lora_rank", m.q_lora_rank(), 0, kMaxDimension);
      check.Range(at + ".mla.kv_lora_rank", m.kv_lora_rank(), 1, kMaxDimension);
      check.Range(at + ".mla.qk_rope_head_dim", m.qk_rope_head_dim(), 0, kMaxHeads);
      check.Range(at + ".mla.qk_nope_head_dim", m.qk_nope_head_dim(), 0, kMaxHeads);
      check.Range(at + ".mla.v_head_dim", m.v_head_dim(), 1, kMaxHeads);
      const uint64_t heads = m.num_heads();
      const uint64_t qk_dim = uint64_t{m.qk_rope_head_dim()} + m.qk_nope_head_dim();
      check.Require(qk_dim > 0, at + ".mla.qk_rope_head_dim + qk_nope_head_dim", qk_dim, "must be >= 1");
      const uint64_t q_params = m.q_lora_rank()
                                    ? hidden * m.q_lora_rank() + uint64_t{m.q_lora_rank()} * heads * qk_dim
                                    : hidden * heads * qk_dim;
      const uint64_t kv_params = hidden * (uint64_t{m.kv_lora_rank()} + m.qk_rope_head_dim()) +
                                 uint64_t{m.kv_lora_rank()} * heads * (m.qk_nope_head_dim() + m.v_head_dim());
      s.kind = MixerKind::kFullCausal;
      s.latent = true;
      s.pair_flops = 2 * heads * (qk_dim + m.v_head_dim());
      projection_params = q_params + kv_params + heads * m.v_head_dim() * hidden;
      s.kv_bytes_per_token = (uint64_t{m.kv_lora_rank()} + m.qk_rope_head_dim()) * cache_bytes;
      kinds.push_back("mla");
    } else if (g.has_linear()) {
      const auto& l = g.linear();
      check.Range(at + ".linear.num_qk_heads", l.num_qk_heads(), 1, kMaxHeads);
      check.Range(at + ".linear.num_v_heads", l.num_v_heads(), 1, kMaxHeads);
      check.Range(at + ".linear.key_head_dim", l.key_head_dim(), 1, kMaxHeads);
      check.Range(at + ".linear.value_head_dim", l.value_head_dim(), 1, kMaxHeads);
      check.Range(at + ".linear.conv_kernel", l.conv_kernel(), 0, 64);
      if (!serving->has_recurrent_checkpoint_tokens()) {
        check.Fail("serving.recurrent_checkpoint_tokens",
                   absl::StrCat("must be set: ", at, " is a linear (recurrent) group"));
      }
      check.Range("serving.recurrent_checkpoint_tokens", serving->recurrent_checkpoint_tokens(), 1, kMaxAlignmentTokens);
      const uint64_t qk = uint64_t{l.num_qk_heads()} * l.key_head_dim();
      const uint64_t v = uint64_t{l.num_v_heads()} * l.value_head_dim();
      const uint64_t conv_channels = 2 * qk + v;
      const uint64_t state = uint64_t{l.num_v_heads()} * l.key_head_dim() * l.value_head_dim();
      s.kind = MixerKind::kLinear;
      s.alignment_tokens = serving->recurrent_checkpoint_tokens();
      // Delta-rule step per head: S^T k, the rank-1 update and S^T q, 2 FLOPs per state element
      // each; plus the short convolution over q, k and v channels.
      s.recurrent_flops_per_token = 6 * state + 2 * uint64_t{l.conv_kernel()} * conv_channels;
      projection_params = hidden * conv_channels + v * hidden;
      const uint64_t conv_state = l.conv_kernel() ? conv_channels * (l.conv_kernel() - 1) : 0;
      s.state_bytes_per_sequence = (state + conv_state) * state_bytes;
      kinds.push_back("linear");
    } else {
      check.Fail(at, "needs a mixer (attention, mla or linear)");
    }
    s.token_flops = 2 * (projection_params + FfnParams(g, hidden, check, at));
    p.shape_.groups.push_back(std::move(s));
  }
  check.Range("layers (sum over layer_groups)", total_layers, 1, kMaxLayersPerModel);
  if (!check.status().ok()) return check.status();

  std::vector<std::string> distinct;
  for (const auto& k : kinds) {
    if (std::find(distinct.begin(), distinct.end(), k) == distinct.end()) distinct.push_back(k);
  }
  p.attention_summary_ = absl::StrJoin(distinct, "+");
  return p;
}

}  // namespace kvledger
