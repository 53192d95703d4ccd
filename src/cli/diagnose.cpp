// spread diagnose: per layer SOCM (mean; quantiles of socm, d_mu, d_sigma), mean cosine and concentration of token
// representations, from a run's hidden states on texts or from token lists given as .npy files.
//   spread diagnose --run RUN_DIR --texts FILE|wordnet [--layers all|last|final|0,-1,final] [--pairs all|N]
//                   [--out report.json]
//   spread diagnose --token-lists DIR [--pairs all|N] [--out report.json]
#include <cxxopts.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "commands.h"
#include "options.h"
#include "spread/data/npy.h"
#include "spread/data/text_check.h"
#include "spread/data/tokenizer.h"
#include "spread/data/wordnet.h"
#include "spread/diagnostics/report.h"
#include "spread/interchange/loaded_run.h"
#include "spread/util/error.h"
#include "spread/util/file.h"

namespace spread::cli {
namespace {

int64_t parse_pairs(const std::string& s) {
  if (s == "all") return 0;
  size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || n <= 0)
    throw user_error("", 0, "--pairs", "expected 'all' or a positive number of pairs, got '" + s + "'");
  return n;
}

// One text per non-blank line (first max_texts; 0 = all), or the wordnet glosses. A line that is not UTF-8 is named
// here, by file and line: the tokenizer that would refuse it later knows only the text.
std::vector<std::string> read_texts(const std::string& spec, size_t max_texts, uint64_t seed) {
  if (spec == "wordnet") return load_wordnet_texts(max_texts, seed);
  std::ifstream in = open_input_file(spec, std::ios::in);
  if (!in) throw user_error(spec, 0, "--texts", "cannot open the texts file", "one text per line, or --texts wordnet");
  std::vector<std::string> texts;
  int line_no = 0;
  for (std::string line; std::getline(in, line) && (max_texts == 0 || texts.size() < max_texts);) {
    ++line_no;
    check_text_line(line, spec, line_no, "--texts");
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") != std::string::npos) texts.push_back(line);
  }
  return texts;
}

// "all" or a comma-separated list of "last" (the last block), "final" and layer indices (negative counts from the
// last block). States 0..n_layers-1 are the embeddings and the blocks' outputs; state n_layers is the final norm's
// output, the vectors whose mean is the pooled embedding (and what the LM head reads).
std::vector<int64_t> parse_layers(const std::string& spec, int64_t n_layers) {
  std::vector<int64_t> layers;
  if (spec == "all") {
    for (int64_t l = 0; l <= n_layers; ++l) layers.push_back(l);
    return layers;
  }
  if (spec == "last") return {n_layers - 1};
  std::stringstream items(spec);
  for (std::string item; std::getline(items, item, ',');) {
    size_t used = 0;
    int64_t l = 0;
    try {
      l = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (l < 0) l += n_layers;
    if (item == "final") {
      l = n_layers;
    } else if (item == "last") {
      l = n_layers - 1;
    } else if (item.empty() || used != item.size() || l < 0 || l >= n_layers) {
      throw user_error("", 0, "--layers", "'" + item + "' is not a layer of this model",
                       fmt::format("use all, last, final or indices 0..{} (0 = embeddings)", n_layers - 1));
    }
    if (std::find(layers.begin(), layers.end(), l) == layers.end()) layers.push_back(l);
  }
  return layers;
}

// One .npy per text, in file name order; all of one width.
std::vector<Eigen::MatrixXd> read_token_lists(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir))
    throw user_error(dir, 0, "--token-lists", "not a directory", "give a directory of .npy files, one per text");
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().extension() == ".npy") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  if (files.size() < 2)
    throw user_error(dir, 0, "--token-lists",
                     fmt::format("{} .npy file(s), SOCM needs at least two texts", files.size()),
                     "one n x d array per text");
  std::vector<Eigen::MatrixXd> lists;
  for (const auto& f : files) {
    lists.push_back(read_npy_matrix(f));
    const auto& x = lists.back();
    if (x.rows() == 0) throw user_error(f, 0, "", "the token list has no tokens (shape (0, d))");
    if (!x.allFinite())
      throw user_error(f, 0, "", "the token list holds NaN or Inf values",
                       "SOCM of non-finite vectors means nothing: fix or leave out this file");
    if (x.cols() != lists.front().cols())
      throw user_error(f, 0, "",
                       fmt::format("width {} differs from {} in {}", x.cols(), lists.front().cols(), files[0]),
                       "all texts must come from the same layer of the same model");
  }
  return lists;
}

DiagnoseReport diagnose_token_lists(const std::string& dir, const SocmOptions& opt) {
  DiagnoseReport report;
  report.source_kind = "token_lists";
  report.source = dir;
  report.options = opt;
  report.layers.push_back(diagnose_layer(-1, read_token_lists(dir), opt));
  return report;
}

