// `kvledger plan --plot FILE.svg`: the plan's curves against device capacity, as a standalone SVG.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/plan_output.h"

namespace kvledger::cli {
namespace {

constexpr double kWidth = 760, kHeight = 420, kLeft = 60, kRight = 210, kTop = 40, kBottom = 50;

struct Series {
  const char* label;
  const char* color;
  double (PlanTotals::*ratio)() const;
};
constexpr Series kSeries[] = {
    {"attention avoided", "#d62728", &PlanTotals::AttentionAvoided},
    {"prefill FLOPs avoided", "#2ca02c", &PlanTotals::PrefillAvoided},
    {"token hit ratio", "#1f77b4", &PlanTotals::TokenHitRatio},
};

std::string TokensLabel(double tokens) {
  for (auto [scale, suffix] : {std::pair{1e9, "G"}, std::pair{1e6, "M"}, std::pair{1e3, "k"}}) {
    if (tokens >= scale) return absl::StrFormat("%g%s", tokens / scale, suffix);
  }
  return absl::StrFormat("%g", tokens);
}

// The plot's frame: axes, grid, ticks and labels for x in [10^lo, 10^hi] tokens and y in 0..top
// (a share: the data's highest point rounded up to a multiple of 10 %).
std::string Frame(const std::string& title, double lo, double hi, double top) {
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%g\" y=\"22\" font-size=\"14\">%s</text>\n",
      kWidth, kHeight, kLeft, title);
  const int top_percent = static_cast<int>(std::lround(top * 100));
  const int step = top_percent <= 50 ? 10 : 20;
  for (int p = 0; p <= top_percent; p += step) {
    const double y = kTop + plot_h * (1 - p / (top * 100));
    absl::StrAppendFormat(&svg, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#ddd\"/>"
                          "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%d%%</text>\n",
                          kLeft, y, kLeft + plot_w, y, kLeft - 6, y + 4, p);
  }
  for (int e = static_cast<int>(std::ceil(lo - 1e-9)); e <= static_cast<int>(std::floor(hi + 1e-9)); ++e) {
    const double x = kLeft + plot_w * (hi > lo ? (e - lo) / (hi - lo) : 0.5);
    absl::StrAppendFormat(&svg, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#ddd\"/>"
                          "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%s</text>\n",
                          x, kTop, x, kTop + plot_h, x, kTop + plot_h + 16, TokensLabel(std::pow(10.0, e)));
  }
  absl::StrAppendFormat(&svg, "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"#333\"/>\n"
                        "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">device cache capacity, tokens (log scale)</text>\n",
                        kLeft, kTop, plot_w, plot_h, kLeft + plot_w / 2, kHeight - 12);
  return svg;
}

// One series: a line through the finite capacities, a dashed level for an unlimited one, its legend.
std::string Curve(const Series& s, int index, const std::vector<const PlanResult*>& finite,
                  const PlanResult* unlimited, double lo, double hi, double top) {
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto y_of = [&](double ratio) { return kTop + plot_h * (1 - ratio / top); };
  std::string points;
  std::string svg;
  for (const PlanResult* r : finite) {
    const double x = kLeft + plot_w * (std::log10(static_cast<double>(r->config.capacity_tokens[0])) - lo) / (hi - lo);
    const double y = y_of((r->total.*s.ratio)());
    absl::StrAppendFormat(&points, "%.1f,%.1f ", x, y);
    absl::StrAppendFormat(&svg, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", x, y, s.color);
  }
  absl::StrAppendFormat(&svg, "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n", points,
                        s.color);
  if (unlimited != nullptr) {
    const double y = y_of((unlimited->total.*s.ratio)());
    absl::StrAppendFormat(&svg, "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"5,4\"/>\n",
                          kLeft, y, kLeft + plot_w, y, s.color);
  }
  const double legend_y = kTop + 14 + 20 * index;
  absl::StrAppendFormat(&svg, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"%s\" stroke-width=\"2\"/>"
                        "<text x=\"%g\" y=\"%g\">%s</text>\n",
                        kWidth - kRight + 12, legend_y, kWidth - kRight + 36, legend_y, s.color, kWidth - kRight + 42,
                        legend_y + 4, s.label);
  return svg;
}

// The highest share any series reaches, rounded up to a multiple of 10 % (at least 10 %).
double AxisTop(const std::vector<PlanResult>& results) {
  double highest = 0;
  for (const PlanResult& r : results) {
    for (const Series& s : kSeries) highest = std::max(highest, (r.total.*s.ratio)());
  }
  return std::clamp(std::ceil(highest * 10 - 1e-9) / 10, 0.1, 1.0);
}

}  // namespace

absl::StatusOr<std::string> WritePlanPlot(const std::string& path, const Profile& profile,
                                          const std::vector<PlanResult>& results, const std::string& trace) {
  if (!absl::EndsWith(path, ".svg")) {
    return absl::InvalidArgumentError(absl::StrCat("--plot = ", path, ": the plot is written as SVG; name it FILE.svg"));
  }
  std::vector<const PlanResult*> finite;
  const PlanResult* unlimited = nullptr;
  for (const PlanResult& r : results) {
    const uint64_t tokens = r.config.capacity_tokens[0];
    if (!r.config.Finite(0)) unlimited = &r;
    else if (tokens > 0) finite.push_back(&r);
  }
  if (finite.size() < 2) {
    return absl::InvalidArgumentError("--plot needs at least two finite, non-zero --capacity-tokens to draw a curve");
  }
  const double lo = std::log10(static_cast<double>(finite.front()->config.capacity_tokens[0]));
  const double hi = std::log10(static_cast<double>(finite.back()->config.capacity_tokens[0]));
  const double top = AxisTop(results);
  const std::string title = absl::StrCat("What a device KV cache of each capacity buys: ", profile.name(), " on ",
                                         std::filesystem::path(trace).filename().string());
  std::string svg = Frame(title, lo, hi, top);
  for (int i = 0; i < 3; ++i) svg += Curve(kSeries[i], i, finite, unlimited, lo, hi, top);
  if (unlimited != nullptr) {
    absl::StrAppendFormat(&svg, "<text x=\"%g\" y=\"%g\" fill=\"#555\">dashed: unlimited capacity</text>\n",
                          kWidth - kRight + 12, kTop + 14 + 20 * 3);
  }
  svg += "</svg>\n";
  std::ofstream out(path);
  out << svg;
  if (!out) return absl::InvalidArgumentError(absl::StrCat("--plot = ", path, ": cannot be written"));
  return absl::StrFormat("wrote %s: token hit, attention and prefill avoided of %s on %s at %d device capacities%s, "
                         "y axis to %d %%",
                         path, profile.name(), trace, finite.size(), unlimited != nullptr ? " and unlimited" : "",
                         static_cast<int>(std::lround(top * 100)));
}

}  // namespace kvledger::cli
