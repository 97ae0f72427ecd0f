#include "lib/accounting/fleet_rates.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/cost_model/number_format.h"

namespace kvledger {
namespace {

// The index of `term` in `names`, or -1.
template <size_t N>
int TermIndex(const std::string& term, const std::array<const char*, N>& names) {
  for (size_t i = 0; i < N; ++i) {
    if (term == names[i]) return static_cast<int>(i);
  }
  return -1;
}

absl::Status BadSample(const char* rule, size_t index, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(rule, " sample ", index, ": ", what));
}

// Adds each sample's value into parts[key][term].
template <typename Key, size_t N, typename KeyOf>
absl::Status AddSamples(const char* rule, const std::vector<LabeledSample>& samples,
                        const std::array<const char*, N>& names, KeyOf key_of,
                        absl::flat_hash_map<Key, std::array<double, N>>& parts) {
  for (size_t i = 0; i < samples.size(); ++i) {
    const LabeledSample& s = samples[i];
    const std::string* term = s.Label("term");
    if (term == nullptr) return BadSample(rule, i, "no term label");
    const int index = TermIndex(*term, names);
    if (index < 0) return BadSample(rule, i, absl::StrCat("term = \"", *term, "\": not a term of this rule"));
    if (!std::isfinite(s.value) || s.value < 0) {
      return BadSample(rule, i, absl::StrCat("value = ", FormatDouble(s.value), ": must be finite and >= 0"));
    }
    absl::StatusOr<Key> key = key_of(s);
    if (!key.ok()) return BadSample(rule, i, key.status().message());
    parts[*key][static_cast<size_t>(index)] += s.value;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ModelOf(const LabeledSample& s) {
  const std::string* model = s.Label("model");
  if (model == nullptr) return absl::InvalidArgumentError("no model label");
  return *model;
}

absl::StatusOr<std::pair<std::string, Tier>> ModelTierOf(const LabeledSample& s) {
  absl::StatusOr<std::string> model = ModelOf(s);
  if (!model.ok()) return model.status();
  const std::string* label = s.Label("tier");
  const std::optional<Tier> tier = label != nullptr ? TierFromLabel(*label) : std::nullopt;
  if (!tier || !IsSourceTier(*tier)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tier = \"", label != nullptr ? *label : "", "\": must be ", SourceTierList()));
  }
  return std::make_pair(*std::move(model), *tier);
}

absl::Status Implausible(absl::string_view what, double value, double low, double high) {
  return absl::InvalidArgumentError(absl::StrCat(what, " = ", FormatDouble(value), ": not a plausible value (must be in [",
                                                 FormatDouble(low), ", ", FormatDouble(high), "])"));
}

// A sample count (of a window, so extrapolated and not always whole) no replica could pass 2^53 of.
absl::Status PlausibleCount(double samples, const std::string& model) {
  if (!(samples <= kMaxExactCount)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sample count of ", model, " = ", FormatDouble(samples), ": must be at most 2^53"));
  }
  return absl::OkStatus();
}

// What garbage sums would make of a rate is refused before Advise could answer from it.
absl::Status Plausible(const DecayedRate& rate, const std::string& model, Tier tier) {
  const std::optional<RateEvidence> evidence = rate.Evidence();
  if (!evidence) return absl::OkStatus();  // no samples: unknown, not wrong
  const std::string what = absl::StrCat("reload bandwidth of ", model, " from ", TierLabel(tier), ", bytes/s");
  if (!(evidence->rate >= kPlausibleBandwidth[0] && evidence->rate <= kPlausibleBandwidth[1])) {
    return Implausible(what, evidence->rate, kPlausibleBandwidth[0], kPlausibleBandwidth[1]);
  }
  return absl::OkStatus();
}

absl::Status Plausible(const DecayedComputeFit& fit, const std::string& model) {
  const std::optional<ComputeTime> time = fit.Fit();
  if (!time) return absl::OkStatus();
  if (!(time->FlopsPerSecond() >= kPlausibleFlopsPerSecond[0] && time->FlopsPerSecond() <= kPlausibleFlopsPerSecond[1])) {
    return Implausible(absl::StrCat("prefill rate of ", model, ", FLOP/s"), time->FlopsPerSecond(),
                       kPlausibleFlopsPerSecond[0], kPlausibleFlopsPerSecond[1]);
  }
  if (!(time->fixed_seconds <= kPlausiblePassSeconds)) {
    return Implausible(absl::StrCat("fixed cost of a prefill pass of ", model, ", seconds"), time->fixed_seconds, 0,
                       kPlausiblePassSeconds);
  }
  return absl::OkStatus();
}

}  // namespace