DiagnoseReport diagnose_run(const std::string& dir, const std::string& texts_spec, const std::string& layers_spec,
                            size_t max_texts, const SocmOptions& opt) {
  LoadedRun run = load_run(dir);
  const auto texts = read_texts(texts_spec, max_texts, opt.seed);
  // Hidden states of the chosen layers, kept in the model's dtype until their layer is diagnosed.
  std::vector<int64_t> layers;
  int64_t final_state = -1;  // index of the final norm's output among a text's states
  std::vector<std::vector<torch::Tensor>> states;  // [chosen layer][text]
  size_t skipped = 0;
  for (const auto& text : texts) {
    auto hidden = text_hidden_states(run, text);
    if (hidden.empty()) {
      ++skipped;
      continue;
    }
    if (layers.empty()) {
      final_state = int64_t(hidden.size()) - 1;
      layers = parse_layers(layers_spec, final_state);
      states.resize(layers.size());
    }
    for (size_t k = 0; k < layers.size(); ++k) states[k].push_back(hidden[size_t(layers[k])]);
  }
  if (skipped) fmt::print(stderr, "note: {} text(s) gave no tokens and were skipped\n", skipped);
  if (states.empty() || states[0].size() < 2)
    throw user_error(texts_spec, 0, "--texts", "fewer than two texts with tokens", "give at least two non-empty texts");

  DiagnoseReport report;
  report.source_kind = run.model_folder ? "model" : "run";
  report.source = dir;
  report.texts = texts_spec;
  report.step = run.step;
  report.options = opt;
  for (size_t k = 0; k < layers.size(); ++k) {
    std::vector<Eigen::MatrixXd> lists;
    for (const auto& h : states[k]) lists.push_back(token_list_from_tensor(h));
    states[k].clear();
    report.layers.push_back(diagnose_layer(layers[k], lists, opt));
    report.layers.back().after_final_norm = layers[k] == final_state;
  }
  return report;
}

}  // namespace

int cmd_diagnose(int argc, char** argv) {
  cxxopts::Options options("spread diagnose",
                           "SOCM (second-order collapse by mean pooling), mean cosine and concentration per layer.\n"
                           "  spread diagnose --run RUN_DIR --texts FILE|wordnet [--layers all] [--pairs all|N]\n"
                           "  spread diagnose --token-lists DIR   (one n x d float32/float64 .npy file per text)\n" +
                               std::string(kOutputRule));
  options.add_options()
      ("run", "run directory (its newest checkpoint)", cxxopts::value<std::string>(), "RUN_DIR")
      ("model", kModelOptionHelp, cxxopts::value<std::string>(), "DIR")
      ("texts", "texts file, one text per line, or 'wordnet'", cxxopts::value<std::string>(), "FILE")
      ("token-lists", "directory of .npy token lists instead of a run", cxxopts::value<std::string>(), "DIR")
      ("layers", "all, last (block), final (after the final norm: what pooling reads), or indices such as 0,3,-1 "
                 "(0 = embeddings)",
       cxxopts::value<std::string>()->default_value("all"))
      ("pairs", "all, or N for a seeded sample of N distinct pairs",
       cxxopts::value<std::string>()->default_value("all"))
      ("max-texts", "use the first N texts (0 = all)", cxxopts::value<int64_t>()->default_value("1000"))
      ("seed", "seed of the pair sample and of the wordnet shuffle", cxxopts::value<int64_t>()->default_value("0"))
      ("paper-compatible", "add 1e-9 I as the reference code does (lowers d_sigma; for published tables)")
      ("threads", "threads over pairs (0 = all cores)", cxxopts::value<int64_t>()->default_value("0"))
      ("out", "also write the report as JSON", cxxopts::value<std::string>(), "FILE")
      ("h,help", "show this help");
  auto args = parse_arguments(options, argc, argv);
  if (printed_help(options, args)) return 0;
  const bool from_run = has_model_source(args), from_lists = args.count("token-lists") > 0;
  if (from_run == from_lists)
    throw UserError("give either --run RUN_DIR (or --model DIR) --texts FILE or --token-lists DIR (see `spread diagnose --help`)");
  if (from_run && !args.count("texts"))
    throw UserError("--run needs --texts FILE (one text per line) or --texts wordnet");
  if (from_lists && (args.count("texts") || args.count("layers")))
    throw UserError("--texts and --layers apply to --run; token lists are one layer already");

  SocmOptions opt;
  opt.max_pairs = parse_pairs(args["pairs"].as<std::string>());
  opt.seed = uint64_t(int_option(args, "seed", 0, INT64_MAX));
  opt.paper_compatible = args.count("paper-compatible") > 0;
  opt.threads = int(int_option(args, "threads", 0, 4096));
  const auto max_texts = size_t(int_option(args, "max-texts", 0, INT64_MAX));
  if (args.count("out")) prepare_output_file(args["out"].as<std::string>(), "--out");
  DiagnoseReport report = from_run ? diagnose_run(model_source(args), args["texts"].as<std::string>(),
                                                  args["layers"].as<std::string>(), max_texts, opt)
                                   : diagnose_token_lists(args["token-lists"].as<std::string>(), opt);
  fmt::print("{}", format_report(report));
  if (args.count("out")) {
    write_report_json(report, args["out"].as<std::string>());
    fmt::print("wrote {}\n", args["out"].as<std::string>());
  }
  return 0;
}

}  // namespace spread::cli
