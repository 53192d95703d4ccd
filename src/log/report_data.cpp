// Reading a run directory for the report: metrics.jsonl (tolerant: a bad line is skipped and counted), recipe.toml
// flattened to "section.key = value" in file order, run.json flattened the same way, and min/max bucket
// downsampling of long series (see report.h for the rule).
#include "spread/log/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <string_view>
#include <toml++/toml.h>

#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_depth.h"

namespace fs = std::filesystem;

namespace spread::report {

std::size_t LayerSeries::layers() const {
  std::size_t n = 0;
  for (const auto& row : values) n = std::max(n, row.size());
  return n;
}

namespace {

constexpr std::size_t kSkippedLinesRemembered = 10;

// Stable sort by step, then keep the last entry of each step: a resumed run re-logs the steps after its
// checkpoint and the newer value is the one that describes the weights that went on.
template <typename V>
void sort_dedupe_keep_last(std::vector<double>& step, std::vector<V>& value) {
  std::vector<std::size_t> order(step.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return step[a] < step[b]; });
  std::vector<double> s;
  std::vector<V> v;
  s.reserve(order.size());
  v.reserve(order.size());
  for (std::size_t i : order) {
    if (!s.empty() && s.back() == step[i]) {
      v.back() = std::move(value[i]);
    } else {
      s.push_back(step[i]);
      v.push_back(std::move(value[i]));
    }
  }
  step = std::move(s);
  value = std::move(v);
}

// "step" must be an integer; a float with an integral value is accepted (a writer that went through double).
bool read_step(const nlohmann::json& line, double& step) {
  auto it = line.find("step");
  if (it == line.end() || !it->is_number()) return false;
  if (it->is_number_float()) {
    double d = it->get<double>();
    if (d != std::floor(d)) return false;
    step = d;
    return true;
  }
  step = it->get<double>();
  return true;
}

// An array of numbers (null = a layer the writer could not compute, kept as NaN so layer indices stay aligned).
bool read_number_array(const nlohmann::json& v, std::vector<double>& out) {
  if (!v.is_array() || v.empty()) return false;
  out.clear();
  for (const auto& e : v) {
    if (e.is_number()) out.push_back(e.get<double>());
    else if (e.is_null()) out.push_back(std::numeric_limits<double>::quiet_NaN());
    else return false;
  }
  return true;
}

void add_line(const nlohmann::json& line, double step, Metrics& m) {
  std::vector<double> row;
  for (const auto& [key, v] : line.items()) {
    if (key == "step") continue;
    if (key == "event" && v.is_string()) {
      m.events.push_back({step, v.get<std::string>()});
    } else if (v.is_number()) {  // booleans are not numbers in nlohmann::json
      auto& s = m.scalars[key];
      s.step.push_back(step);
      s.value.push_back(v.get<double>());
    } else if (read_number_array(v, row)) {
      auto& s = m.layered[key];
      s.step.push_back(step);
      s.values.push_back(row);
    }
    // Anything else (strings, objects, null) is not plotted.
  }
}

void note_skipped(Metrics& m, std::size_t line_number) {
  ++m.lines_skipped;
  if (m.skipped_line_numbers.size() < kSkippedLinesRemembered) m.skipped_line_numbers.push_back(line_number);
}

std::string read_file(const fs::path& p) { return read_whole_file(p.string()).value_or(""); }

std::string run_name(const std::string& dir) {
  fs::path p = fs::absolute(fs::path(dir)).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

std::string format_double(double d) { return fmt::format("{}", d); }

std::string toml_value_text(const toml::node& n);

std::string toml_array_text(const toml::array& a) {
  std::string s = "[";
  for (std::size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + toml_value_text(*a.get(i));
  return s + "]";
}

std::string toml_inline_table_text(const toml::table& t) {
  std::string s = "{";
  bool first = true;
  for (const auto& [k, v] : t) {
    s += (first ? "" : ", ") + std::string(k.str()) + " = " + toml_value_text(v);
    first = false;
  }
  return s + "}";
}

std::string toml_value_text(const toml::node& n) {
  if (auto v = n.as_string()) return v->get();
  if (auto v = n.as_integer()) return std::to_string(v->get());
  if (auto v = n.as_floating_point()) return format_double(v->get());
  if (auto v = n.as_boolean()) return v->get() ? "true" : "false";
  if (auto v = n.as_array()) return toml_array_text(*v);
  if (auto v = n.as_table()) return toml_inline_table_text(*v);
  std::ostringstream ss;  // dates and times: toml++ prints them in TOML syntax
  n.visit([&](const auto& x) { ss << x; });
  return ss.str();
}

struct FlatEntry {
  std::uint32_t line, column;
  std::string key, value;
};

void flatten_table(const toml::table& t, const std::string& prefix, std::vector<FlatEntry>& out) {
  for (const auto& [k, v] : t) {
    std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (auto sub = v.as_table(); sub && !sub->is_inline()) {
      flatten_table(*sub, key, out);
    } else {
      const auto& src = v.source().begin;
      out.push_back({src.line, src.column, key, toml_value_text(v)});
    }
  }
}

void flatten_json(const nlohmann::ordered_json& j, const std::string& prefix,
                  std::vector<std::pair<std::string, std::string>>& out) {
  for (const auto& [k, v] : j.items()) {
    std::string key = prefix.empty() ? k : prefix + "." + k;
    if (v.is_object()) flatten_json(v, key, out);
    else out.emplace_back(key, v.is_string() ? v.get<std::string>() : v.dump());
  }
}

void load_recipe(const fs::path& p, RunData& run) {
  if (!fs::exists(p)) {
    run.notes.push_back("no recipe.toml");
    return;
  }
  try {
    run.recipe = flatten_toml(read_file(p), p.string());
  } catch (const UserError& e) {
    run.notes.push_back(std::string("recipe.toml not shown: ") + e.what());
  }
}

void load_info(const fs::path& p, RunData& run) {
  if (!fs::exists(p)) return;  // optional
  const std::string text = read_file(p);
  auto j = json_too_deep(text) ? nlohmann::ordered_json() : nlohmann::ordered_json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    run.notes.push_back("run.json is not a JSON object; not shown");
    return;
  }
  flatten_json(j, "", run.info);
}

}  // namespace

Metrics parse_metrics(std::istream& in) {
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  Metrics m;
  std::size_t begin = 0, line_number = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    const bool complete = end != std::string::npos;
    if (!complete) end = text.size();
    ++line_number;
    std::string_view line(text.data() + begin, end - begin);
    begin = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto j = json_too_deep(line) ? nlohmann::json() : nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
    double step = 0;
    if (j.is_discarded() || !j.is_object() || !read_step(j, step)) {
      note_skipped(m, line_number);
      if (!complete) m.partial_last_line = true;
      continue;
    }
    add_line(j, step, m);
    ++m.lines_read;
  }
  for (auto& [key, s] : m.scalars) sort_dedupe_keep_last(s.step, s.value);
  for (auto& [key, s] : m.layered) sort_dedupe_keep_last(s.step, s.values);
  std::stable_sort(m.events.begin(), m.events.end(),
                   [](const RunEvent& a, const RunEvent& b) { return a.step < b.step; });
  return m;
}

