#include "server/http_api.h"
#include "lib/base/quote.h"

#include <algorithm>
#include <fstream>
#include <functional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kvledger/v1/record.pb.h"
#include "lib/accounting/ledger.h"
#include "lib/cost_model/number_format.h"
#include "lib/wire/advice_proto.h"
#include "lib/wire/calculators.h"
#include "lib/planning/capacity.h"
#include "lib/wire/json_writer.h"
#include "lib/wire/plan_json.h"
#include "lib/wire/capacity_proto.h"
#include "lib/wire/record_proto.h"
#include "server/explore_page.h"

namespace kvledger {
namespace {

HttpResponse Json(std::string body) { return HttpResponse::Of(200, "application/json", std::move(body)); }

// {"error": message[, "reason": the reject reason]} with the status's HTTP code (HttpStatusOf): a
// refused record or request names its reason (RejectReasonLabel), as the RPCs do in their trailing
// metadata.
HttpResponse Refused(const absl::Status& status, std::optional<std::string> reason = std::nullopt) {
  JsonObject o;
  o.String("error", status.message());
  if (reason) o.String("reason", *reason);
  return HttpResponse::Of(HttpStatusOf(status), "application/json", o.str());
}

HttpResponse BadRequest(absl::string_view message, std::optional<std::string> reason = std::nullopt) {
  return Refused(absl::InvalidArgumentError(message), std::move(reason));
}

// A query parameter that is a number: absent, a value, or a message naming it.
template <typename T>
absl::Status Number(const HttpRequest& r, const char* name, std::optional<T>* out) {
  const auto text = r.Param(name);
  if (!text) return absl::OkStatus();
  T value{};
  if constexpr (std::is_floating_point_v<T>) {
    if (!absl::SimpleAtod(*text, &value)) {
      return absl::InvalidArgumentError(absl::StrCat(name, " = ", Quoted(*text), ": must be a number"));
    }
  } else if (auto rule = ParseWholeNumber(*text, &value)) {  // the CLI's rule for its flags, too
    return absl::InvalidArgumentError(absl::StrCat(name, " = ", Quoted(*text), ": ", *rule));
  }
  *out = value;
  return absl::OkStatus();
}

std::string Text(const HttpRequest& r, const char* name, std::string fallback = "") {
  return r.Param(name).value_or(std::move(fallback));
}

// Every input of a calculator (lib/wire/calculators.h) from the parameter of its field.
template <typename Params>
absl::Status ReadInputs(const HttpRequest& r, const std::vector<CalculatorInput<Params>>& inputs, Params& p) {
  for (const auto& input : inputs) {
    if (input.required && !r.Param(input.field)) {
      return absl::InvalidArgumentError(absl::StrCat(input.field, ": required"));
    }
    absl::Status read = std::visit(
        [&](auto member) {
          if constexpr (std::is_same_v<std::decay_t<decltype(p.*member)>, std::string>) {
            if (auto text = r.Param(input.field)) p.*member = *text;
            return absl::OkStatus();
          } else {
            return Number(r, input.field, &(p.*member));
          }
        },
        input.member);
    if (!read.ok()) return read;
  }
  return absl::OkStatus();
}

HttpResponse Calc(const HttpRequest& r) {
  CalcParams p;
  if (absl::Status s = ReadInputs(r, CalcInputs(), p); !s.ok()) return Refused(s);
  auto result = RunCalc(p);
  if (!result.ok()) return Refused(result.status());
  return Json(CalcToJson(*result, p));
}

HttpResponse KvBytes(const HttpRequest& r, const ProfileCatalog& catalog) {
  KvBytesParams p;
  if (absl::Status s = ReadInputs(r, KvBytesInputs(), p); !s.ok()) return Refused(s);
  auto result = RunKvBytes(p, catalog);
  if (!result.ok()) return Refused(result.status());
  return Json(KvBytesToJson(*result));
}

// A proto3 optional number of a Record: a parameter of explain by its own name.
bool IsOptionalRecordNumber(const google::protobuf::FieldDescriptor* field) {
  using google::protobuf::FieldDescriptor;
  return !field->is_repeated() && field->containing_oneof() != nullptr &&
         (field->cpp_type() == FieldDescriptor::CPPTYPE_INT64 || field->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE);
}

// Every optional number of a Record (recoverable_tokens, the latencies, predicted_match_tokens, queue,
// output and decode, ...) from the parameter of the same name: a field added to the record is a
// parameter without a change here.
absl::Status OptionalRecordNumbers(const HttpRequest& r, v1::Record& record) {
  const auto* descriptor = record.GetDescriptor();
  const auto* reflection = record.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const auto* field = descriptor->field(i);
    if (!IsOptionalRecordNumber(field)) continue;
    if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_INT64) {
      std::optional<int64_t> value;
      if (absl::Status s = Number(r, field->name().c_str(), &value); !s.ok()) return s;
      if (value) reflection->SetInt64(&record, field, *value);
    } else if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE) {
      std::optional<double> value;
      if (absl::Status s = Number(r, field->name().c_str(), &value); !s.ok()) return s;
      if (value) reflection->SetDouble(&record, field, *value);
    }
  }
  return absl::OkStatus();
}

