// The report page: which charts to draw for the metrics present (a fixed catalogue for the keys the trainer writes,
// a generic chart for any other numeric key), one colour per run across every chart, and the recipe / environment
// tables with the keys whose values differ across runs highlighted. See report.h for the input contract.
#include "spread/log/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "report_svg.h"
#include "spread/log/metrics_log.h"
#include "spread/util/error.h"
#include "spread/util/file.h"

namespace fs = std::filesystem;

namespace spread::report {

namespace {

// Distinct on white and for common colour-vision deficiencies before the palette repeats (Tableau 10, reordered).
const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
constexpr const char* kDashed = "7 4";

std::string run_color(std::size_t i) { return kPalette[i % std::size(kPalette)]; }

enum class Scaling { Linear, PreferLog, AutoLog };

struct MetricInfo {
  const char* key;
  const char* section;
  const char* title;
  const char* y_label;
  Scaling scaling;
};

const char* const kSections[] = {"Training", "Evaluation", "Geometry", "Geometry by layer", "Retrieval and STS",
                                 "Other metrics"};

// The keys the trainer writes, in the order a reader wants them. Array-valued keys plot their last layer.
const MetricInfo kCatalogue[] = {
    {"loss", "Training", "Loss: training LM (solid), validation (dashed)", "loss (nats / token)", Scaling::PreferLog},
    {"lr", "Training", "Learning rate", "learning rate", Scaling::Linear},
    {"muon_lr", "Training", "Muon's learning rate (the blocks' matrices)", "learning rate", Scaling::Linear},
    {"tokens_per_s", "Training", "Throughput", "tokens / s", Scaling::Linear},
    {"pairs_per_s", "Training", "Throughput", "pairs / s", Scaling::Linear},
    {"texts_per_s", "Training", "Throughput", "texts / s", Scaling::Linear},
    {"grad_norm", "Training", "Gradient norm", "global L2 norm", Scaling::PreferLog},
    {"val_ppl", "Evaluation", "Validation perplexity", "perplexity", Scaling::PreferLog},
    {"val_bpb", "Evaluation", "Validation bits per byte", "bits / byte", Scaling::Linear},
    {"mean_cos", "Geometry", "Mean cosine within a text (last layer)", "mean cos", Scaling::Linear},
    {"mean_cos_final", "Geometry", "Mean cosine within a text (after the final norm)", "mean cos", Scaling::Linear},
    {"mean_cos_incl", "Geometry", "Mean cosine within a text, self pairs included (last layer)", "mean cos",
     Scaling::Linear},
    {"batch_mean_cos", "Geometry", "Mean cosine across texts (last layer)", "batch mean cos", Scaling::Linear},
    {"batch_mean_cos_final", "Geometry", "Mean cosine across texts (after the final norm)", "batch mean cos",
     Scaling::Linear},
    {"concentration", "Geometry", "Concentration tr \u03a3 / \u2016\u03bc\u2016\u00b2 (last layer)",
     "concentration", Scaling::AutoLog},
    {"socm", "Geometry", "SOCM = (1 \u2212 d\u03bc) \u00b7 d\u03a3", "SOCM", Scaling::Linear},
    {"socm_d_mu", "Geometry", "SOCM part d\u03bc (distance of means)", "d\u03bc", Scaling::Linear},
    {"socm_d_mu_median", "Geometry", "SOCM part d\u03bc, median over pairs", "d\u03bc", Scaling::Linear},
    {"socm_d_sigma", "Geometry", "SOCM part d\u03a3 (distance of covariances)", "d\u03a3", Scaling::Linear},
    {"socm_texts_over_trace", "Geometry", "Probe texts with tr \u03a3 > 2 (outside the range SOCM is read in)", "texts",
     Scaling::Linear},
    {"align", "Geometry", "Alignment (lower = positives closer)", "align", Scaling::Linear},
    {"uniform", "Geometry", "Uniformity (lower = more uniform)", "uniform", Scaling::Linear},
    {"ndcg@10", "Retrieval and STS", "nDCG@10", "nDCG@10", Scaling::Linear},
    {"mrr@10", "Retrieval and STS", "MRR@10", "MRR@10", Scaling::Linear},
    {"recall@100", "Retrieval and STS", "Recall@100", "Recall@100", Scaling::Linear},
    {"sts_spearman", "Retrieval and STS", "STS Spearman \u03c1", "Spearman \u03c1", Scaling::Linear},
};

// Keys that never get a chart of their own: the x axis, wall time (the summary table shows it), and the two curves
// of the loss chart.
const std::set<std::string> kNotCharted = {"step", "elapsed_s", "val_loss", "loss_lm"};

// The loss chart compares language-model loss across runs, so a run that logs its terms (loss = loss_lm + lambda *
// loss_disp + ...) contributes loss_lm there and gets its total objective in a chart of its own.
constexpr const char* kTrainLoss = "train_loss";

// Curves longer than this are drawn raw but faint, under a centred moving mean of kSmoothFraction of their points.
constexpr std::size_t kDenseCurve = 400;
constexpr double kSmoothFraction = 0.01;

struct CurveSpec {
  std::string key;
  std::string dash;
  bool markers_if_sparse;
  std::string role;  // legend text for a chart with several keys per run ("training", "validation")
};

struct ChartPlan {
  std::string section, title, y_label;
  Scaling scaling = Scaling::AutoLog;
  std::vector<CurveSpec> curves;  // line chart: one curve per (run, spec) that has data
  std::size_t heatmap_run = 0;    // heatmap: mean_cos of this run
  bool is_heatmap = false;
};

bool has_key(const std::vector<RunData>& runs, const std::string& key) {
  for (const auto& r : runs) {
    if (r.metrics.scalars.count(key) || r.metrics.layered.count(key)) return true;
  }
  return false;
}

std::set<std::string> all_keys(const std::vector<RunData>& runs) {
  std::set<std::string> keys;
  for (const auto& r : runs) {
    for (const auto& kv : r.metrics.scalars) keys.insert(kv.first);
    for (const auto& kv : r.metrics.layered) keys.insert(kv.first);
  }
  return keys;
}

bool only_layered(const std::vector<RunData>& runs, const std::string& key) {
  return std::none_of(runs.begin(), runs.end(), [&](const RunData& r) { return r.metrics.scalars.count(key) > 0; });
}

bool is_retrieval_key(const std::string& k) {
  for (const char* p : {"ndcg@", "mrr@", "recall@", "map@", "precision@", "sts"}) {
    if (k.rfind(p, 0) == 0) return true;
  }
  return false;
}

ChartPlan single(const std::string& section, const std::string& key, const std::string& title,
                 const std::string& y_label, Scaling s) {
  return {section, title, y_label, s, {{key, "", true, ""}}};
}

// Everything not in the catalogue, sorted: loss terms, other retrieval@k scores, then anything unknown.
void plan_uncatalogued(const std::vector<RunData>& runs, const std::set<std::string>& keys,
                       std::set<std::string>& done, std::vector<ChartPlan>& plans) {
  for (const auto& k : keys) {
    if (done.count(k) || k.rfind("loss_", 0) != 0) continue;
    plans.push_back(single("Training", k, "Loss term " + k, k, Scaling::AutoLog));
    done.insert(k);
  }
  for (const auto& k : keys) {
    if (done.count(k) || !is_retrieval_key(k)) continue;
    plans.push_back(single("Retrieval and STS", k, k, k, Scaling::Linear));
    done.insert(k);
  }
  for (const auto& k : keys) {
    if (done.count(k) || kNotCharted.count(k)) continue;
    plans.push_back(single("Other metrics", k, only_layered(runs, k) ? k + " (last layer)" : k, k, Scaling::AutoLog));
    done.insert(k);
  }
}

std::vector<ChartPlan> plan_charts(const std::vector<RunData>& runs) {
  const auto keys = all_keys(runs);
  std::vector<ChartPlan> plans;
  std::set<std::string> done(kNotCharted.begin(), kNotCharted.end());
  for (const auto& m : kCatalogue) {
    std::string key = m.key;
    if (key == "loss") {
      if (!has_key(runs, "loss") && !has_key(runs, "val_loss")) continue;
      plans.push_back({m.section, m.title, m.y_label, m.scaling,
                       {{kTrainLoss, "", false, "training"}, {"val_loss", kDashed, true, "validation"}}});
      if (has_key(runs, "loss_lm") && has_key(runs, "loss")) {
        plans.push_back(single(m.section, "loss", "Training objective (loss, all terms)", "loss", Scaling::PreferLog));
      }
    } else if (keys.count(key)) {
      plans.push_back(single(m.section, key, m.title, m.y_label, m.scaling));
    }
    done.insert(key);
  }
  plan_uncatalogued(runs, keys, done, plans);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    auto it = runs[i].metrics.layered.find("mean_cos");
    if (it == runs[i].metrics.layered.end() || it->second.step.empty()) continue;
    ChartPlan p;
    p.section = "Geometry by layer";
    p.title = "Mean cosine by layer \u00d7 step: " + runs[i].name;
    p.is_heatmap = true;
    p.heatmap_run = i;
    plans.push_back(p);
  }
  std::stable_sort(plans.begin(), plans.end(), [](const ChartPlan& a, const ChartPlan& b) {
    auto rank = [](const std::string& s) { return std::find(std::begin(kSections), std::end(kSections), s) -
                                                  std::begin(kSections); };
    return rank(a.section) < rank(b.section);
  });
  return plans;
}

// A scalar key as a series, or an array key's last layer (skipping steps where it is missing).
Series series_of(const RunData& run, const std::string& key) {
  if (key == kTrainLoss) return series_of(run, run.metrics.scalars.count("loss_lm") ? "loss_lm" : "loss");
  if (auto it = run.metrics.scalars.find(key); it != run.metrics.scalars.end()) return it->second;
  Series s;
  if (auto it = run.metrics.layered.find(key); it != run.metrics.layered.end()) {
    for (std::size_t i = 0; i < it->second.step.size(); ++i) {
      const auto& row = it->second.values[i];
      if (row.empty() || !std::isfinite(row.back())) continue;
      s.step.push_back(it->second.step[i]);
      s.value.push_back(row.back());
    }
  }
  return s;
}

void step_range(const std::vector<RunData>& runs, double& lo, double& hi) {
  lo = std::numeric_limits<double>::infinity();
  hi = -lo;
  for (const auto& r : runs) {
    for (const auto& [k, s] : r.metrics.scalars) {
      if (kNotCharted.count(k) && k != "val_loss") continue;
      if (!s.step.empty()) lo = std::min(lo, s.step.front()), hi = std::max(hi, s.step.back());
    }
    for (const auto& [k, s] : r.metrics.layered) {
      if (!s.step.empty()) lo = std::min(lo, s.step.front()), hi = std::max(hi, s.step.back());
    }
  }
  if (!(lo <= hi)) lo = 0, hi = 1;
  if (hi == lo) hi = lo + 1;
}

bool use_log(Scaling s, const std::vector<svg::Curve>& curves) {
  if (s == Scaling::Linear) return false;
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (const auto& c : curves) {
    for (double v : c.y) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  if (!(lo > 0) || !(hi > 0)) return false;
  // A loss or a norm reads better in log units as soon as it moves; anything else only when it spans 3 decades.
  return hi / lo >= (s == Scaling::PreferLog ? 2.0 : 1000.0);
}

std::vector<svg::VLine> resume_lines(const std::vector<RunData>& runs) {
  std::vector<svg::VLine> v;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    for (const auto& e : runs[i].metrics.events) {
      if (e.name != "resume") continue;
      v.push_back({e.step, run_color(i), runs[i].name + " resumed at step " + svg::format_value(e.step)});
    }
  }
  return v;
}

// Centred moving mean over `window` points (odd), the window shrinking symmetrically at the ends so the first and
// last points stay unbiased.
Series moving_mean(const Series& s, std::size_t window) {
  const std::size_t n = s.size(), half = window / 2;
  std::vector<double> prefix(n + 1, 0.0);
  for (std::size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + s.value[i];
  Series out = s;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t h = std::min({half, i, n - 1 - i});
    out.value[i] = (prefix[i + h + 1] - prefix[i - h]) / double(2 * h + 1);
  }
  return out;
}

std::size_t smoothing_window(std::size_t n) { return std::size_t(double(n) * kSmoothFraction) | 1; }

// Noisy = over the second half of the run (past warm-up and the first fast drop), the residual around the moving
// mean has an RMS above 1% of the raw range: minibatch loss, gradient norm and throughput are far above that, a
// learning-rate schedule or a smooth drift far below.
bool is_noisy(const Series& raw, const Series& mean) {
  const std::size_t from = raw.size() / 2;
  double ss = 0, lo = raw.value[from], hi = raw.value[from];
  for (std::size_t i = from; i < raw.size(); ++i) {
    double r = raw.value[i] - mean.value[i];
    ss += r * r;
    lo = std::min(lo, raw.value[i]);
    hi = std::max(hi, raw.value[i]);
  }
  return hi > lo && std::sqrt(ss / double(raw.size() - from)) > 0.01 * (hi - lo);
}

std::vector<svg::LegendItem> legend_for(const ChartPlan& p, const std::vector<RunData>& runs,
                                        const std::vector<bool>& run_drawn, const std::set<std::size_t>& specs_drawn) {
  std::vector<svg::LegendItem> items;
  const bool several_runs = runs.size() > 1;  // name the run even when it is the only one with this metric
  if (several_runs) {
    for (std::size_t i = 0; i < runs.size(); ++i) {
      if (run_drawn[i]) items.push_back({run_color(i), "", runs[i].name});
    }
  }
  if (specs_drawn.size() > 1) {  // several keys per run: say which line style is which
    for (std::size_t s : specs_drawn) {
      items.push_back({several_runs ? "#555555" : run_color(0), p.curves[s].dash, p.curves[s].role});
    }
  }
  return items;
}

// Curves in drawing order: every faint raw curve, then each spec's curves (validation last, so on top of training).
struct Layers {
  std::vector<svg::Curve> faint;
  std::vector<std::vector<svg::Curve>> by_spec;
  std::size_t widest_window = 0;
};

void add_curves(const ChartPlan& p, std::size_t s, std::size_t run_index, const RunData& run,
                const ReportOptions& opt, Layers& layers) {
  const Series data = series_of(run, p.curves[s].key);
  const std::string label = run.name + " \u00b7 " + (p.curves[s].key == kTrainLoss ? "training loss" : p.curves[s].key);
  const Series raw = downsample_minmax(data, opt.max_points);
  if (data.size() <= kDenseCurve) {
    layers.by_spec[s].push_back({raw.step, raw.value, run_color(run_index), p.curves[s].dash, label,
                                 p.curves[s].markers_if_sparse});
    return;
  }
  const std::size_t window = smoothing_window(data.size());
  const Series mean = moving_mean(data, window);
  if (!is_noisy(data, mean)) {  // a schedule or a slow drift: the raw curve is already readable
    layers.by_spec[s].push_back({raw.step, raw.value, run_color(run_index), p.curves[s].dash, label, false});
    return;
  }
  layers.widest_window = std::max(layers.widest_window, window);
  layers.faint.push_back({raw.step, raw.value, run_color(run_index), "", label + " (raw)", false, true});
  const Series smooth = downsample_minmax(mean, opt.max_points / 2);
  layers.by_spec[s].push_back({smooth.step, smooth.value, run_color(run_index), p.curves[s].dash,
                               label + fmt::format(" (mean of {} points)", window), false});
}

std::string render_line(const ChartPlan& p, const std::vector<RunData>& runs, const ReportOptions& opt, double x0,
                        double x1) {
  svg::LineChart c;
  c.title = p.title;
  c.y_label = p.y_label;
  c.x_min = x0;
  c.x_max = x1;
  std::vector<bool> run_drawn(runs.size(), false);
  std::set<std::size_t> specs_drawn;
  Layers layers;
  layers.by_spec.resize(p.curves.size());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    for (std::size_t s = 0; s < p.curves.size(); ++s) {
      if (series_of(runs[i], p.curves[s].key).step.empty()) continue;
      add_curves(p, s, i, runs[i], opt, layers);
      run_drawn[i] = true;
      specs_drawn.insert(s);
    }
  }
  c.curves = std::move(layers.faint);
  for (auto& spec : layers.by_spec) c.curves.insert(c.curves.end(), spec.begin(), spec.end());
  c.log_y = use_log(p.scaling, c.curves);
  std::vector<std::string> notes;
  if (c.log_y) notes.push_back("log scale");
  if (layers.widest_window) notes.push_back(fmt::format("faint: raw, line: moving mean of {} points", layers.widest_window));
  for (const auto& n : notes) c.note += (c.note.empty() ? "" : " \u00b7 ") + n;
  c.vlines = resume_lines(runs);
  c.legend = legend_for(p, runs, run_drawn, specs_drawn);
  if (!c.vlines.empty()) c.legend.push_back({c.vlines.front().color, "", "resume", true});
  return svg::line_chart(c);
}

