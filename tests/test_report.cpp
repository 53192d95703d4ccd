// The diagnostic report: tolerant parsing of metrics.jsonl (counts checked against the hand-written fixtures in
// tests/data/report/), TOML flattening, min/max downsampling, the chart catalogue, recipe differences, the size of a
// 20,000-step three-run page, the CLI, and a headless Chromium render where Chromium is installed.
#include <gtest/gtest.h>
#include "test_paths.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <unistd.h>

#include <zlib.h>

#include "../src/log/report_png.h"
#include "../src/log/report_svg.h"
#include "spread/log/report.h"
#include "spread/util/error.h"

namespace fs = std::filesystem;
using namespace spread::report;

namespace {

const std::string kFixtures = std::string(SPREAD_TEST_DATA_DIR) + "/report";
const std::string kRunA = kFixtures + "/lm_lambda0";    // clean, finished
const std::string kRunB = kFixtures + "/lm_lambda0.1";  // bad lines, a resume, a partial last line, extra keys

std::size_t count_substr(const std::string& s, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = s.find(needle); p != std::string::npos; p = s.find(needle, p + needle.size())) ++n;
  return n;
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A fresh directory under /tmp, removed when the test ends.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path = fs::temp_directory_path() / fmt::format("spread_report_{}_{}", tag, getpid());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

struct Command {
  int rc;
  std::string out;
};

Command run_command(const std::string& cmd) {
  Command r{-1, ""};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::vector<RunData> fixture_runs() { return {load_run_data(kRunA), load_run_data(kRunB)}; }

}  // namespace

// ---- parsing -----------------------------------------------------------------------------------------------------

TEST(ReportParse, SkipsAndCountsMalformedLinesInFixture) {
  RunData b = load_run_data(kRunB);
  // Lines 5 (not JSON), 7 (no step), 8 (cut mid-line), 15 (step is a string), 17 (step 60.5), 19 (partial, no \n).
  EXPECT_EQ(b.metrics.lines_skipped, 6u);
  EXPECT_EQ(b.metrics.skipped_line_numbers, (std::vector<std::size_t>{5, 7, 8, 15, 17, 19}));
  EXPECT_TRUE(b.metrics.partial_last_line);
  EXPECT_EQ(b.metrics.lines_read, 13u);

  RunData a = load_run_data(kRunA);
  EXPECT_EQ(a.metrics.lines_read, 18u);
  EXPECT_EQ(a.metrics.lines_skipped, 0u);
  EXPECT_FALSE(a.metrics.partial_last_line);
}

TEST(ReportParse, ResumedStepKeepsTheLastValueAndStepsAscend) {
  RunData b = load_run_data(kRunB);
  const Series& loss = b.metrics.scalars.at("loss");
  EXPECT_EQ(loss.step, (std::vector<double>{0, 10, 20, 30, 40, 50, 60}));
  EXPECT_DOUBLE_EQ(loss.value[4], 4.40);  // line 12 (after the resume) replaces line 10's 4.60
  ASSERT_EQ(b.metrics.events.size(), 2u);
  EXPECT_EQ(b.metrics.events[1].name, "resume");
  EXPECT_EQ(b.metrics.events[1].step, 30);
}

TEST(ReportParse, ArraysArePerLayerStringsAreIgnored) {
  RunData b = load_run_data(kRunB);
  const LayerSeries& mc = b.metrics.layered.at("mean_cos");
  EXPECT_EQ(mc.step, (std::vector<double>{0, 50}));
  EXPECT_EQ(mc.values[1], (std::vector<double>{0.05, 0.28, 0.55}));
  EXPECT_EQ(mc.layers(), 3u);
  EXPECT_TRUE(b.metrics.layered.count("attn_entropy"));
  EXPECT_FALSE(b.metrics.scalars.count("git_rev"));
  EXPECT_FALSE(b.metrics.layered.count("git_rev"));
  EXPECT_FALSE(b.metrics.scalars.count("event"));
  EXPECT_DOUBLE_EQ(b.metrics.scalars.at("custom_metric").value[1], 1.9);
}

TEST(ReportParse, InlineEdgeCases) {
  std::istringstream in(
      "\n"
      "{\"step\": 3.0, \"x\": 1, \"flag\": true, \"n\": null}\n"
      "   \n"
      "[1, 2]\n"
      "{\"step\": 4, \"x\": 2, \"arr\": [1, null, 3], \"mixed\": [1, \"a\"]}");  // last line complete, no newline
  Metrics m = parse_metrics(in);
  EXPECT_EQ(m.lines_read, 2u);
  EXPECT_EQ(m.lines_skipped, 1u);  // the JSON array is not an object
  EXPECT_EQ(m.skipped_line_numbers, (std::vector<std::size_t>{4}));
  EXPECT_FALSE(m.partial_last_line);
  EXPECT_EQ(m.scalars.at("x").value, (std::vector<double>{1, 2}));
  EXPECT_FALSE(m.scalars.count("flag"));
  EXPECT_FALSE(m.scalars.count("n"));
  EXPECT_FALSE(m.layered.count("mixed"));
  ASSERT_EQ(m.layered.at("arr").values.size(), 1u);
  EXPECT_TRUE(std::isnan(m.layered.at("arr").values[0][1]));
}

TEST(ReportParse, MissingDirectoryIsAUserError) {
  EXPECT_THROW(load_run_data(kFixtures + "/no_such_run"), spread::UserError);
  EXPECT_THROW(load_run_data(kFixtures), spread::UserError);  // a directory, but not a run directory
}

TEST(ReportParse, RunNameIsTheBasenameEvenWithATrailingSlash) {
  EXPECT_EQ(load_run_data(kRunB + "/").name, "lm_lambda0.1");
}

// ---- recipe ------------------------------------------------------------------------------------------------------

TEST(ReportToml, FlattensInFileOrder) {
  auto flat = flatten_toml(
      "[run]\nname = \"x\"\nseed = 7\n\n[model]\nn_layer = 2\ndropout = 0.1\n\n"
      "[loss.dispersion]\nlambda = 0.25\nlayers = [1, 2]\nenabled = true\n\n[diagnostics]\nevery = 5e2\n",
      "inline.toml");
  std::vector<std::pair<std::string, std::string>> expected = {
      {"run.name", "x"},           {"run.seed", "7"},
      {"model.n_layer", "2"},      {"model.dropout", "0.1"},
      {"loss.dispersion.lambda", "0.25"}, {"loss.dispersion.layers", "[1, 2]"},
      {"loss.dispersion.enabled", "true"}, {"diagnostics.every", "500"}};
  EXPECT_EQ(flat, expected);
}

TEST(ReportToml, SyntaxErrorNamesTheLine) {
  try {
    flatten_toml("[run]\nname = \"x\"\nseed = = 3\n", "bad.toml");
    FAIL() << "no exception";
  } catch (const spread::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.toml:3"), std::string::npos) << e.what();
  }
}

TEST(Report, RecipeDiffHighlightsDifferingKeysOnly) {
  const std::string html = render_report(fixture_runs());
  EXPECT_NE(html.find("<tr class=\"diff\"><th>loss.dispersion.lambda</th><td>0</td><td>0.1</td>"), std::string::npos);
  EXPECT_NE(html.find("<tr class=\"diff\"><th>run.name</th>"), std::string::npos);
  EXPECT_NE(html.find("<tr class=\"diff\"><th>loss.dispersion.layers</th><td class=\"missing\">"), std::string::npos);
  EXPECT_NE(html.find("<tr><th>model.n_layer</th><td>2</td><td>2</td></tr>"), std::string::npos);
  EXPECT_NE(html.find("4 of 19 keys differ"), std::string::npos);
  // Only run A has a run.json: its keys are shown against dashes, not flagged as differences.
  EXPECT_NE(html.find("<tr><th>blas</th><td>openblas</td><td class=\"missing\">"), std::string::npos);
}

// ---- downsampling ------------------------------------------------------------------------------------------------

TEST(ReportDownsample, KeepsSpikesExtremesAndEndpoints) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> noise(-1, 1);
  std::vector<double> v(20000);
  for (auto& x : v) x = noise(rng);
  // Spikes far apart (more than a bucket of 40 indices), one up and one down each; the last pair is the extremes.
  const std::vector<std::size_t> spikes = {1234, 5000, 9999, 15001, 17777, 19000};
  for (std::size_t i = 0; i < spikes.size(); ++i) v[spikes[i]] = (i % 2 ? -1 : 1) * (10.0 + double(i));
  v.front() = 0.5;
  v.back() = -0.5;
  auto keep = downsample_minmax_indices(v, 1000);
  EXPECT_LE(keep.size(), 1000u);
  EXPECT_GE(keep.size(), 900u);
  EXPECT_TRUE(std::is_sorted(keep.begin(), keep.end()));
  EXPECT_EQ(std::adjacent_find(keep.begin(), keep.end()), keep.end());  // no duplicates
  EXPECT_EQ(keep.front(), 0u);
  EXPECT_EQ(keep.back(), v.size() - 1);
  for (std::size_t s : spikes) EXPECT_TRUE(std::binary_search(keep.begin(), keep.end(), s)) << s;

