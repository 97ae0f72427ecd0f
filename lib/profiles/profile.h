// A validated model profile: the proto definition with defaults filled in, and the cost-model
// constants (ModelShape) derived from it once. Immutable after construction; thread-safe to read.
#ifndef KVLEDGER_LIB_PROFILES_PROFILE_H_
#define KVLEDGER_LIB_PROFILES_PROFILE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kvledger/v1/profile.pb.h"
#include "lib/cost_model/model_shape.h"

namespace kvledger {

// The model label of names folded past --max_models: reserved, so no profile and no client's model
// can take it.
inline constexpr char kOtherModelLabel[] = "other";

inline constexpr uint32_t kDefaultKvPageTokens = 16;
// KV page size and recurrent checkpoint interval, in tokens: at most this.
inline constexpr uint32_t kMaxAlignmentTokens = 1u << 20;
inline constexpr uint32_t kDefaultBytesPerElement = 2;
// A context holds a prompt token and an output token at least.
inline constexpr uint64_t kMinContextTokens = 2;

class Profile {
 public:
  // Validates `definition` and derives its constants. INVALID_ARGUMENT names the profile, the
  // field path and the problem, e.g.
  // "profile 'x': layer_groups[0].attention.num_kv_heads = 3: must divide num_heads = 32".
  static absl::StatusOr<Profile> Make(const v1::ModelProfile& definition);

  const std::string& name() const { return definition_.name(); }
  // With defaults filled in (every serving field set).
  const v1::ModelProfile& definition() const { return definition_; }
  const ModelShape& shape() const { return shape_; }
  // Measured prefill throughput in FLOP/s, 0 when unknown.
  double prefill_flops_per_second() const { return definition_.serving().prefill_flops_per_second(); }
  // The longest sequence the deployment serves (prompt plus output), when the profile states it.
  std::optional<uint64_t> context_tokens() const {
    if (!definition_.serving().has_context_tokens()) return std::nullopt;
    return definition_.serving().context_tokens();
  }
  // Attention kinds of the groups joined by '+', e.g. "sliding_window+full", "linear+mla".
  const std::string& attention_summary() const { return attention_summary_; }
  // Index of the layer group named `name`, or -1.
  int GroupIndex(absl::string_view name) const;

 private:
  Profile() = default;
  v1::ModelProfile definition_;
  ModelShape shape_;
  std::string attention_summary_;
};

}  // namespace kvledger

#endif  // KVLEDGER_LIB_PROFILES_PROFILE_H_