// Columns beyond max_columns are merged: each output column averages a run of neighbouring steps, per layer.
void bin_columns(const LayerSeries& s, std::size_t max_columns, svg::Heatmap& h) {
  const std::size_t n = s.step.size(), cols = std::min(n, std::max<std::size_t>(max_columns, 1));
  for (std::size_t c = 0; c < cols; ++c) {
    const std::size_t lo = c * n / cols, hi = (c + 1) * n / cols;
    std::vector<double> sum(h.rows, 0.0), count(h.rows, 0.0);
    double step_sum = 0;
    for (std::size_t i = lo; i < hi; ++i) {
      step_sum += s.step[i];
      for (std::size_t r = 0; r < s.values[i].size() && r < h.rows; ++r) {
        if (std::isfinite(s.values[i][r])) sum[r] += s.values[i][r], count[r] += 1;
      }
    }
    std::vector<double> col(h.rows, std::numeric_limits<double>::quiet_NaN());
    for (std::size_t r = 0; r < h.rows; ++r) {
      if (count[r] > 0) col[r] = sum[r] / count[r];
    }
    h.x.push_back(step_sum / double(hi - lo));
    h.cells.push_back(std::move(col));
  }
}

// One colour scale for every run's heatmap, so the same colour means the same cosine in each.
void heatmap_range(const std::vector<RunData>& runs, double& lo, double& hi) {
  lo = std::numeric_limits<double>::infinity();
  hi = -lo;
  for (const auto& r : runs) {
    auto it = r.metrics.layered.find("mean_cos");
    if (it == r.metrics.layered.end()) continue;
    for (const auto& row : it->second.values) {
      for (double v : row) {
        if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
      }
    }
  }
  if (!(lo <= hi)) lo = 0, hi = 1;
  if (hi == lo) lo -= 0.5, hi += 0.5;
}

