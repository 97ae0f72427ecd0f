// The offline calculators as the CLI (`kvledger calc`, `kv-bytes`, `explain`) and the HTTP API
// (/api/v1/calc, /kv-bytes, /explain, /profiles) take them: inputs as typed (text or numbers),
// validated with messages that name the input after its field ("prompt_tokens = 0: ..."; the CLI
// rewrites that to its flag), and one JSON form of each answer that both print.
#ifndef KVLEDGER_LIB_WIRE_CALCULATORS_H_
#define KVLEDGER_LIB_WIRE_CALCULATORS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "lib/cost_model/alpha_calculator.h"
#include "lib/profiles/profile_catalog.h"

namespace kvledger {

// How a message names an input: the HTTP API by its field ("prompt_tokens"), the CLI by its flag
// ("--prompt-tokens").
using InputNamer = std::string (*)(absl::string_view field);
std::string FieldName(absl::string_view field);  // the field itself
std::string FlagName(absl::string_view field);   // "--" + the field with '-' for '_'

// The tier an explained record has when none is given (the CLI's --tier and the HTTP API's tier=):
// a hit on the device, or a miss with logical_match_tokens 0.
inline constexpr absl::string_view kDefaultTier = "device";

struct CalcParams {
  std::string alpha;  // a decimal, taken exactly as typed
  std::string attention = "full";  // full | swa | recurrent
  std::optional<double> window_fraction, beta, overhead, queue_share, decode_share;
  std::optional<uint64_t> window, prompt_tokens, checkpoint;
};
absl::StatusOr<AlphaResult> RunCalc(const CalcParams& params, InputNamer name = FieldName);
std::string CalcToJson(const AlphaResult& result, const CalcParams& params);

struct KvBytesParams {
  std::string model;  // a profile name; or the explicit shape below
  std::optional<uint64_t> layers, kv_heads, head_dim, bytes_per_element;
  std::optional<uint64_t> sequences, tokens, budget_bytes, reserved_bytes;
};
struct KvBytesResult {
  Uint128 kv_bytes = 0;
  Uint128 bytes_per_token = 0;
  std::optional<Uint128> state_bytes;  // with a model: recurrent state of all sequences
  std::optional<Uint128> max_tokens;   // with a budget
};
absl::StatusOr<KvBytesResult> RunKvBytes(const KvBytesParams& params, const ProfileCatalog& catalog,
                                         InputNamer name = FieldName);
std::string KvBytesToJson(const KvBytesResult& result);

// A protobuf message (e.g. DerivedFigures for explain) as JSON with the proto field names and
// every field printed. With null_unset, a top-level field with presence that is unset (a figure that was
// not measured or cannot be computed) is printed as null rather than left out.
std::string ProtoToJson(const google::protobuf::Message& message, bool null_unset = false);

// The catalog: per profile its name, attention kinds, layers, bytes per cached token, recurrent
// state bytes, serving settings, and the whole definition.
std::string ProfilesToJson(const ProfileCatalog& catalog);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_WIRE_CALCULATORS_H_