HttpResponse Explain(const HttpRequest& r, const ModelRegistry& registry, const LiveRates& rates) {
  v1::Record record;
  record.set_model(Text(r, "model"));
  std::optional<int64_t> prompt, match;
  for (absl::Status s : {Number(r, "prompt_tokens", &prompt), Number(r, "logical_match_tokens", &match),
                         OptionalRecordNumbers(r, record)}) {
    if (!s.ok()) return Refused(s);
  }
  record.set_prompt_tokens(prompt.value_or(0));
  record.set_logical_match_tokens(match.value_or(0));
  ExplainInputs inputs;
  inputs.tier = Text(r, "tier");
  if (absl::Status s = SetTier(record, inputs.tier); !s.ok()) return Refused(s);
  inputs.alpha = r.Param("alpha");
  for (absl::Status s : {Number(r, "kv_page_tokens", &inputs.kv_page_tokens),
                         Number(r, "recurrent_checkpoint_tokens", &inputs.recurrent_checkpoint_tokens)}) {
    if (!s.ok()) return Refused(s);
  }
  auto subject = PrepareExplain(std::move(record), inputs, registry, match.has_value());
  if (!subject.ok()) return Refused(subject.status());
  auto figures =
      Evaluate(FactsFromProto(subject->record), subject->model, LiveEstimateSource(subject->model, &rates));
  if (!figures.ok()) return BadRequest(figures.rejection().message, RejectReasonLabel(figures.rejection().reason));
  return Json(ProtoToJson(FiguresToProto(*figures, subject->record.model()), /*null_unset=*/true));
}

HttpResponse Advise(const HttpRequest& r, const ModelRegistry& registry, const LiveRates& rates,
                    const FleetRates* fleet) {
  v1::AdviceRequest request;
  request.set_model(Text(r, "model"));
  std::optional<int64_t> prompt;
  if (absl::Status s = Number(r, "prompt_tokens", &prompt); !s.ok()) return Refused(s);
  request.set_prompt_tokens(prompt.value_or(0));
  // Every candidate is parsed (the request line is bounded to 16 KiB), so Advise's count rule names
  // the real number.
  for (int i = 0;; ++i) {
    const auto text = r.Param("candidate", i);
    if (!text) break;
    auto candidate = ParseCandidate(*text, absl::StrCat("candidate[", i, "]"));
    if (!candidate.ok()) return Refused(candidate.status());
    *request.add_candidates() = *candidate;
  }
  auto advice = kvledger::Advise(AdviceRequestFromProto(request), registry, &rates, fleet);
  if (!advice.ok()) return Refused(advice.status(), RejectReasonOf(advice.status()));
  return Json(AdviceToJson(AdviceToProto(*advice)));
}

// The live capacity curves, as the CapacityCurve RPC answers (unset figures as null).
HttpResponse Capacity(const HttpRequest& r, const ModelRegistry& registry, const CapacityCurves* curves) {
  if (curves == nullptr) return Refused(NoCurvesStatus());
  auto curve = CurveToProto(*curves, registry, Text(r, "model"));
  if (!curve.ok()) return Refused(curve.status());
  return Json(ProtoToJson(*curve, /*null_unset=*/true));
}

