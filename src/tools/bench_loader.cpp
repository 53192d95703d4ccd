// The LM loader's own time: batches of --batch windows of --block tokens drawn by WindowSampler (data/loader.h)
// from token files, as a training step draws them, --batches times after a warm-up; prints the median time per
// batch. Each FILE:WEIGHT argument is one set of a mixture (a bare FILE weighs 1; one argument = a plain stream).
// The tokens are memory-mapped: the first pass over cold pages reads them from disk, and the median leaves it out.
//   bench_loader FILE[:WEIGHT] [FILE[:WEIGHT] ...] [--batch 16] [--block 128] [--batches 2000]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cxxopts.hpp>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "spread/data/loader.h"
#include "spread/util/error.h"

namespace {

struct Source {
  std::unique_ptr<spread::TokenFile> tokens;
  double weight = 1.0;
};

Source open_source(const std::string& arg) {
  const auto colon = arg.rfind(':');
  if (colon == std::string::npos) return {std::make_unique<spread::TokenFile>(arg), 1.0};
  return {std::make_unique<spread::TokenFile>(arg.substr(0, colon)), std::stod(arg.substr(colon + 1))};
}

int run(int argc, char** argv) {
  cxxopts::Options options("bench_loader", "time of the LM loader's batches (WindowSampler) from token files");
  options.add_options()("files", "FILE[:WEIGHT] ...", cxxopts::value<std::vector<std::string>>())(
      "batch", "windows per batch", cxxopts::value<int64_t>()->default_value("16"))(
      "block", "tokens per window", cxxopts::value<int64_t>()->default_value("128"))(
      "batches", "timed batches", cxxopts::value<int64_t>()->default_value("2000"))("h,help", "help");
  options.parse_positional({"files"});
  const auto args = options.parse(argc, argv);
  if (args.count("help") || !args.count("files")) {
    std::cout << options.help() << "\n";
    return args.count("help") ? 0 : 2;
  }
  std::vector<Source> sources;
  std::vector<spread::WeightedTokens> weighted;
  for (const auto& f : args["files"].as<std::vector<std::string>>()) {
    sources.push_back(open_source(f));
    weighted.push_back({sources.back().tokens.get(), sources.back().weight});
  }
  const int64_t batch = args["batch"].as<int64_t>(), block = args["block"].as<int64_t>();
  const int64_t batches = std::max<int64_t>(1, args["batches"].as<int64_t>());
  const spread::WindowSampler sampler(weighted, block, 1337);
  for (int64_t i = 0; i < 100; ++i) sampler.sample(batch, uint64_t(i));
  std::vector<double> us;
  for (int64_t i = 0; i < batches; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto b = sampler.sample(batch, uint64_t(1000 + i));
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(us.begin(), us.begin() + int64_t(us.size() / 2), us.end());
  fmt::print("{{\"sets\": {}, \"batch\": {}, \"block\": {}, \"batches\": {}, \"median_us\": {:.2f}}}\n", sources.size(),
             batch, block, batches, us[us.size() / 2]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const spread::UserError& e) {
    std::cerr << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "bench_loader: " << e.what() << "\n";
    return 2;
  }
}