std::string render_heatmap(const ChartPlan& p, const std::vector<RunData>& runs, const ReportOptions& opt,
                           double x0, double x1) {
  const auto& s = runs[p.heatmap_run].metrics.layered.at("mean_cos");
  svg::Heatmap h;
  h.x_min = x0;
  h.x_max = x1;
  h.title = p.title;
  h.note = std::string("layer 0 = embeddings") + (runs.size() > 1 ? " \u00b7 colour scale shared by all runs" : "");
  h.y_label = "layer";
  h.value_label = "mean cos";
  h.id = "cbar" + std::to_string(p.heatmap_run);
  h.rows = s.layers();
  heatmap_range(runs, h.v_min, h.v_max);
  bin_columns(s, opt.max_heatmap_columns, h);
  return svg::heatmap(h);
}

// ---- HTML ------------------------------------------------------------------------------------------------------

const char* const kStyle = R"(
body{font:14px/1.45 "DejaVu Sans","Liberation Sans",system-ui,sans-serif;color:#222;background:#f6f7f9;
 max-width:1400px;margin:0 auto;padding:18px 24px 40px}
h1{font-size:22px;margin:4px 0 6px}h2{font-size:17px;margin:26px 0 10px;border-bottom:1px solid #d8dbe0;
 padding-bottom:4px}