const std::string* LabeledSample::Label(const std::string& name) const {
  for (const auto& [key, value] : labels) {
    if (key == name) return &value;
  }
  return nullptr;
}

absl::StatusOr<FleetRates::Table> FleetRates::FromSamples(const std::vector<LabeledSample>& reload,
                                                          const std::vector<LabeledSample>& compute) {
  absl::flat_hash_map<std::pair<std::string, Tier>, std::array<double, kReloadParts.size()>> reload_parts;
  absl::flat_hash_map<std::string, std::array<double, kComputeFitPartCount>> compute_parts;
  if (absl::Status s = AddSamples("reload", reload, kReloadParts, ModelTierOf, reload_parts); !s.ok()) return s;
  if (absl::Status s = AddSamples("compute", compute, ComputeFitParts(), ModelOf, compute_parts); !s.ok()) return s;
  Table table;
  for (const auto& [key, parts] : reload_parts) {
    if (absl::Status s = PlausibleCount(parts.back(), key.first); !s.ok()) return s;
    const DecayedRate rate = DecayedRate::FromParts(parts);
    if (absl::Status s = Plausible(rate, key.first, key.second); !s.ok()) return s;
    table.reload.emplace(key, rate);
  }
  for (const auto& [key, parts] : compute_parts) {
    if (absl::Status s = PlausibleCount(parts.back(), key); !s.ok()) return s;
    const DecayedComputeFit fit = DecayedComputeFit::FromParts(parts);
    if (absl::Status s = Plausible(fit, key); !s.ok()) return s;
    table.compute.emplace(key, fit);
  }
  return table;
}

FleetRates::FleetRates(double max_age_seconds, LiveRates::Clock clock)
    : max_age_(max_age_seconds), clock_(std::move(clock)) {}

void FleetRates::Update(Table table) {
  auto fresh = std::make_shared<const Table>(std::move(table));
  const double now = clock_();
  MutexLock lock(&mu_);
  table_ = std::move(fresh);
  updated_at_ = now;
}

std::shared_ptr<const FleetRates::Table> FleetRates::Fresh() const {
  const double now = clock_();
  MutexLock lock(&mu_);
  if (table_ == nullptr || now - updated_at_ > max_age_) return nullptr;
  return table_;
}

std::optional<RateEvidence> FleetRates::ReloadBandwidth(const std::string& model, Tier tier) const {
  const auto table = Fresh();
  if (table == nullptr) return std::nullopt;
  const auto it = table->reload.find(std::make_pair(model, tier));
  if (it == table->reload.end()) return std::nullopt;
  return it->second.Evidence();
}

std::optional<ComputeTime> FleetRates::ComputeModel(const std::string& model) const {
  const auto table = Fresh();
  if (table == nullptr) return std::nullopt;
  const auto it = table->compute.find(model);
  if (it == table->compute.end()) return std::nullopt;
  std::optional<ComputeTime> fit = it->second.Fit();
  if (fit) fit->basis = Basis::kFleet;
  return fit;
}

std::optional<double> FleetRates::AgeSeconds() const {
  const double now = clock_();
  MutexLock lock(&mu_);
  if (table_ == nullptr) return std::nullopt;
  return now - updated_at_;
}

}  // namespace kvledger