  Series s;
  for (std::size_t i = 0; i < v.size(); ++i) s.step.push_back(double(i)), s.value.push_back(v[i]);
  Series d = downsample_minmax(s, 1000);
  EXPECT_EQ(*std::min_element(d.value.begin(), d.value.end()), *std::min_element(v.begin(), v.end()));
  EXPECT_EQ(*std::max_element(d.value.begin(), d.value.end()), *std::max_element(v.begin(), v.end()));
  for (std::size_t i = 0; i < d.size(); ++i) EXPECT_EQ(d.value[i], v[std::size_t(d.step[i])]);
}

TEST(ReportDownsample, ShortSeriesIsUnchanged) {
  std::vector<double> v = {3, 1, 2};
  EXPECT_EQ(downsample_minmax_indices(v, 1000), (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(downsample_minmax_indices(std::vector<double>(10, 0.0), 10).size(), 10u);
}

// ---- axes --------------------------------------------------------------------------------------------------------

TEST(ReportAxes, TicksAndLabelsAreRoundNumbers) {
  using namespace spread::report::svg;
  EXPECT_EQ(tick_labels(linear_ticks(0, 20000, 5)), (std::vector<std::string>{"0", "5k", "10k", "15k", "20k"}));
  EXPECT_EQ(tick_labels(linear_ticks(0.48, 0.61, 3)), (std::vector<std::string>{"0.50", "0.55", "0.60"}));
  EXPECT_EQ(tick_labels(linear_ticks(0, 6.2e-4, 3)), (std::vector<std::string>{"0", "2e-4", "4e-4", "6e-4"}));
  EXPECT_EQ(tick_labels(log_ticks(0.002, 30)), (std::vector<std::string>{"0.01", "0.1", "1", "10"}));
  EXPECT_EQ(tick_labels(log_ticks(1.5, 11)), (std::vector<std::string>{"1.5", "2", "3", "5", "10"}));
  EXPECT_EQ(tick_labels(log_ticks(2.6, 11)), (std::vector<std::string>{"3", "4", "5", "6", "8", "10"}));
  EXPECT_EQ(format_value(0.000312), "3.12e-4");
  EXPECT_EQ(format_value(1234.56), "1235");
  EXPECT_EQ(format_value(0.012345678), "0.01235");
}

// ---- heatmap image -----------------------------------------------------------------------------------------------

TEST(ReportPng, HeaderMatchesTheWellKnownOnePixelPng) {
  // Every 1x1 RGBA PNG starts with these 33 bytes (signature, IHDR and its CRC), as in the PNG specification.
  const std::string expected("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89", 33);
  const std::string png = spread::report::png::encode_rgba({0, 0, 0, 0}, 1, 1);
  EXPECT_EQ(png.substr(0, 33), expected);
  EXPECT_EQ(png.substr(png.size() - 12), std::string("\0\0\0\0IEND\xae\x42\x60\x82", 12));
}

TEST(ReportPng, IdatInflatesToTheFilteredRows) {
  const std::vector<std::uint8_t> px = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,  // row 0: two pixels
                                        13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24};
  const std::string png = spread::report::png::encode_rgba(px, 2, 2);
  const std::size_t at = png.find("IDAT");
  ASSERT_NE(at, std::string::npos);
  const auto len = (unsigned(uint8_t(png[at - 4])) << 24) | (unsigned(uint8_t(png[at - 3])) << 16) |
                   (unsigned(uint8_t(png[at - 2])) << 8) | unsigned(uint8_t(png[at - 1]));
  std::string raw(64, '\0');
  uLongf raw_len = raw.size();
  ASSERT_EQ(uncompress(reinterpret_cast<Bytef*>(raw.data()), &raw_len,
                       reinterpret_cast<const Bytef*>(png.data() + at + 4), len),
            Z_OK);
  raw.resize(raw_len);
  std::string expected;
  for (int row = 0; row < 2; ++row) {
    expected += '\0';  // filter byte: None
    for (int i = 0; i < 8; ++i) expected += char(px[std::size_t(row * 8 + i)]);
  }
  EXPECT_EQ(raw, expected);
}

TEST(ReportPng, Base64MatchesRfc4648Vectors) {
  using spread::report::png::base64;
  EXPECT_EQ(base64(""), "");
  EXPECT_EQ(base64("f"), "Zg==");
  EXPECT_EQ(base64("fo"), "Zm8=");
  EXPECT_EQ(base64("foo"), "Zm9v");
  EXPECT_EQ(base64("foob"), "Zm9vYg==");
  EXPECT_EQ(base64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64(std::string("\xff\xfe", 2)), "//4=");
}

// ---- charts ------------------------------------------------------------------------------------------------------

TEST(Report, ChartCountFollowsTheKeysPresent) {
  // Run A: loss+val, lr, tokens/s, grad_norm | val_ppl, val_bpb | mean_cos, batch_mean_cos, concentration, socm,
  // socm_d_mu, socm_d_sigma = 12 line charts, and one mean_cos heatmap.
  auto a = count_charts({load_run_data(kRunA)});
  EXPECT_EQ(a.line, 12u);
  EXPECT_EQ(a.heatmap, 1u);
  // With run B: + training objective (B logs loss_lm, which takes loss's place on the loss chart), loss_disp,
  // align, uniform, ndcg@10, sts_spearman, attn_entropy, custom_metric = 20, and a heatmap per run.
  auto runs = fixture_runs();
  auto ab = count_charts(runs);
  EXPECT_EQ(ab.line, 20u);
  EXPECT_EQ(ab.heatmap, 2u);
  const std::string html = render_report(runs);
  EXPECT_EQ(count_substr(html, "<svg class=\"chart\""), 22u);
  EXPECT_EQ(count_substr(html, "data-kind=\"heatmap\""), 2u);
  EXPECT_EQ(count_substr(html, "<script"), 0u);
  EXPECT_EQ(count_substr(html, "http://") + count_substr(html, "https://"),
            count_substr(html, "xmlns=\"http://www.w3.org/2000/svg\""));  // no network reference but the namespace
  EXPECT_NE(html.find("skipped 6 malformed lines (line 5, 7, 8, 15, 17, 19)"), std::string::npos);
  EXPECT_NE(html.find("resumed at step 30"), std::string::npos);
  EXPECT_NE(html.find("torch_version"), std::string::npos);
}

TEST(Report, EscapesKeysAndNames) {
  RunData r;
  r.name = "a<b>&\"c\"";
  std::istringstream in("{\"step\": 1, \"x<y&z\": 1}\n{\"step\": 2, \"x<y&z\": 2}\n");
  r.metrics = parse_metrics(in);
  r.recipe = {{"run.name", "</td><script>"}};
  const std::string html = render_report({r});
  EXPECT_NE(html.find("x&lt;y&amp;z"), std::string::npos);
  EXPECT_EQ(html.find("x<y"), std::string::npos);
  EXPECT_EQ(html.find("a<b>"), std::string::npos);
  EXPECT_EQ(html.find("<script>"), std::string::npos);
}

// A synthetic 20,000-step run: training every step, evaluation every 250, diagnostics of 13 layers every 100.
void write_big_run(const fs::path& dir, double lambda, unsigned seed) {
  fs::create_directories(dir);
  std::ofstream f(dir / "metrics.jsonl");
  std::mt19937 rng(seed);
  std::normal_distribution<double> n01;
  f << "{\"step\":0,\"event\":\"start\"}\n";
  for (int s = 0; s <= 20000; ++s) {
    double lm = 1.4 + 9.4 * std::exp(-s / 900.0) + 0.05 * n01(rng), disp = -4 - std::exp(-s / 3000.0);
    double lr = s < 500 ? 6e-4 * s / 500 : 6e-5 + 5.4e-4 * 0.5 * (1 + std::cos(M_PI * (s - 500) / 19500.0));
    f << fmt::format(
        "{{\"step\":{},\"loss\":{:.5f},\"loss_lm\":{:.5f},\"loss_disp\":{:.5f},\"lr\":{:.6g},\"grad_norm\":{:.4f},"
        "\"tokens_per_s\":{:.1f},\"elapsed_s\":{:.2f}}}\n",
        s, lm + lambda * disp, lm, disp, lr, 0.3 + 4 * std::exp(-s / 400.0) * std::abs(1 + 0.3 * n01(rng)),
        52000 + 900 * n01(rng), s * 0.02);
    if (s % 250 == 0) {
      double vl = 1.5 + 9.3 * std::exp(-s / 900.0);
      f << fmt::format("{{\"step\":{},\"val_loss\":{:.4f},\"val_ppl\":{:.3f},\"val_bpb\":{:.4f}}}\n", s, vl,
                       std::exp(vl), vl / std::log(2.0) / 3.7);
    }
    if (s % 100 == 0) {
      std::string mc, bmc, conc;
      for (int l = 0; l <= 12; ++l) {
        double depth = l / 12.0, cond = (1 - std::exp(-s / 2000.0)) / (1 + 20 * lambda);
        mc += fmt::format("{}{:.4f}", l ? "," : "", 0.05 + depth * (0.3 + 0.55 * cond));
        bmc += fmt::format("{}{:.4f}", l ? "," : "", 0.02 + depth * (0.2 + 0.5 * cond));
        conc += fmt::format("{}{:.4f}", l ? "," : "", 8.0 * std::exp(-depth * 3 * (0.3 + cond)));
      }
      f << fmt::format(
          "{{\"step\":{},\"mean_cos\":[{}],\"batch_mean_cos\":[{}],\"concentration\":[{}],\"socm\":{:.4f},"
          "\"socm_d_mu\":{:.4f},\"socm_d_sigma\":{:.4f}}}\n",
          s, mc, bmc, conc, 0.3 - 0.1 * s / 20000.0, 0.1 + 0.02 * n01(rng), 0.3 - 0.1 * s / 20000.0);
    }
  }
  f << "{\"step\":20000,\"event\":\"end\"}\n";
  std::ofstream(dir / "recipe.toml") << fmt::format(
      "[run]\nname = \"{}\"\nseed = 1\n\n[model]\nn_layer = 12\n\n[loss.dispersion]\nlambda = {}\n",
      dir.filename().string(), lambda);
}

TEST(Report, TwentyThousandStepsThreeRunsUnderTwoMegabytes) {
  TempDir tmp("big");
  std::vector<std::string> dirs;
  for (double lambda : {0.0, 0.1, 0.5}) {
    fs::path d = tmp.path / fmt::format("lambda{}", lambda);
    write_big_run(d, lambda, unsigned(lambda * 100) + 1);
    dirs.push_back(d.string());
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<RunData> runs;
  for (const auto& d : dirs) runs.push_back(load_run_data(d));
  const auto t1 = std::chrono::steady_clock::now();
  const std::size_t bytes = write_report(runs, (tmp.path / "report.html").string());
  const auto t2 = std::chrono::steady_clock::now();
  auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  std::printf("[ report ] 3 runs x 20,000 steps: read %.0f ms, render+write %.0f ms, %.0f KB\n", ms(t0, t1),
              ms(t1, t2), bytes / 1024.0);
  EXPECT_LT(bytes, 2u * 1024 * 1024);
  EXPECT_EQ(runs[0].metrics.scalars.at("loss").size(), 20001u);
  // Every polyline was thinned to at most max_points points.
  const std::string html = read_text(tmp.path / "report.html");
  std::size_t lines = 0;
  for (auto p = html.find("points=\""); p != std::string::npos; p = html.find("points=\"", p + 1)) {
    auto e = html.find('"', p + 8);
    EXPECT_LE(std::count(html.begin() + long(p), html.begin() + long(e), ' ') + 1, 1000);
    ++lines;
  }
  EXPECT_GT(lines, 30u);
}

// ---- CLI ---------------------------------------------------------------------------------------------------------

TEST(ReportCli, WritesThePageAndPrintsItsPath) {
  TempDir tmp("cli");
  const fs::path out = tmp.path / "sub" / "r.html";
  auto r = run_command(fmt::format("'{}' report '{}' '{}' --out '{}' 2>&1", SPREAD_BINARY, kRunA, kRunB,
                                   out.string()));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(fs::exists(out));
  EXPECT_NE(r.out.find(out.string()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lm_lambda0.1: 13 metrics lines, 6 malformed lines skipped"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("22 charts"), std::string::npos) << r.out;

  // One run and no --out: the page goes into the run directory.
  fs::copy(kRunA, tmp.path / "one_run");
  auto one = run_command(fmt::format("'{}' report '{}' 2>&1", SPREAD_BINARY, (tmp.path / "one_run").string()));
  ASSERT_EQ(one.rc, 0) << one.out;
  EXPECT_TRUE(fs::exists(tmp.path / "one_run" / "report.html")) << one.out;

  auto bad = run_command(fmt::format("'{}' report '{}' 2>&1", SPREAD_BINARY, kFixtures + "/no_such_run"));
  EXPECT_EQ(bad.rc, 2) << bad.out;
}

// ---- browser -----------------------------------------------------------------------------------------------------

// Headless Chromium with everything that would reach the network or a profile turned off.
std::string chromium(const fs::path& profile, const std::string& args) {
  return fmt::format(
      "timeout 120 /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
      "--disable-background-networking --disable-component-update --disable-sync --user-data-dir='{}' {}",
      profile.string(), args);
}

struct BrowserRun {
  std::string dom, log;  // --dump-dom output (the DOM after parsing), and Chromium's stderr with console messages
};

// One Chromium launch: screenshot, DOM dump and console log together.
BrowserRun render_page(const fs::path& dir, const fs::path& page, const fs::path& png) {
  const fs::path dom = dir / "dom.html", log = dir / "chromium.log";
  run_command(chromium(dir / "profile", fmt::format("--enable-logging=stderr --v=0 --screenshot='{}' "
                                                    "--window-size=1400,3000 --dump-dom 'file://{}' >'{}' 2>'{}'",
                                                    png.string(), page.string(), dom.string(), log.string())));
  return {read_text(dom), read_text(log)};
}

TEST(ReportBrowser, ChromiumRendersEveryChartWithoutScriptErrors) {
  if (!fs::exists("/usr/bin/chromium")) {
    GTEST_SKIP() << "chromium not installed (apt-get install chromium) \u2014 browser check skipped";
  }
  TempDir tmp("browser");
  const fs::path page = tmp.path / "report.html", png = tmp.path / "report.png";
  write_report(fixture_runs(), page.string());

  BrowserRun run = render_page(tmp.path, page, png);
  ASSERT_TRUE(fs::exists(png)) << run.log;
  const std::string bytes = read_text(png);
  ASSERT_GT(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
  auto be32 = [&](std::size_t at) {
    return (unsigned(uint8_t(bytes[at])) << 24) | (unsigned(uint8_t(bytes[at + 1])) << 16) |
           (unsigned(uint8_t(bytes[at + 2])) << 8) | unsigned(uint8_t(bytes[at + 3]));
  };
  EXPECT_EQ(be32(16), 1400u);  // IHDR width
  EXPECT_GT(bytes.size(), 60'000u) << "a blank 1400x3000 page compresses to a few KB; charts do not";
  EXPECT_EQ(run.log.find("Uncaught"), std::string::npos) << run.log;
  // The browser's DOM, not our text: every chart survived parsing, and so did every curve and heatmap image.
  EXPECT_EQ(count_substr(run.dom, "<svg class=\"chart\""), 22u);
  EXPECT_EQ(count_substr(run.dom, "<polyline"), count_substr(read_text(page), "<polyline"));
  EXPECT_EQ(count_substr(run.dom, "<image "), 2u);

  // The error check can fail: a page with a script error is caught by the same command.
  const fs::path broken = tmp.path / "broken.html";
  std::ofstream(broken) << "<!DOCTYPE html><html><body><script>undefined_function();</script></body></html>\n";
  fs::remove_all(tmp.path / "profile");
  BrowserRun bad = render_page(tmp.path, broken, tmp.path / "broken.png");
  EXPECT_NE(bad.log.find("Uncaught"), std::string::npos) << bad.log;
}