// This replica's totals per model (summed over tiers), with the fleet ratios the explorer shows.
HttpResponse TotalsJson(const ModelRegistry& registry, const Aggregator& aggregator) {
  const auto snapshot = aggregator.Snapshot();
  const auto labels = registry.slots().LabelsBySlot();
  // Cells come ordered by (slot, tier): a model's tiers are adjacent.
  std::vector<std::pair<uint32_t, kvledger::Totals>> per_model;
  for (const auto& cell : snapshot.cells) {
    if (per_model.empty() || per_model.back().first != cell.model_slot) per_model.emplace_back(cell.model_slot, Totals());
    per_model.back().second.Merge(cell.totals);
  }
  auto ratio = [](Uint128 part, Uint128 whole) {
    return whole == 0 ? std::optional<double>() : Uint128ToDouble(part) / Uint128ToDouble(whole);
  };
  std::vector<JsonObject> models;
  for (const auto& [slot, t] : per_model) {
    const Uint128 prompt = t.counter(Counter::kPromptTokens);
    const Uint128 attention = t.counter(Counter::kAttentionBaselineFlops);
    const Uint128 prefill = t.counter(Counter::kPrefillBaselineFlops);
    JsonObject o;
    o.String("model", slot < labels.size() ? labels[slot].model : std::string(kOtherModelLabel))
        .Integer("requests", t.counter(Counter::kRequests))
        .Integer("prompt_tokens", prompt)
        .Integer("logical_match_tokens", t.counter(Counter::kLogicalMatchTokens))
        .Integer("recoverable_tokens", t.counter(Counter::kRecoverableTokens))
        .Integer("reused_tokens", t.counter(Counter::kReusedTokens))
        .Integer("attention_baseline_flops", attention)
        .Integer("attention_avoided_flops", t.counter(Counter::kAttentionAvoidedFlops, Boundary::kReused))
        .Integer("prefill_baseline_flops", prefill)
        .Integer("prefill_avoided_flops", t.counter(Counter::kPrefillAvoidedFlops, Boundary::kReused))
        .Number("logical_hit_ratio", ratio(t.counter(Counter::kLogicalMatchTokens), prompt))
        .Number("reused_hit_ratio", ratio(t.counter(Counter::kReusedTokens), prompt))
        .Number("attention_avoided_fraction",
                ratio(t.counter(Counter::kAttentionAvoidedFlops, Boundary::kReused), attention))
        .Number("prefill_avoided_fraction", ratio(t.counter(Counter::kPrefillAvoidedFlops, Boundary::kReused), prefill));
    models.push_back(o);
  }
  JsonObject out;
  out.Array("models", models);
  return Json(out.str());
}

// GET /: where to go from the port's root.
constexpr char kIndexPage[] =
    "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>kvledger</title></head><body>\n"
    "<h1>kvledger</h1><ul>\n"
    "<li><a href=\"/explore\">/explore</a>: the what-if explorer</li>\n"
    "<li><a href=\"/metrics\">/metrics</a>: the Prometheus exposition</li>\n"
    "<li><a href=\"/api/v1/profiles\">/api/v1/profiles</a>, <a href=\"/api/v1/totals\">/api/v1/totals</a>: "
    "the JSON API (also calc, kv-bytes, explain, advise, plan)</li>\n"
    "</ul></body></html>\n";

// The most capacities one /api/v1/plan computes: each is one pass over the trace (about 20 ms for
// 12,000 requests), on one of the HTTP workers.
constexpr size_t kMaxApiCapacities = 16;

// What the trace buys at each capacity for a model: `kvledger plan --json` with the trace's summary.
HttpResponse PlanTrace(const HttpRequest& r, const ProfileCatalog& catalog, PlanningTrace* trace) {
  if (trace == nullptr) {
    return Refused(absl::NotFoundError("this server was given no trace: start it with --trace_file=PATH (docs/planning.md)"));
  }
  const std::string model = Text(r, "model");
  const Profile* profile = catalog.Find(model);
  if (profile == nullptr) return BadRequest(absl::StrCat("model = ", Quoted(model), ": no profile of that name"));
  CapacityInputs inputs{Text(r, "capacity_tokens", "1e5:1e8:10,inf"), Text(r, "host_capacity_tokens"),
                        Text(r, "disk_capacity_tokens")};
  PlanConfig base;
  base.block_tokens = trace->block_tokens;
  if (absl::Status s = Number(r, "context_tokens", &base.context_tokens); !s.ok()) return BadRequest(s.message());
  if (base.context_tokens) {
    if (absl::Status s = CheckContextTokens("context_tokens", *base.context_tokens); !s.ok()) return BadRequest(s.message());
  }
  auto configs = CapacityConfigs(inputs, base, kMaxApiCapacities);
  if (!configs.ok()) return Refused(configs.status());
  std::unique_lock<std::mutex> lock(trace->running, std::try_to_lock);
  if (!lock.owns_lock()) {
    return Refused(absl::UnavailableError("a plan is already running on this server; retry"));
  }
  auto results = PlanAll(trace->requests, *profile, *configs);
  if (!results.ok()) return Refused(results.status());
  JsonObject summary;
  summary.String("name", trace->name).Integer("requests", trace->requests.size());
  JsonObject o;
  o.Object("trace", summary).Json("plan", PlanRunToJson(*profile, trace->block_tokens, *results));
  return Json(o.str());
}