std::vector<std::pair<std::string, std::string>> flatten_toml(const std::string& text,
                                                               const std::string& source_name) {
  toml::table t;
  try {
    t = toml::parse(text, source_name);
  } catch (const toml::parse_error& err) {
    throw user_error(source_name, int(err.source().begin.line), "",
                     "invalid TOML: " + std::string(err.description()));
  }
  std::vector<FlatEntry> flat;
  flatten_table(t, "", flat);
  // toml++ keeps keys sorted; the source position restores the order a person wrote (and the trainer resolved).
  std::stable_sort(flat.begin(), flat.end(), [](const FlatEntry& a, const FlatEntry& b) {
    return a.line != b.line ? a.line < b.line : a.column < b.column;
  });
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(flat.size());
  for (auto& e : flat) out.emplace_back(std::move(e.key), std::move(e.value));
  return out;
}

RunData load_run_data(const std::string& dir) {
  const fs::path root(dir);
  if (!fs::is_directory(root)) {
    throw user_error(dir, 0, "", "not a directory", "pass run directories, e.g. spread report checkpoints/NAME");
  }
  const fs::path metrics = root / "metrics.jsonl", recipe = root / "recipe.toml";
  if (!fs::exists(metrics) && !fs::exists(recipe)) {
    throw user_error(dir, 0, "", "not a run directory: no metrics.jsonl and no recipe.toml",
                     "pass the directory a training run writes to");
  }
  RunData run;
  run.dir = dir;
  run.name = run_name(dir);
  if (fs::exists(metrics)) {
    std::ifstream f = open_input_file(metrics.string());
    run.metrics = parse_metrics(f);
  } else {
    run.notes.push_back("no metrics.jsonl yet");
  }
  load_recipe(recipe, run);
  load_info(root / "run.json", run);
  return run;
}

std::vector<std::size_t> downsample_minmax_indices(const std::vector<double>& values, std::size_t max_points) {
  const std::size_t n = values.size();
  max_points = std::max<std::size_t>(max_points, 4);
  std::vector<std::size_t> keep;
  if (n <= max_points) {
    keep.resize(n);
    std::iota(keep.begin(), keep.end(), 0);
    return keep;
  }
  // Interior indices 1..n-2 in B equal buckets, two points each, plus the two endpoints: at most max_points.
  const std::size_t buckets = (max_points - 2) / 2, inner = n - 2;
  keep.reserve(2 * buckets + 2);
  keep.push_back(0);
  for (std::size_t b = 0; b < buckets; ++b) {
    const std::size_t lo = 1 + b * inner / buckets, hi = 1 + (b + 1) * inner / buckets;
    if (lo >= hi) continue;
    std::size_t imin = lo, imax = lo;
    for (std::size_t i = lo + 1; i < hi; ++i) {
      if (values[i] < values[imin]) imin = i;
      if (values[i] > values[imax]) imax = i;
    }
    keep.push_back(std::min(imin, imax));
    if (imin != imax) keep.push_back(std::max(imin, imax));
  }
  keep.push_back(n - 1);
  return keep;
}

Series downsample_minmax(const Series& s, std::size_t max_points) {
  Series out;
  for (std::size_t i : downsample_minmax_indices(s.value, max_points)) {
    out.step.push_back(s.step[i]);
    out.value.push_back(s.value[i]);
  }
  return out;
}

}  // namespace spread::report
