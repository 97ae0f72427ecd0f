// The offline calculators as the CLI (`kvledger calc`, `kv-bytes`, `explain`) and the HTTP API
// (/api/v1/calc, /kv-bytes, /explain, /profiles) take them: inputs as typed (text or numbers),
// validated with messages that name each input as the surface calls it (the field, "prompt_tokens
// = 0: ...", or the CLI's flag, "--prompt-tokens = 0: ..."), and one JSON form of each answer that
// both print.
#ifndef KVLEDGER_LIB_WIRE_CALCULATORS_H_
#define KVLEDGER_LIB_WIRE_CALCULATORS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "lib/cost_model/alpha_calculator.h"
#include "lib/wire/proto_json.h"
#include "lib/profiles/model_registry.h"
#include "lib/profiles/profile_catalog.h"
#include "kvledger/v1/record.pb.h"
#include <memory>

namespace kvledger {

// How a message names an input (InputNamer, FieldName: lib/cost_model/alpha_calculator.h); the CLI's:
std::string FlagName(absl::string_view field);   // "--" + the field with '-' for '_'

// Sets `record`'s tier from a label (the CLI's --tier, the HTTP API's tier=), INVALID_ARGUMENT naming
// it when unknown. An empty label is no tier given: a hit is on the device, a miss (its
// logical_match_tokens 0) has no tier, "none" (it would otherwise count as a device miss).
absl::Status SetTier(v1::Record& record, absl::string_view label, InputNamer name = FieldName);

// A hit ratio as typed (calc's alpha, explain's alpha): a number in [0, 1] (INVALID_ARGUMENT naming
// it otherwise), and with prompt_tokens N in [1, 2^31] the match floor(alpha N) — exact from the
// digits of a plain decimal ("0.3" of 1000 is 300), else from the double.
struct Alpha {
  double value = 0;
  std::optional<uint64_t> match_tokens;
};
absl::StatusOr<Alpha> ParseAlpha(absl::string_view text, std::optional<uint64_t> prompt_tokens,
                                 InputNamer name = FieldName);

struct CalcParams {
  std::string alpha;  // a decimal, taken exactly as typed
  std::string attention = "full";  // full | swa | recurrent
  std::optional<double> window_fraction, beta, overhead, queue_share, decode_share;
  std::optional<uint64_t> window, prompt_tokens, checkpoint;
};

// One input of a calculator, described once for every surface: its field (the HTTP API's parameter;
// the CLI's flag is FlagName(field)), what --help says of it, whether it is required, and where it
// goes in the calculator's params.
template <typename Params>
struct CalculatorInput {
  const char* field;
  const char* help;
  std::variant<std::string Params::*, std::optional<double> Params::*, std::optional<uint64_t> Params::*> member;
  bool required = false;
};
const std::vector<CalculatorInput<CalcParams>>& CalcInputs();
absl::StatusOr<AlphaResult> RunCalc(const CalcParams& params, InputNamer name = FieldName);
std::string CalcToJson(const AlphaResult& result, const CalcParams& params);

struct KvBytesParams {
  std::string model;  // a profile name; or the explicit shape below
  std::optional<uint64_t> layers, kv_heads, head_dim, bytes_per_element;
  std::optional<uint64_t> sequences, tokens, budget_bytes, reserved_bytes;
};
const std::vector<CalculatorInput<KvBytesParams>>& KvBytesInputs();

// The field names of `inputs`, in order.
template <typename Params>
std::vector<std::string> InputFields(const std::vector<CalculatorInput<Params>>& inputs) {
  std::vector<std::string> fields;
  for (const auto& input : inputs) fields.push_back(input.field);
  return fields;
}
struct KvBytesResult {
  Uint128 kv_bytes = 0;
  Uint128 bytes_per_token = 0;
  std::optional<Uint128> state_bytes;  // with a model: recurrent state of all sequences
  std::optional<Uint128> max_tokens;   // with a budget
};
absl::StatusOr<KvBytesResult> RunKvBytes(const KvBytesParams& params, const ProfileCatalog& catalog,
                                         InputNamer name = FieldName);
std::string KvBytesToJson(const KvBytesResult& result);

// Explain's inputs beside the record, on every surface (the CLI's explain and /api/v1/explain): the
// match given as a hit ratio alpha (logical_match_tokens = floor(alpha N), exactly from the digits),
// and the model's profile with another KV page size or recurrent checkpoint interval (what-if),
// validated like a profile file.
struct ExplainInputs {
  std::string tier;  // as given (empty: none given, SetTier's default for the final match)
  std::optional<std::string> alpha;
  std::optional<uint64_t> kv_page_tokens, recurrent_checkpoint_tokens;
  bool what_if() const { return kv_page_tokens || recurrent_checkpoint_tokens; }
};
// The record and the profile to cost it with, after the inputs are applied. `what_if` holds an
// overridden profile for as long as the resolution points at it.
struct ExplainSubject {
  v1::Record record;
  absl::StatusOr<Resolution> model = absl::UnknownError("unresolved");
  std::unique_ptr<Profile> what_if;
};
// INVALID_ARGUMENT naming the input (by `name`) for alpha given with logical_match_tokens, an alpha
// that is not a decimal in [0, 1] or without prompt_tokens, or an override out of range. An unknown
// model is left for Evaluate to refuse.
absl::StatusOr<ExplainSubject> PrepareExplain(v1::Record record, const ExplainInputs& inputs,
                                               const ModelRegistry& registry, bool match_given,
                                               InputNamer name = FieldName);

// The catalog: per profile its name, attention kinds, layers, bytes per cached token, recurrent
// state bytes, serving settings, and the whole definition.
std::string ProfilesToJson(const ProfileCatalog& catalog);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_WIRE_CALCULATORS_H_
