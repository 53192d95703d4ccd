#pragma once
// Diagnostic report: one self-contained HTML page (inline SVG, no script, no network) that plots one or more run
// directories side by side: losses, learning rate, throughput, gradient norm, evaluation scores and the geometry
// diagnostics over steps, a layer x step heatmap of mean_cos per run, and the resolved recipes with the keys that
// differ across runs highlighted.
//
// Input is what the trainer writes (RUN_DIR/metrics.jsonl, recipe.toml, run.json) and may be incomplete: a run that
// is still training, a half-written last line or a corrupt line are read as far as they go; skipped lines are
// counted and shown in the page, never fatal.
//
// Long series are thinned by min/max bucket downsampling: the first and last points are kept, the indices between
// them are cut into B = (max_points - 2)/2 equal buckets and each bucket keeps its lowest and its highest point in
// step order, so every spike and the global minimum and maximum survive while a 20,000-step run draws at most
// max_points points per curve. A noisy dense curve (minibatch loss, throughput) is drawn faint under a centred
// moving mean of 1% of its points; a heatmap is one embedded PNG (one pixel per layer and per column).
#include <cstddef>
#include <istream>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace spread::report {

// One scalar metric over steps, sorted by step; a step logged twice keeps its last value (a resumed run re-logs
// the steps after its checkpoint).
struct Series {
  std::vector<double> step;
  std::vector<double> value;
  std::size_t size() const { return step.size(); }
};

// A per-layer metric (index 0 = embeddings): values[i][l] is layer l at step[i]. Rows may differ in length when
// a line is short; consumers treat a missing layer as absent.
struct LayerSeries {
  std::vector<double> step;
  std::vector<std::vector<double>> values;
  std::size_t layers() const;  // the longest row
};

struct RunEvent {
  double step = 0;
  std::string name;  // "start", "resume", "end", "nan_skip", ...
};

// Everything read from one metrics.jsonl.
struct Metrics {
  std::map<std::string, Series> scalars;      // every numeric key except "step"
  std::map<std::string, LayerSeries> layered;  // every key whose value is an array of numbers
  std::vector<RunEvent> events;
  std::size_t lines_read = 0;     // parsed and used
  std::size_t lines_skipped = 0;  // not a JSON object, or no integer "step"; includes a partial last line
  std::vector<std::size_t> skipped_line_numbers;  // 1-based, the first few only
  bool partial_last_line = false;  // the file ends mid-line (the trainer is writing it, or was killed)
};

// Reads metrics.jsonl text. Blank lines are ignored; malformed ones are skipped and counted, never thrown.
Metrics parse_metrics(std::istream& in);

// One run directory as the report sees it.
struct RunData {
  std::string name;  // the directory's basename
  std::string dir;
  Metrics metrics;
  std::vector<std::pair<std::string, std::string>> recipe;  // flattened "section.key" -> value, file order
  std::vector<std::pair<std::string, std::string>> info;    // run.json, flattened the same way
  std::vector<std::string> notes;  // what was missing or unreadable (no recipe.toml, bad run.json, ...)
};

// Throws UserError when the directory does not exist or holds none of metrics.jsonl / recipe.toml.
RunData load_run_data(const std::string& dir);

// TOML text -> ("section.sub.key", value) in document order; strings unquoted, arrays as "[a, b]".
// Throws UserError (file, line, problem) on a TOML syntax error.
std::vector<std::pair<std::string, std::string>> flatten_toml(const std::string& text,
                                                               const std::string& source_name);

// The indices kept by min/max bucket downsampling (see the header comment), ascending. Returns every index when
// values.size() <= max_points. max_points < 4 is treated as 4.
std::vector<std::size_t> downsample_minmax_indices(const std::vector<double>& values, std::size_t max_points);
Series downsample_minmax(const Series& s, std::size_t max_points);

struct ReportOptions {
  std::string title = "spread report";
  std::size_t max_points = 1000;        // per curve, after downsampling
  std::size_t max_heatmap_columns = 480;  // steps per heatmap (about one per pixel); neighbours are averaged beyond
};

// The whole HTML page. Every chart is an <svg class="chart" data-kind="line|heatmap" ...>.
std::string render_report(const std::vector<RunData>& runs, const ReportOptions& opt = {});

// Counts the charts render_report would draw, by kind, without rendering (for the CLI's summary and tests).
struct ChartCount {
  std::size_t line = 0;
  std::size_t heatmap = 0;
};
ChartCount count_charts(const std::vector<RunData>& runs);

// Renders runs and writes out_path (creating its parent directory); returns the page size in bytes. Throws
// UserError when the file cannot be written.
std::size_t write_report(const std::vector<RunData>& runs, const std::string& out_path,
                         const ReportOptions& opt = {});

}  // namespace spread::report
