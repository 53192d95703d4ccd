// Benchmark of SOCM over all pairs of a set of texts (bench/bench_socm.sh runs the two target sizes): random token
// lists of --min-tokens..--max-tokens tokens at width --dim, prepared one at a time (the raw list is dropped once its
// thin basis exists, as a caller streaming hidden states would), then every pair. Prints the time of each phase,
// pairs per second, how many pairs took the BDCSVD fallback, and the peak resident memory of the process. With --peak,
// also the rate of the cross products (2 r_i r_j d flops a pair, over the whole pair phase) against a plain
// 4096^3 sgemm and dgemm through the same BLAS, on the BLAS's threads (OPENBLAS_NUM_THREADS=2 for two cores).
//   bench_socm [--texts 1000] [--min-tokens 24] [--max-tokens 64] [--dim 256] [--threads 2] [--solver auto|svd]
//              [--pairs all|N] [--paper-compatible] [--seed 0] [--peak]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cxxopts.hpp>
#include <random>
#include <string>
#include <vector>

#include "spread/diagnostics/socm.h"
#include "spread/runtime/allocator.h"
#include "spread/runtime/blas.h"
#include "spread/runtime/gemm.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// Hidden-state-like lists: a direction shared by all texts, one per text, and token noise, so d_mu and d_sigma
// both take moderate values.
std::vector<spread::SocmText> random_texts(int64_t count, int64_t min_tokens, int64_t max_tokens, int64_t dim,
                                           uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::uniform_int_distribution<int64_t> tokens(min_tokens, max_tokens);
  Eigen::RowVectorXd shared(dim);
  for (auto& v : shared) v = normal(rng);
  std::vector<spread::SocmText> texts;
  texts.reserve(size_t(count));
  for (int64_t t = 0; t < count; ++t) {
    Eigen::RowVectorXd own(dim);
    for (auto& v : own) v = shared(&v - own.data()) + 0.6 * normal(rng);
    Eigen::MatrixXd x(tokens(rng), dim);
    for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = 0.8 * normal(rng);
    x.rowwise() += own;
    texts.push_back(spread::socm_prepare(x));
  }
  return texts;
}

// GFLOP/s of one 4096^3 product C = A^T B through the BLAS (best of 3), 0 without a BLAS.
template <class T>
double blas_peak_gflops() {
  const int64_t n = 4096;
  std::vector<T> a(size_t(n * n), T(0.5)), b(size_t(n * n), T(0.25)), c(size_t(n * n));
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    if (!spread::blas_gemm_tn(n, n, n, a.data(), n, b.data(), n, c.data(), n)) return 0;
    best = std::max(best, 2.0 * double(n) * double(n) * double(n) / seconds_since(t0) / 1e9);
  }
  return best;
}

// Flops of the cross products of the given pairs: 2 r_i r_j d each (r = thin basis width).
double cross_flops(const std::vector<spread::SocmText>& texts, int64_t max_pairs, uint64_t seed) {
  double flops = 0;
  for (const auto& [i, j] : spread::socm_pair_list(int64_t(texts.size()), max_pairs, seed))
    flops += 2.0 * double(texts[i].basis_t.cols()) * double(texts[j].basis_t.cols()) * double(texts[i].dim);
  return flops;
}

}  // namespace

