// Benchmark of a pooling-aware MaxSim training step against a plain one (target: at most 1.35x, so that pooling-aware training stays affordable). Both
// run maxsim_step (tasks/maxsim.h: encode queries and documents once, MaxSim loss, backward) on the same model and
// batch; the pooling-aware one adds Ward pooling of the detached document vectors, the straight-through pooled
// rows and the second MaxSim loss. The optimizer update, the same in both, is left out, so the ratio is an upper
// bound of the whole step's. Timed in alternating pairs (tools/alternate.h); prints the median ratio.
//   bench_maxsim_step [--queries 16] [--negatives 0] [--query-length 32] [--document-length 180] [--layers 4]
//                     [--width 256] [--head-dim 128] [--pool-factor 4] [--threads 0] [--pairs 12]
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cxxopts.hpp>

#include "alternate.h"
#include "spread/runtime/allocator.h"
#include "spread/runtime/blas.h"
#include "spread/tasks/maxsim.h"

namespace {

struct Shape {
  int64_t queries, negatives, query_length, document_length, layers, width, head_dim;
};

// Random token sequences: queries of ~half the query length (expanded with [MASK]), documents of 60-100% of theirs.
spread::MaxSimBatch random_batch(const Shape& s, const spread::SpecialIds& special, int64_t vocab) {
  std::vector<std::vector<int32_t>> q, d;
  auto seq = [&](int64_t length, int32_t marker) {
    std::vector<int32_t> ids{special.cls, marker};
    for (int64_t t = 2; t + 1 < length; ++t) ids.push_back(int32_t(torch::randint(vocab, {1}).item<int64_t>()));
    ids.push_back(special.sep);
    return ids;
  };
  for (int64_t i = 0; i < s.queries; ++i) {
    q.push_back(seq(s.query_length / 2, special.query));
    for (int64_t k = 0; k <= s.negatives; ++k)
      d.push_back(seq(s.document_length * (6 + torch::randint(5, {1}).item<int64_t>()) / 10, special.document));
  }
  std::vector<const std::vector<int32_t>*> qp, dp;
  for (auto& x : q) qp.push_back(&x);
  for (auto& x : d) dp.push_back(&x);
  spread::MultiVectorSpec spec;
  spec.query_length = s.query_length;
  spec.document_length = s.document_length;
  return {spread::query_batch(qp, special, spec), spread::document_batch(dp, special, spec)};
}

}  // namespace

int main(int argc, char** argv) {
  spread::select_blas_core(argv);
  spread::tune_allocator();
  cxxopts::Options options("bench_maxsim_step", "Pooling-aware vs plain MaxSim training step (forward + backward).");
  options.add_options()
      ("queries", "queries per batch", cxxopts::value<int64_t>()->default_value("16"))
      ("negatives", "hard negatives per query", cxxopts::value<int64_t>()->default_value("0"))
      ("query-length", "query tokens", cxxopts::value<int64_t>()->default_value("32"))
      ("document-length", "longest document", cxxopts::value<int64_t>()->default_value("180"))
      ("layers", "encoder layers", cxxopts::value<int64_t>()->default_value("4"))
      ("width", "encoder width", cxxopts::value<int64_t>()->default_value("256"))
      ("head-dim", "token vector width", cxxopts::value<int64_t>()->default_value("128"))
      ("pool-factor", "Ward pool factor", cxxopts::value<double>()->default_value("4"))
      ("threads", "LibTorch threads (0 = its default)", cxxopts::value<int>()->default_value("0"))
      ("pairs", "timed pairs", cxxopts::value<int64_t>()->default_value("12"))
      ("h,help", "show this help");
  auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  if (args["threads"].as<int>() > 0) at::set_num_threads(args["threads"].as<int>());
  const Shape s{args["queries"].as<int64_t>(), args["negatives"].as<int64_t>(), args["query-length"].as<int64_t>(),
                args["document-length"].as<int64_t>(), args["layers"].as<int64_t>(), args["width"].as<int64_t>(),
                args["head-dim"].as<int64_t>()};
  torch::manual_seed(0);
  const int64_t base_vocab = 4096;
  spread::SpecialIds special{int32_t(base_vocab), int32_t(base_vocab + 1), int32_t(base_vocab + 2),
                             int32_t(base_vocab + 3)};
  special.query = int32_t(base_vocab + 4);
  special.document = int32_t(base_vocab + 5);
  spread::TransformerConfig cfg;
  cfg.vocab_size = base_vocab + 6;
  cfg.n_layer = s.layers;
  cfg.n_head = 4;
  cfg.n_embd = s.width;
  cfg.block_size = std::max(s.query_length, s.document_length);
  cfg.causal = false;
  cfg.dropout = 0.1;
  cfg.head_dim = s.head_dim;
  spread::Transformer model(cfg);
  const spread::MaxSimBatch batch = random_batch(s, special, base_vocab);
  spread::MaxSimStepOptions plain, aware;
  aware.pooling_aware = true;
  aware.pool_factor = args["pool-factor"].as<double>();
  auto timed = [&](const spread::MaxSimStepOptions& opt) {
    return [&model, &batch, opt] {
      model->zero_grad();
      const auto t0 = std::chrono::steady_clock::now();
      spread::maxsim_step(model, batch, opt);
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    };
  };
  timed(plain)(), timed(aware)();  // warm-up
  std::printf("%lld queries x %lld documents each (%lld query / up to %lld document tokens), %lld layers, width %lld, "
              "head %lld, pool factor %g, %d thread(s)\n", (long long)s.queries, (long long)(1 + s.negatives),
              (long long)s.query_length, (long long)s.document_length, (long long)s.layers, (long long)s.width,
              (long long)s.head_dim, aware.pool_factor, at::get_num_threads());
  auto t = spread::bench::alternate_pairs(args["pairs"].as<int64_t>(), timed(plain), timed(aware),
                                          [](int64_t i, double a, double b) {
                                            std::printf("pair %2lld: plain %.1f ms, pooling-aware %.1f ms (x%.3f)\n",
                                                        (long long)i + 1, a, b, b / a);
                                          });
  std::printf("median: plain %.1f ms, pooling-aware %.1f ms; median ratio x%.3f (target <= 1.35)\n", t.median_a(),
              t.median_b(), t.median_ratio());
  std::printf("RESULT ratio=%.4f plain_ms=%.2f aware_ms=%.2f\n", t.median_ratio(), t.median_a(), t.median_b());
  return 0;
}