.runs span{display:inline-block;margin:2px 14px 2px 0;font-weight:600}
.sw{display:inline-block;width:22px;height:4px;border-radius:2px;vertical-align:middle;margin-right:6px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:14px}
svg.chart{display:block;width:100%;height:auto;background:#fff;border:1px solid #dfe2e6;border-radius:6px}
svg.chart text{font-size:12px;fill:#333}
svg.chart text.t{font-size:14px;font-weight:700;fill:#111}
svg.chart text.n{fill:#888}
svg.chart text.l{fill:#555}
svg.chart .bg{fill:#fff}svg.chart .nd{fill:#eceef1}
svg.chart .g{stroke:#e6e8eb;stroke-width:1}
svg.chart .ax{stroke:#666;stroke-width:1;fill:none}
svg.chart .c{fill:none;stroke-width:1.7;stroke-linejoin:round;stroke-linecap:round}
svg.chart .f{stroke-width:1;stroke-opacity:.28}
svg.chart .ev{stroke-width:1.2;stroke-dasharray:3 3;opacity:.7}
table{border-collapse:collapse;background:#fff;font-size:13px;border:1px solid #dfe2e6}
th,td{padding:4px 12px;border-bottom:1px solid #eceef1;text-align:left;vertical-align:top}
thead th{background:#eef0f3;position:sticky;top:0}
tbody th{font-weight:400;font-family:"DejaVu Sans Mono",monospace;white-space:nowrap}
td{font-family:"DejaVu Sans Mono",monospace}
tr.diff th,tr.diff td{background:#fff1bf}tr.diff th{font-weight:700}
.num{text-align:right}.missing{color:#aaa}
.warn{background:#fff4e0;border-left:4px solid #e69500;padding:8px 12px;margin:10px 0}
.muted{color:#777}
)";

std::string swatch(std::size_t i) { return "<i class=\"sw\" style=\"background:" + run_color(i) + "\"></i>"; }

std::string duration(double s) {
  if (!std::isfinite(s) || s < 0) return "";
  if (s < 120) return fmt::format("{:.1f} s", s);
  if (s < 7200) return fmt::format("{:.0f} min", s / 60);
  return fmt::format("{:.1f} h", s / 3600);
}

std::string last_value(const RunData& r, const std::string& key) {
  auto it = r.metrics.scalars.find(key);
  return it == r.metrics.scalars.end() || it->second.value.empty() ? "" : svg::format_value(it->second.value.back());
}

std::string best_val(const RunData& r) {
  auto it = r.metrics.scalars.find("val_loss");
  if (it == r.metrics.scalars.end() || it->second.value.empty()) return "";
  const auto& v = it->second.value;
  std::size_t i = std::size_t(std::min_element(v.begin(), v.end()) - v.begin());
  return svg::format_value(v[i]) + " <span class=\"muted\">@" + svg::format_value(it->second.step[i]) + "</span>";
}

std::string last_step(const RunData& r) {
  double s = -1;
  for (const auto& [k, v] : r.metrics.scalars) {
    if (!v.step.empty()) s = std::max(s, v.step.back());
  }
  return s < 0 ? "" : svg::format_value(s);
}

std::string status(const RunData& r) {
  std::vector<std::string> names;
  for (const auto& e : r.metrics.events) names.push_back(e.name);
  return run_status(names);
}

std::string event_counts(const RunData& r) {
  std::map<std::string, int> n;
  for (const auto& e : r.metrics.events) {
    if (e.name != "start" && e.name != "end") ++n[e.name];
  }
  std::string s;
  for (const auto& [name, k] : n) s += (s.empty() ? "" : ", ") + svg::escape(name) + " \u00d7" + std::to_string(k);
  return s;
}

std::string skipped_text(const Metrics& m) {
  if (m.lines_skipped == 0) return "";
  std::string lines;
  for (std::size_t n : m.skipped_line_numbers) lines += (lines.empty() ? "" : ", ") + std::to_string(n);
  if (m.lines_skipped > m.skipped_line_numbers.size()) lines += ", \u2026";
  std::string s = fmt::format("skipped {} malformed line{} (line {})", m.lines_skipped,
                              m.lines_skipped == 1 ? "" : "s", lines);
  if (m.partial_last_line) s += "; the last line is incomplete (still being written?)";
  return s;
}

std::string summary_table(const std::vector<RunData>& runs) {
  std::string h =
      "<table><thead><tr><th>run</th><th>last step</th><th>elapsed</th><th>train LM loss (last)</th>"
      "<th>best val loss</th><th>status</th><th>events</th><th>metrics lines</th><th>notes</th></tr></thead><tbody>";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    auto el = r.metrics.scalars.find("elapsed_s");
    std::string elapsed = el == r.metrics.scalars.end() ? "" : duration(el->second.value.back());
    std::string notes = skipped_text(r.metrics);
    for (const auto& n : r.notes) notes += (notes.empty() ? "" : "; ") + n;
    h += fmt::format(
        "<tr><th>{}{}</th><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
        swatch(i), svg::escape(r.name), last_step(r), elapsed,
        last_value(r, r.metrics.scalars.count("loss_lm") ? "loss_lm" : "loss"), best_val(r), status(r),
        event_counts(r), r.metrics.lines_read, svg::escape(notes));
  }
  return h + "</tbody></table>";
}

using KeyValues = std::vector<std::pair<std::string, std::string>>;

// Keys grouped by their section (the part before the last '.'), sections and keys in order of first appearance.
std::vector<std::string> merged_keys(const std::vector<const KeyValues*>& tables) {
  std::vector<std::string> sections;
  std::map<std::string, std::vector<std::string>> by_section;
  std::set<std::string> seen;
  for (const auto* t : tables) {
    for (const auto& [k, v] : *t) {
      if (!seen.insert(k).second) continue;
      auto dot = k.rfind('.');
      std::string sec = dot == std::string::npos ? "" : k.substr(0, dot);
      if (!by_section.count(sec)) sections.push_back(sec);
      by_section[sec].push_back(k);
    }
  }
  std::vector<std::string> keys;
  for (const auto& s : sections) keys.insert(keys.end(), by_section[s].begin(), by_section[s].end());
  return keys;
}

// Side-by-side key/value table; with several runs, rows whose values differ (or are missing somewhere) get
// class "diff" and are listed above the table.
std::string compare_table(const std::vector<RunData>& runs, KeyValues RunData::*field, const char* what) {
  // A run without the file at all (no run.json) is shown as dashes but does not make every key "differ".
  std::vector<const KeyValues*> tables;
  std::size_t compared = 0;
  for (const auto& r : runs) {
    tables.push_back(&(r.*field));
    compared += !(r.*field).empty();
  }
  const auto keys = merged_keys(tables);
  if (keys.empty()) return "<p class=\"muted\">No " + std::string(what) + " found.</p>";
  std::string head = "<table><thead><tr><th>key</th>", body;
  for (std::size_t i = 0; i < runs.size(); ++i) head += "<th>" + swatch(i) + svg::escape(runs[i].name) + "</th>";
  head += "</tr></thead><tbody>";
  std::vector<std::string> differing;
  for (const auto& k : keys) {
    std::vector<const std::string*> vals, present;  // present: only the runs that have this table
    for (const auto* t : tables) {
      auto it = std::find_if(t->begin(), t->end(), [&](const auto& kv) { return kv.first == k; });
      vals.push_back(it == t->end() ? nullptr : &it->second);
      if (!t->empty()) present.push_back(vals.back());
    }
    const bool differ = compared > 1 && std::any_of(present.begin(), present.end(), [&](const std::string* v) {
                          return !v || !present[0] || *v != *present[0];
                        });
    if (differ) differing.push_back(k);
    body += std::string(differ ? "<tr class=\"diff\">" : "<tr>") + "<th>" + svg::escape(k) + "</th>";
    for (const auto* v : vals) body += v ? "<td>" + svg::escape(*v) + "</td>" : "<td class=\"missing\">\u2014</td>";
    body += "</tr>";
  }
  std::string intro;
  if (compared > 1) {
    std::string list;
    for (const auto& k : differing) list += (list.empty() ? "" : ", ") + ("<b>" + svg::escape(k) + "</b>");
    intro = differing.empty() ? "<p>All " + std::to_string(keys.size()) + " keys are equal across runs.</p>"
                              : fmt::format("<p>{} of {} keys differ (highlighted): {}</p>", differing.size(),
                                            keys.size(), list);
  }
  return intro + head + body + "</tbody></table>";
}

std::string header_html(const std::vector<RunData>& runs, const ReportOptions& opt) {
  std::string h = "<h1>" + svg::escape(opt.title) + "</h1><p class=\"runs\">";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    h += "<span>" + swatch(i) + svg::escape(runs[i].name) + "</span>";
  }
  h += "</p>";
  for (const auto& r : runs) {
    std::string s = skipped_text(r.metrics);
    if (!s.empty()) h += "<div class=\"warn\">" + svg::escape(r.name) + ": metrics.jsonl: " + svg::escape(s) + "</div>";
  }
  return h;
}

std::string charts_html(const std::vector<RunData>& runs, const ReportOptions& opt) {
  double x0, x1;
  step_range(runs, x0, x1);
  std::string h, section;
  for (const auto& p : plan_charts(runs)) {
    if (p.section != section) {
      if (!section.empty()) h += "</div></section>";
      section = p.section;
      h += "<section><h2>" + svg::escape(section) + "</h2><div class=\"grid\">";
    }
    h += p.is_heatmap ? render_heatmap(p, runs, opt, x0, x1) : render_line(p, runs, opt, x0, x1);
  }
  if (!section.empty()) h += "</div></section>";
  return h;
}

}  // namespace

std::string render_report(const std::vector<RunData>& runs, const ReportOptions& opt) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                  "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>" +
                  svg::escape(opt.title) + "</title><style>" + kStyle + "</style></head><body>\n";
  h += header_html(runs, opt);
  h += "<section><h2>Runs</h2>" + summary_table(runs) + "</section>\n";
  h += charts_html(runs, opt);
  h += "\n<section><h2>Recipes</h2>" + compare_table(runs, &RunData::recipe, "recipe.toml") + "</section>";
  h += "<section><h2>Environment (run.json)</h2>" + compare_table(runs, &RunData::info, "run.json") + "</section>";
  h += "<p class=\"muted\">Directories: ";
  for (std::size_t i = 0; i < runs.size(); ++i) h += (i ? ", " : "") + svg::escape(runs[i].dir);
  h += fmt::format(
      ". Curves longer than {} points are thinned keeping each bucket's minimum and maximum; curves longer than {} "
      "points are drawn faint, under a centred moving mean of {:.0f}% of their points. Hover a line, point or cell for "
      "its name and value.</p>\n</body></html>\n",
      opt.max_points, kDenseCurve, 100 * kSmoothFraction);
  return h;
}

ChartCount count_charts(const std::vector<RunData>& runs) {
  ChartCount n;
  for (const auto& p : plan_charts(runs)) (p.is_heatmap ? n.heatmap : n.line) += 1;
  return n;
}

std::size_t write_report(const std::vector<RunData>& runs, const std::string& out_path, const ReportOptions& opt) {
  const std::string html = render_report(runs, opt);
  const fs::path out(out_path);
  if (out.has_parent_path()) make_directories(out.parent_path().string());
  write_output_file(out_path, [&](std::ostream& f) { f << html; });
  return html.size();
}

}  // namespace spread::report
