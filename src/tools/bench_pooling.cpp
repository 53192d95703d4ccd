// Benchmark of Ward token pooling (docs/design.md §6.3; bench/bench_pooling.sh runs the target case): --docs documents
// of --tokens token vectors of width --dim, shaped like encoder output (a few directions per document plus noise,
// unit rows, float32 values), pooled with --pool-factor on --threads threads, one protected token each. Times the
// library call on float64 documents (ward_pool_many) and the padded-batch call a loss makes on a float32
// [docs, tokens, dim] tensor (ward_pool_batch), --repeats times each after one warm-up; prints the median and
// best wall time, the process CPU time per call, and the load average, since a busy machine inflates wall time.
// --save DIR also writes the documents (DIR/docs.npy, float32 [docs x tokens, dim]) and ward_pool_many's labels
// (DIR/labels.npy, int64 [docs x tokens], -1 = protected), for bench/bench_pooling_peer.py to pool the same vectors.
//   bench_pooling [--docs 64] [--tokens 180] [--dim 128] [--pool-factor 4] [--threads 1] [--repeats 30] [--seed 0]
//                 [--save DIR]
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <ctime>
#include <cxxopts.hpp>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "spread/data/npy.h"
#include "spread/pooling/ward.h"
#include "spread/pooling/ward_batch.h"
#include "spread/runtime/allocator.h"
#include "spread/runtime/blas.h"

namespace {

double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  in >> one;
  return one.empty() ? "n/a" : one;
}

std::vector<spread::RowMatrixXd> random_documents(int64_t docs, int64_t tokens, int64_t dim, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<spread::RowMatrixXd> out;
  for (int64_t b = 0; b < docs; ++b) {
    spread::RowMatrixXd topics(tokens / 12 + 1, dim);
    for (int64_t i = 0; i < topics.size(); ++i) topics.data()[i] = normal(rng);
    spread::RowMatrixXd x(tokens, dim);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t j = 0; j < dim; ++j) x(t, j) = topics(t % topics.rows(), j) + 0.7 * normal(rng);
    x.rowwise().normalize();
    out.push_back(x.cast<float>().cast<double>());
  }
  return out;
}

struct Timing {
  std::vector<double> wall_ms;
  double cpu_ms_per_call = 0;
  double median() const {
    std::vector<double> w = wall_ms;
    std::nth_element(w.begin(), w.begin() + long(w.size() / 2), w.end());
    return w[w.size() / 2];
  }
  double best() const { return *std::min_element(wall_ms.begin(), wall_ms.end()); }
};

template <class F>
Timing time_calls(int64_t repeats, F call) {
  call();  // warm-up: allocator, page faults, thread start
  Timing t;
  const double cpu0 = cpu_ms();
  for (int64_t r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    t.wall_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  t.cpu_ms_per_call = (cpu_ms() - cpu0) / double(repeats);
  return t;
}

// The documents and the labels of the timed calls' pooling, for the peers.
void save_documents_and_labels(const std::string& dir, const std::vector<spread::RowMatrixXd>& documents,
                               const std::vector<spread::WardPooled>& pooled) {
  std::filesystem::create_directories(dir);
  const int64_t tokens = documents.front().rows(), dim = documents.front().cols();
  std::vector<float> values;
  std::vector<int64_t> labels;
  for (const auto& d : documents)
    for (int64_t i = 0; i < d.size(); ++i) values.push_back(float(d.data()[i]));
  for (const auto& p : pooled) labels.insert(labels.end(), p.labels.begin(), p.labels.end());
  spread::write_npy_float32(dir + "/docs.npy", values.data(), int64_t(documents.size()) * tokens, dim);
  spread::write_npy_int64_vector(dir + "/labels.npy", labels);
}

}  // namespace

int main(int argc, char** argv) {
  spread::select_blas_core(argv);  // the kernels `spread` runs
  spread::tune_allocator();  // as the spread executable runs
  cxxopts::Options options("bench_pooling", "Ward token pooling of random documents: wall and CPU time per call.");
  options.add_options()
      ("docs", "documents", cxxopts::value<int64_t>()->default_value("64"))
      ("tokens", "tokens per document (the first is protected)", cxxopts::value<int64_t>()->default_value("180"))
      ("dim", "token width", cxxopts::value<int64_t>()->default_value("128"))
      ("pool-factor", "pool factor", cxxopts::value<double>()->default_value("4"))
      ("threads", "threads over documents", cxxopts::value<int>()->default_value("1"))
      ("repeats", "timed calls of each variant", cxxopts::value<int64_t>()->default_value("30"))
      ("seed", "seed of the random documents", cxxopts::value<uint64_t>()->default_value("0"))
      ("save", "write docs.npy and labels.npy into this folder", cxxopts::value<std::string>())
      ("h,help", "show this help");
  auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  const int64_t docs = args["docs"].as<int64_t>(), tokens = args["tokens"].as<int64_t>(),
                dim = args["dim"].as<int64_t>(), repeats = args["repeats"].as<int64_t>();
  const int threads = args["threads"].as<int>();
  const auto budget = spread::WardBudget::pool_factor(args["pool-factor"].as<double>());
  at::set_num_threads(threads);  // before any LibTorch operation, so no idle OpenMP thread spins beside the timing
  const auto documents = random_documents(docs, tokens, dim, args["seed"].as<uint64_t>());
  torch::Tensor batch = torch::empty({docs, tokens, dim}, torch::kFloat32);
  for (int64_t b = 0; b < docs; ++b)
    batch[b].copy_(torch::from_blob(const_cast<double*>(documents[size_t(b)].data()), {tokens, dim}, torch::kFloat64));
  const torch::Tensor mask = torch::ones({docs, tokens}, torch::kBool);

  const std::string load_before = load_average();
  std::vector<spread::WardPooled> pooled;
  const Timing library = time_calls(repeats, [&] { pooled = spread::ward_pool_many(documents, budget, {}, threads); });
  int64_t vectors = 0;
  for (const auto& p : pooled) vectors += p.vectors.rows();
  const Timing batched = time_calls(repeats, [&] { spread::ward_pool_batch(batch, mask, budget); });
  std::printf("%lld documents x %lld tokens x d %lld, pool factor %g, %d thread(s): %.1f vectors per document\n",
              (long long)docs, (long long)tokens, (long long)dim, budget.value, threads,
              double(vectors) / double(docs));
  std::printf("ward_pool_many (float64 documents): median %.2f ms, best %.2f ms, CPU %.2f ms per call\n",
              library.median(), library.best(), library.cpu_ms_per_call);
  std::printf("ward_pool_batch (float32 [B, n, d]): median %.2f ms, best %.2f ms, CPU %.2f ms per call\n",
              batched.median(), batched.best(), batched.cpu_ms_per_call);
  std::printf("load average (1 min) %s before, %s after\n", load_before.c_str(), load_average().c_str());
  if (args.count("save")) save_documents_and_labels(args["save"].as<std::string>(), documents, pooled);
  std::printf("RESULT median_ms=%.3f best_ms=%.3f cpu_ms=%.3f batch_median_ms=%.3f batch_cpu_ms=%.3f\n",
              library.median(), library.best(), library.cpu_ms_per_call, batched.median(), batched.cpu_ms_per_call);
  return 0;
}