int main(int argc, char** argv) {
  spread::select_blas_core(argv);  // the kernels `spread` runs
  spread::tune_allocator();  // as `spread train` and `spread diagnose` run
  cxxopts::Options options("bench_socm", "SOCM over all pairs of random token lists: time, pairs/s, peak RSS.");
  options.add_options()
      ("texts", "number of texts", cxxopts::value<int64_t>()->default_value("1000"))
      ("min-tokens", "fewest tokens per text", cxxopts::value<int64_t>()->default_value("24"))
      ("max-tokens", "most tokens per text", cxxopts::value<int64_t>()->default_value("64"))
      ("dim", "token width d", cxxopts::value<int64_t>()->default_value("256"))
      ("threads", "threads over pairs", cxxopts::value<int>()->default_value("2"))
      ("solver", "auto (Gram eigenvalues, BDCSVD fallback) or svd (BDCSVD always)",
       cxxopts::value<std::string>()->default_value("auto"))
      ("pairs", "all or a sampled number of pairs", cxxopts::value<std::string>()->default_value("all"))
      ("paper-compatible", "the reference code's eps I variant")
      ("seed", "seed of the random lists", cxxopts::value<uint64_t>()->default_value("0"))
      ("peak", "also time a plain sgemm and dgemm and the cross products' share of them")
      ("block-rows", "rows of first texts per cross-product GEMM (SocmOptions::block_rows)",
       cxxopts::value<int64_t>()->default_value(std::to_string(spread::SocmOptions{}.block_rows)))
      ("chunk-columns", "partner columns per cross-product GEMM (SocmOptions::chunk_columns)",
       cxxopts::value<int64_t>()->default_value(std::to_string(spread::SocmOptions{}.chunk_columns)))
      ("h,help", "show this help");
  auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  const int64_t dim = args["dim"].as<int64_t>();
  spread::SocmOptions opt;
  opt.threads = args["threads"].as<int>();
  opt.solver = args["solver"].as<std::string>() == "svd" ? spread::SocmSolver::kSvd : spread::SocmSolver::kAuto;
  opt.paper_compatible = args.count("paper-compatible") > 0;
  opt.block_rows = args["block-rows"].as<int64_t>();
  opt.chunk_columns = args["chunk-columns"].as<int64_t>();
  const std::string pairs = args["pairs"].as<std::string>();
  opt.max_pairs = pairs == "all" ? 0 : std::stoll(pairs);

  auto t0 = std::chrono::steady_clock::now();
  const auto texts = random_texts(args["texts"].as<int64_t>(), args["min-tokens"].as<int64_t>(),
                                  args["max-tokens"].as<int64_t>(), dim, args["seed"].as<uint64_t>());
  const double prepare_s = seconds_since(t0);
  auto t1 = std::chrono::steady_clock::now();
  const spread::SocmSummary s = spread::socm_summary(texts, opt);
  const double pairs_s = seconds_since(t1), total_s = seconds_since(t0);

  std::printf("texts %lld, tokens %lld..%lld, d %lld, threads %d, solver %s%s\n", (long long)s.texts,
              (long long)args["min-tokens"].as<int64_t>(), (long long)args["max-tokens"].as<int64_t>(), (long long)dim,
              opt.threads, args["solver"].as<std::string>().c_str(), opt.paper_compatible ? ", paper_compatible" : "");
  std::printf("prepare %.2f s, pairs %.2f s, total %.2f s for %lld pairs: %.0f pairs/s (%.0f with preparation)\n",
              prepare_s, pairs_s, total_s, (long long)s.pairs, double(s.pairs) / pairs_s, double(s.pairs) / total_s);
  std::printf("BDCSVD fallback on %lld pairs (%.2f%%); mean socm %.4f, d_mu %.4f, d_sigma %.4f\n",
              (long long)s.svd_pairs, 100.0 * double(s.svd_pairs) / double(std::max<int64_t>(s.pairs, 1)), s.socm,
              s.d_mu, s.d_sigma);
  const double rss_mib = peak_rss_mib();  // before the peak products' buffers
  std::printf("peak RSS %.0f MiB\n", rss_mib);
  if (args.count("peak")) {
    const double rate = cross_flops(texts, opt.max_pairs, opt.seed) / pairs_s / 1e9;
    const double sgemm = blas_peak_gflops<float>(), dgemm = blas_peak_gflops<double>();
    std::printf("cross products %.1f GFLOP/s over the pair phase; 4096^3 sgemm %.1f GFLOP/s (%.1f%%), dgemm %.1f "
                "GFLOP/s (%.1f%%)\n", rate, sgemm, 100 * rate / sgemm, dgemm, 100 * rate / dgemm);
  }
  std::printf("RESULT dim=%lld total_s=%.3f pairs_per_s=%.0f peak_rss_mib=%.0f\n", (long long)dim, total_s,
              double(s.pairs) / total_s, rss_mib);
  return 0;
}
