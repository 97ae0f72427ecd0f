#include "server/metrics_exposition.h"

#include <array>
#include <charconv>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kvledger {
namespace {

// Label values escaped as the text format requires: backslash, double quote, newline.
void AppendEscaped(std::string& out, absl::string_view value) {
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

void AppendInteger(std::string& out, Uint128 value) {
  if (value <= UINT64_MAX) {
    absl::StrAppend(&out, static_cast<uint64_t>(value));
  } else {
    out += Uint128ToString(value);
  }
}

// A sum in 1e-9 units as an exact decimal: "0.5", "3", "0.000000001".
void AppendNanoUnits(std::string& out, Uint128 nanos) {
  constexpr uint64_t kPerUnit = 1'000'000'000;
  AppendInteger(out, nanos / kPerUnit);
  uint64_t fraction = static_cast<uint64_t>(nanos % kPerUnit);
  if (fraction == 0) return;
  int digits = 9;
  while (fraction % 10 == 0) {
    fraction /= 10;
    --digits;
  }
  const std::string text = absl::StrCat(fraction);
  out += '.';
  out.append(static_cast<size_t>(digits) - text.size(), '0');
  out += text;
}

void AppendHeader(std::string& out, const char* name, const char* help, const char* type) {
  absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

// `name{labels,extra}` then a space; `labels` is already escaped, `extra` may be empty.
void AppendSeries(std::string& out, absl::string_view name, absl::string_view suffix, absl::string_view labels,
                  absl::string_view extra = {}) {
  out.append(name.data(), name.size());
  out.append(suffix.data(), suffix.size());
  out += '{';
  out.append(labels.data(), labels.size());
  if (!extra.empty()) {
    if (!labels.empty()) out += ',';
    out.append(extra.data(), extra.size());
  }
  out += "} ";
}

template <size_t kBuckets>
void AppendHistogram(std::string& out, const char* name, const std::string& labels, const FixedHistogram<kBuckets>& h,
                     const std::array<std::string, kBuckets + 1>& le) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= kBuckets; ++i) {
    cumulative += h.counts[i];
    AppendSeries(out, name, "_bucket", labels, le[i]);
    absl::StrAppend(&out, cumulative, "\n");
  }
  AppendSeries(out, name, "_sum", labels);
  AppendNanoUnits(out, h.sum_nanounits);
  out += '\n';
  AppendSeries(out, name, "_count", labels);
  absl::StrAppend(&out, h.count, "\n");
}

// le="..." per bucket, +Inf last.
const std::array<std::string, kLatencyBucketsNanos.size() + 1>& LatencyLe() {
  static const auto le = [] {
    std::array<std::string, kLatencyBucketsNanos.size() + 1> out;
    for (size_t i = 0; i < kLatencyBucketsNanos.size(); ++i) {
      std::string bound;
      AppendNanoUnits(bound, kLatencyBucketsNanos[i]);
      out[i] = absl::StrCat("le=\"", bound, "\"");
    }
    out.back() = "le=\"+Inf\"";
    return out;
  }();
  return le;
}

const std::array<std::string, kRatioBuckets + 1>& RatioLe() {
  static const auto le = [] {
    std::array<std::string, kRatioBuckets + 1> out;
    for (int k = 1; k <= kRatioBuckets; ++k) {
      std::string bound;
      AppendNanoUnits(bound, Uint128{1'000'000'000} * k / kRatioBuckets);
      out[k - 1] = absl::StrCat("le=\"", bound, "\"");
    }
    out.back() = "le=\"+Inf\"";
    return out;
  }();
  return le;
}

void AppendDouble(std::string& out, double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, result.ptr);
}

std::string Label(const char* name, absl::string_view value) {
  std::string out = absl::StrCat(name, "=\"");
  AppendEscaped(out, value);
  return out += '"';
}

std::string ModelLabelOf(const std::vector<ModelLabel>& models, uint32_t slot) {
  return Label("model", slot < models.size() ? absl::string_view(models[slot].model) : kOtherModelLabel);
}

}  // namespace

// Engine statistics (lib/accounting/engine_stats.h): aggregate transfers per (model, tier),
// unrecorded requests per (model, reason), rejected entries per reason.
void MetricsExposition::WriteEngineStats(std::string& out, const std::vector<ModelLabel>& models) const {
  const EngineStats::Snapshot totals = engine_stats_->Totals();
  struct TransferFamily {
    const char* name;
    const char* help;
    bool seconds;
    Uint128 (*value)(const EngineStats::TransferTotals&);
  };
  for (const TransferFamily& f : {
           TransferFamily{"kvledger_engine_transfer_bytes_total",
                          "Bytes engines reported moving from a tier into working memory (aggregate transfer "
                          "statistics, no request attached).",
                          false, [](const EngineStats::TransferTotals& t) { return t.bytes; }},
           TransferFamily{"kvledger_engine_transfer_seconds_total",
                          "Seconds those aggregate transfers took (bytes / seconds = the tier's transfer bandwidth).",
                          true, [](const EngineStats::TransferTotals& t) { return t.seconds_nanounits; }},
           TransferFamily{"kvledger_engine_transfers_total", "Transfer operations behind those aggregates.", false,
                          [](const EngineStats::TransferTotals& t) { return Uint128{t.transfers}; }}}) {
    AppendHeader(out, f.name, f.help, "counter");
    for (const auto& [key, t] : totals.transfers) {
      AppendSeries(out, f.name, "", absl::StrCat(ModelLabelOf(models, key.first), ",", Label("tier", TierLabel(key.second))));
      if (f.seconds) {
        AppendNanoUnits(out, f.value(t));
      } else {
        AppendInteger(out, f.value(t));
      }
      out += '\n';
    }
  }
  AppendHeader(out, "kvledger_unrecorded_requests_total",
               "Finished requests that did not become records, by reason: aborted or failed before their first "
               "output token.",
               "counter");
  for (const auto& [key, u] : totals.unrecorded) {
    AppendSeries(out, "kvledger_unrecorded_requests_total", "",
                 absl::StrCat(ModelLabelOf(models, key.first), ",", Label("reason", UnrecordedReasonLabel(key.second))));
    absl::StrAppend(&out, u.requests, "\n");
  }
  AppendHeader(out, "kvledger_unrecorded_logical_match_tokens_total",
               "Prefix tokens the engine had matched for those requests, where it reported them (a failed KV "
               "load's prefix).",
               "counter");
  for (const auto& [key, u] : totals.unrecorded) {
    AppendSeries(out, "kvledger_unrecorded_logical_match_tokens_total", "",
                 absl::StrCat(ModelLabelOf(models, key.first), ",", Label("reason", UnrecordedReasonLabel(key.second))));
    AppendInteger(out, u.logical_match_tokens);
    out += '\n';
  }
  AppendHeader(out, "kvledger_engine_stats_rejected_total", "Engine-statistics entries rejected, by reason.",
               "counter");
  for (int r = 0; r < kEngineStatsRejectReasonCount; ++r) {
    AppendSeries(out, "kvledger_engine_stats_rejected_total", "",
                 Label("reason", EngineStatsRejectReasonLabel(static_cast<EngineStatsRejectReason>(r))));
    absl::StrAppend(&out, totals.rejected[static_cast<size_t>(r)], "\n");
  }
}

std::string MetricsExposition::Text() const {
  std::string text;
  Write([&](std::string& piece) { text += piece; });
  return text;
}

void MetricsExposition::Write(const std::function<void(std::string& piece)>& emit, size_t chunk_bytes) const {
  const AggregateSnapshot snapshot = aggregator_.Snapshot();
  const std::vector<ModelLabel> models = registry_.labels().Labels();
  std::vector<std::string> labels;  // `model="…",tier="…"` per cell
  labels.reserve(snapshot.cells.size());
  for (const auto& cell : snapshot.cells) {
    const absl::string_view model =
        cell.model_slot < models.size() ? absl::string_view(models[cell.model_slot].model) : kOtherModelLabel;
    labels.push_back(absl::StrCat(Label("model", model), ",", Label("tier", TierLabel(cell.tier))));
  }
  std::string out;
  out.reserve(chunk_bytes + 16384);
  auto flush_if_full = [&] {
    if (out.size() < chunk_bytes) return;
    emit(out);
    out.clear();
  };

  // The figures of figure_schema.h, one family per row, in table order.
  for (const CounterSpec& spec : kCounters) {
    AppendHeader(out, spec.name, spec.help, "counter");
    for (size_t c = 0; c < snapshot.cells.size(); ++c) {
      const Totals& t = snapshot.cells[c].totals;
      for (int i = 0; i < Width(spec.dimension); ++i) {
        std::string extra;
        if (spec.dimension == Dimension::kCause) extra = Label("cause", CauseLabel(kAllCauses[i]));
        if (spec.dimension == Dimension::kBoundary) extra = Label("boundary", BoundaryLabel(kAllBoundaries[i]));
        AppendSeries(out, spec.name, "", labels[c], extra);
        if (spec.nanounits) {
          AppendNanoUnits(out, t.counter(spec.id, i));
        } else {
          AppendInteger(out, t.counter(spec.id, i));
        }
        out += '\n';
      }
      flush_if_full();
    }
  }
  for (const LatencySpec& spec : kLatencies) {
    AppendHeader(out, spec.name, spec.help, "histogram");
    for (size_t c = 0; c < snapshot.cells.size(); ++c) {
      const LatencyHistogram& h = snapshot.cells[c].totals.latency(spec.id);
      if (h.count > 0) AppendHistogram(out, spec.name, labels[c], h, LatencyLe());
      flush_if_full();
    }
  }
  for (const RatioSpec& spec : kRatios) {
    AppendHeader(out, spec.name, spec.help, "histogram");
    for (size_t c = 0; c < snapshot.cells.size(); ++c) {
      AppendHistogram(out, spec.name, labels[c], snapshot.cells[c].totals.ratio(spec.id), RatioLe());
      flush_if_full();
    }
  }

  AppendHeader(out, "kvledger_records_rejected_total", "Records rejected, by reason.", "counter");
  for (RejectReason reason : kAllRejectReasons) {
    AppendSeries(out, "kvledger_records_rejected_total", "", Label("reason", RejectReasonLabel(reason)));
    absl::StrAppend(&out, snapshot.rejected[static_cast<size_t>(reason)], "\n");
  }
  AppendHeader(out, "kvledger_model_label_folded_records_total",
               "Records counted under model=\"other\" because --max_models distinct model labels were already "
               "in use.",
               "counter");
  absl::StrAppend(&out, "kvledger_model_label_folded_records_total ", snapshot.folded_records, "\n");

  if (engine_stats_ != nullptr) WriteEngineStats(out, models);
  flush_if_full();

  // One info series per profile in the catalog, and per label whose name costs with another
  // profile (an opted-in unknown model costed as "generic").
  AppendHeader(out, "kvledger_model_info", "Profile facts per model label, value 1; join on model.", "gauge");
  auto add_info = [&](const std::string& model, const Profile& p) {
    uint64_t layers = 0;
    for (const auto& g : p.shape().groups) layers += g.num_layers;
    const auto& serving = p.definition().serving();
    AppendSeries(out, "kvledger_model_info", "",
                 absl::StrCat(Label("model", model), ",", Label("profile", p.name()), ",",
                              Label("attention", p.attention_summary()), ",", Label("layers", absl::StrCat(layers)),
                              ",", Label("kv_page_tokens", absl::StrCat(serving.kv_page_tokens())), ",",
                              Label("recurrent_checkpoint_tokens",
                                    absl::StrCat(serving.recurrent_checkpoint_tokens()))));
    out += "1\n";
    flush_if_full();
  };
  const ProfileCatalog& catalog = registry_.catalog();
  for (const auto& name : catalog.Names()) add_info(name, *catalog.Find(name));
  for (const auto& model : models) {
    if (catalog.Find(model.model) == nullptr) add_info(model.model, *model.profile);
  }

  if (rates_ != nullptr) {
    // Live rates (soft state of this replica, decayed with --advice_half_life_seconds) and the
    // decayed weight of the records behind each.
    const auto entries = rates_->Snapshot();
    auto model_label = [&](uint32_t slot) { return ModelLabelOf(models, slot); };
    struct Gauge {
      const char* name;
      const char* help;
      bool reload;
      bool weight;
    };
    for (const Gauge& g : {
             Gauge{"kvledger_reload_bandwidth_bytes_per_second",
                   "Effective reload bandwidth from one tier: reused bytes per reload second of records, and "
                   "bytes per second of engines' aggregate transfers, decayed over recent samples.",
                   true,
                   false},
             Gauge{"kvledger_reload_bandwidth_weight",
                   "Decayed weight of the samples (records and transfer observations) behind "
                   "kvledger_reload_bandwidth_bytes_per_second (1 per sample now, 0.5 one half-life ago).",
                   true, true},
             Gauge{"kvledger_prefill_flops_per_second",
                   "Prefill compute rate, suffix-prefill FLOPs per suffix-prefill second, decayed over recent "
                   "records.",
                   false, false},
             Gauge{"kvledger_prefill_flops_weight",
                   "Decayed weight of the records behind kvledger_prefill_flops_per_second.", false, true}}) {
      AppendHeader(out, g.name, g.help, "gauge");
      for (const auto& e : entries) {
        if (e.tier.has_value() != g.reload) continue;
        std::string labels = model_label(e.model_slot);
        if (e.tier) absl::StrAppend(&labels, ",", Label("tier", TierLabel(*e.tier)));
        AppendSeries(out, g.name, "", labels);
        AppendDouble(out, g.weight ? e.evidence.weight : e.evidence.rate);
        out += '\n';
      }
    }
  }

  AppendHeader(out, "kvledger_build_info", "Build facts, value 1.", "gauge");
  AppendSeries(out, "kvledger_build_info", "", Label("version", version_));
  out += "1\n";
  emit(out);
}

}  // namespace kvledger
