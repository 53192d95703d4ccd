// Encode throughput of spread's Hugging Face tokenizer, timed in-process (loading and reading are not timed):
//   bench_tokenize --tokenizer PATH --in LINES.txt [--threads 1] [--rounds 1]
// Each round encodes every line with encode_batch (post-processor on, as the reference's encode_batch) on
// --threads threads and prints one JSON line {"round", "threads", "lines", "tokens", "seconds", "tokens_per_s"}
// (tokens: attention-mask ones, i.e. without padding); a last line gives the resident memory before and after
// loading the tokenizer, {"rss_start_mib", "rss_loaded_mib"} (the lines are read after it). Used by
// bench/bench_tokenize.sh, which alternates it with the reference library.
#include <fmt/format.h>

#include <chrono>
#include <cxxopts.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "spread/data/hf/tokenizer.h"
#include "spread/runtime/blas.h"
#include "spread/util/error.h"
#include "spread/util/file.h"

namespace {

// VmRSS of this process in MiB (from /proc/self/status).
double rss_mib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return -1;
}

std::vector<std::string> read_lines(const std::string& path) {
  const auto bytes = spread::read_whole_file(path);
  if (!bytes) throw spread::user_error(path, 0, "--in", "cannot read the file");
  std::vector<std::string> lines;
  for (size_t begin = 0; begin < bytes->size();) {
    size_t end = bytes->find('\n', begin);
    if (end == std::string::npos) end = bytes->size();
    lines.emplace_back(*bytes, begin, end - begin);
    begin = end + 1;
  }
  return lines;
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options options("bench_tokenize", "Encode throughput of a Hugging Face tokenizer (tokens/s).");
  options.add_options()
      ("tokenizer", "tokenizer.json, vocab.txt, vocab.json or a folder", cxxopts::value<std::string>())
      ("in", "lines to encode", cxxopts::value<std::string>())
      ("threads", "encode_batch threads", cxxopts::value<int>()->default_value("1"))
      ("rounds", "timed passes over the lines", cxxopts::value<int>()->default_value("1"))
      ("h,help", "show this help");
  try {
    auto args = options.parse(argc, argv);
    if (args.count("help") || !args.count("tokenizer") || !args.count("in")) {
      fmt::print("{}\n", options.help());
      return args.count("help") ? 0 : 2;
    }
    const int threads = args["threads"].as<int>();
    spread::apply_threads(threads);
    const double rss_start = rss_mib();
    const auto tokenizer = spread::hf::Tokenizer::load(args["tokenizer"].as<std::string>());
    const double rss_loaded = rss_mib();
    const auto lines = read_lines(args["in"].as<std::string>());
    for (int round = 1; round <= args["rounds"].as<int>(); ++round) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto encodings = tokenizer->encode_batch(lines, /*add_special_tokens=*/true, threads);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      int64_t tokens = 0;
      for (const auto& e : encodings)
        for (uint8_t m : e.attention_mask) tokens += m;
      fmt::print("{{\"round\": {}, \"threads\": {}, \"lines\": {}, \"tokens\": {}, \"seconds\": {:.4f}, "
                 "\"tokens_per_s\": {:.0f}}}\n", round, threads, lines.size(), tokens, s, double(tokens) / s);
    }
    fmt::print("{{\"rss_start_mib\": {:.1f}, \"rss_loaded_mib\": {:.1f}}}\n", rss_start, rss_loaded);
    return 0;
  } catch (const spread::UserError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  }
}
