#include "lib/profiles/profile.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/cost_model/layer_costs.h"
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

// The FFN's parameters touched per token, its dimensions checked first.
uint64_t FfnParams(const v1::LayerGroup& g, uint64_t hidden, Checker& check, const std::string& at) {
  if (g.has_dense()) {
    check.Range(at + ".dense.intermediate_size", g.dense().intermediate_size(), 1, kMaxDimension);
    return DenseFfnParams(hidden, g.dense().intermediate_size());
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
    return MoeFfnParams(hidden, {m.num_experts(), m.top_k(), m.expert_intermediate_size(), m.num_shared_experts(),
                                 m.shared_intermediate_size()});
  }
  check.Fail(at, "needs an ffn (dense or moe)");
  return 0;
}

uint64_t AttentionGroup(const v1::Attention& a, const std::string& at, uint64_t hidden, const v1::ServingSettings& serving,
                        Checker& check, LayerGroupShape& s) {
  check.Range(at + ".attention.num_heads", a.num_heads(), 1, kMaxHeads);
  check.Range(at + ".attention.num_kv_heads", a.num_kv_heads(), 1, kMaxHeads);
  check.Require(a.num_kv_heads() == 0 || a.num_heads() % a.num_kv_heads() == 0, at + ".attention.num_kv_heads",
                a.num_kv_heads(), absl::StrCat("must divide num_heads = ", a.num_heads()));
  check.Range(at + ".attention.head_dim", a.head_dim(), 1, kMaxHeads);
  check.Range(at + ".attention.window_tokens", a.window_tokens(), 0, kMaxWindow);
  return ShapeAttention({a.num_heads(), a.num_kv_heads(), a.head_dim(), a.window_tokens()}, hidden,
                        serving.cache_bytes_per_element(), s);
}

uint64_t MlaGroup(const v1::MultiLatentAttention& m, const std::string& at, uint64_t hidden,
                  const v1::ServingSettings& serving, Checker& check, LayerGroupShape& s) {
  check.Range(at + ".mla.num_heads", m.num_heads(), 1, kMaxHeads);
  check.Range(at + ".mla.q_lora_rank", m.q_lora_rank(), 0, kMaxDimension);
  check.Range(at + ".mla.kv_lora_rank", m.kv_lora_rank(), 1, kMaxDimension);
  check.Range(at + ".mla.qk_rope_head_dim", m.qk_rope_head_dim(), 0, kMaxHeads);
  check.Range(at + ".mla.qk_nope_head_dim", m.qk_nope_head_dim(), 0, kMaxHeads);
  check.Range(at + ".mla.v_head_dim", m.v_head_dim(), 1, kMaxHeads);
  const uint64_t qk_dim = uint64_t{m.qk_rope_head_dim()} + m.qk_nope_head_dim();
  check.Require(qk_dim > 0, at + ".mla.qk_rope_head_dim + qk_nope_head_dim", qk_dim, "must be >= 1");
  return ShapeMla({m.num_heads(), m.q_lora_rank(), m.kv_lora_rank(), m.qk_rope_head_dim(), m.qk_nope_head_dim(),
                   m.v_head_dim()},
                  hidden, serving.cache_bytes_per_element(), s);
}

uint64_t LinearGroup(const v1::LinearAttention& l, const std::string& at, uint64_t hidden,
                     const v1::ServingSettings& serving, Checker& check, LayerGroupShape& s) {
  check.Range(at + ".linear.num_qk_heads", l.num_qk_heads(), 1, kMaxHeads);
  check.Range(at + ".linear.num_v_heads", l.num_v_heads(), 1, kMaxHeads);
  check.Range(at + ".linear.key_head_dim", l.key_head_dim(), 1, kMaxHeads);
  check.Range(at + ".linear.value_head_dim", l.value_head_dim(), 1, kMaxHeads);
  check.Range(at + ".linear.conv_kernel", l.conv_kernel(), 0, 64);
  if (!serving.has_recurrent_checkpoint_tokens()) {
    check.Fail("serving.recurrent_checkpoint_tokens", absl::StrCat("must be set: ", at, " is a linear (recurrent) group"));
  }
  check.Range("serving.recurrent_checkpoint_tokens", serving.recurrent_checkpoint_tokens(), 1, kMaxAlignmentTokens);
  s.alignment_tokens = serving.recurrent_checkpoint_tokens();
  return ShapeLinear({l.num_qk_heads(), l.num_v_heads(), l.key_head_dim(), l.value_head_dim(), l.conv_kernel()},
                     hidden, serving.state_bytes_per_element(), s);
}