// The parameters a route takes; any other is refused, naming it and the known ones, so a misspelled
// parameter is never read as absent.
using Handler = std::function<HttpResponse(const HttpRequest&)>;
Handler Taking(std::vector<std::string> known, Handler handler) {
  std::sort(known.begin(), known.end());
  return [known = std::move(known), handler = std::move(handler)](const HttpRequest& r) {
    std::vector<std::string> names = r.ParamNames();
    for (const std::string& name : names) {
      if (std::binary_search(known.begin(), known.end(), name)) continue;
      return BadRequest(absl::StrCat(Quoted(name), ": not a parameter of ", r.path, known.empty() ? "; it takes none"
                                     : "; it takes ", absl::StrJoin(known, ", ")));
    }
    return handler(r);
  };
}

// Explain's parameters: the record's, and the what-if profile settings.
std::vector<std::string> ExplainParameters() {
  std::vector<std::string> known = {"model", "tier", "prompt_tokens", "logical_match_tokens", "alpha",
                                    "kv_page_tokens", "recurrent_checkpoint_tokens"};
  const auto* descriptor = v1::Record::descriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    if (IsOptionalRecordNumber(descriptor->field(i))) known.push_back(descriptor->field(i)->name());
  }
  return known;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PlanningTrace>> LoadPlanningTrace(const std::string& path, const std::string& format,
                                                                  uint64_t block_tokens) {
  const absl::StatusOr<TraceFormat> read_as = ParseTraceFormat("--trace_format", format);
  if (!read_as.ok()) return read_as.status();
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--trace_file = ", Quoted(path), ": cannot be read"));
  TraceReadResult read = ReadTrace(in, TraceReadOptions{*read_as, block_tokens, kServerTraceLimits});
  if (absl::Status s = read.Check(absl::StrCat("--trace_file = ", Quoted(path))); !s.ok()) return s;
  auto trace = std::make_unique<PlanningTrace>();
  trace->name = path;
  trace->block_tokens = read.block_tokens;
  trace->requests = std::move(read.requests);
  return trace;
}

std::vector<HttpListener::Route> HttpApiRoutes(const ModelRegistry& registry, const Aggregator& aggregator,
                                               const LiveRates& rates, const FleetRates* fleet,
                                               PlanningTrace* trace, const CapacityCurves* curves) {
  const ProfileCatalog& catalog = registry.catalog();
  return {
      {"/api/v1/calc", Taking(InputFields(CalcInputs()), [](const HttpRequest& r) { return Calc(r); })},
      {"/api/v1/kv-bytes",
       Taking(InputFields(KvBytesInputs()), [&catalog](const HttpRequest& r) { return KvBytes(r, catalog); })},
      {"/api/v1/explain", Taking(ExplainParameters(), [&registry, &rates](const HttpRequest& r) { return Explain(r, registry, rates); })},
      {"/api/v1/advise", Taking({"model", "prompt_tokens", "candidate"},
                                [&registry, &rates, fleet](const HttpRequest& r) { return Advise(r, registry, rates, fleet); })},
      {"/api/v1/profiles", Taking({}, [&catalog](const HttpRequest&) { return Json(ProfilesToJson(catalog)); })},
      {"/api/v1/totals", Taking({}, [&registry, &aggregator](const HttpRequest&) {
                           return TotalsJson(registry, aggregator);
                         })},
      {"/api/v1/capacity", Taking({"model"}, [&registry, curves](const HttpRequest& r) {
                             return Capacity(r, registry, curves);
                           })},
      {"/api/v1/plan", Taking({"model", "capacity_tokens", "host_capacity_tokens", "disk_capacity_tokens", "context_tokens"},
                              [&catalog, trace](const HttpRequest& r) { return PlanTrace(r, catalog, trace); })},
      {"/", [](const HttpRequest&) { return HttpResponse::Of(200, "text/html; charset=utf-8", kIndexPage); }},
      {"/explore", [](const HttpRequest&) {
         return HttpResponse::Of(200, "text/html; charset=utf-8", std::string(kExplorePage));
       }},
  };
}

}  // namespace kvledger