// One layer group, checked, as its shape; `kind` names its mixer for the attention summary.
LayerGroupShape GroupShape(const v1::LayerGroup& g, const std::string& at, uint64_t hidden,
                           const v1::ServingSettings& serving, Checker& check, std::string& kind) {
  LayerGroupShape s;
  s.name = g.name();
  s.num_layers = g.num_layers();
  s.alignment_tokens = serving.kv_page_tokens();
  uint64_t projection_params = 0;
  if (g.has_attention()) {
    projection_params = AttentionGroup(g.attention(), at, hidden, serving, check, s);
    kind = MixerKindName(s.kind);
  } else if (g.has_mla()) {
    projection_params = MlaGroup(g.mla(), at, hidden, serving, check, s);
    kind = "mla";
  } else if (g.has_linear()) {
    projection_params = LinearGroup(g.linear(), at, hidden, serving, check, s);
    kind = "linear";
  } else {
    check.Fail(at, "needs a mixer (attention, mla or linear)");
  }
  s.token_flops = TokenFlops(projection_params, FfnParams(g, hidden, check, at));
  return s;
}

// The serving settings, their defaults filled in, checked.
void CheckServing(v1::ServingSettings& serving, Checker& check) {
  if (!serving.has_kv_page_tokens()) serving.set_kv_page_tokens(kDefaultKvPageTokens);
  if (!serving.has_cache_bytes_per_element()) serving.set_cache_bytes_per_element(kDefaultBytesPerElement);
  if (!serving.has_state_bytes_per_element()) serving.set_state_bytes_per_element(kDefaultBytesPerElement);
  if (!serving.has_prefill_flops_per_second()) serving.set_prefill_flops_per_second(0);
  check.Range("serving.kv_page_tokens", serving.kv_page_tokens(), 1, kMaxAlignmentTokens);
  check.Range("serving.cache_bytes_per_element", serving.cache_bytes_per_element(), 1, 8);
  check.Range("serving.state_bytes_per_element", serving.state_bytes_per_element(), 1, 8);
  if (serving.has_context_tokens()) {
    check.Range("serving.context_tokens", serving.context_tokens(), kMinContextTokens, kMaxTokens);
  }
  const double fps = serving.prefill_flops_per_second();
  if (!(fps == 0 || (fps >= 1e9 && fps <= 1e22))) {
    check.Fail("serving.prefill_flops_per_second",
               absl::StrCat(FormatDouble(fps), ": must be 0 (unknown) or in [1e9, 1e22] FLOP/s"));
  }
  for (const auto& [field, bandwidth] :
       {std::pair{"serving.device_reload_bytes_per_second", serving.device_reload_bytes_per_second()},
        std::pair{"serving.host_reload_bytes_per_second", serving.host_reload_bytes_per_second()},
        std::pair{"serving.disk_reload_bytes_per_second", serving.disk_reload_bytes_per_second()},
        std::pair{"serving.remote_reload_bytes_per_second", serving.remote_reload_bytes_per_second()}}) {
    if (!(bandwidth == 0 || (bandwidth >= 1e3 && bandwidth <= 1e15))) {
      check.Fail(field, absl::StrCat(FormatDouble(bandwidth), ": must be 0 (unknown) or in [1e3, 1e15] bytes/s"));
    }
  }
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
  v1::ServingSettings& serving = *p.definition_.mutable_serving();
  CheckServing(serving, check);
  const uint64_t hidden = definition.hidden_size();
  check.Range("hidden_size", hidden, 1, kMaxDimension);
  check.Range("vocab_size", definition.vocab_size(), 0, kMaxDimension);
  check.Range("layer_groups (count)", definition.layer_groups_size(), 1, kMaxGroups);
  uint64_t total_layers = 0;
  std::set<std::string> names;
  std::vector<std::string> kinds;  // distinct, in order of first use
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
    std::string kind;
    p.shape_.groups.push_back(GroupShape(g, at, hidden, serving, check, kind));
    if (!kind.empty() && std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
  }
  check.Range("layers (sum over layer_groups)", total_layers, 1, kMaxLayersPerModel);
  if (!check.status().ok()) return check.status();
  p.attention_summary_ = absl::StrJoin(kinds, "+");
  return p;
}

}  // namespace kvledger
