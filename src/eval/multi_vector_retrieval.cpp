// Multi-vector retrieval over a BEIR corpus at several pool factors (eval/multi_vector_retrieval.h).
#include "spread/eval/multi_vector_retrieval.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>

#include "spread/losses/maxsim.h"
#include "spread/model/eval_mode.h"

namespace spread {
namespace {

constexpr int64_t kDocumentSlice = 256;  // documents scored per MaxSim call in evaluation
constexpr int64_t kQuerySlice = 64;

// Documents [first, first + count) of `docs` as one padded float32 batch with its mask.
std::pair<torch::Tensor, torch::Tensor> pack(const std::vector<const RowMatrixXd*>& docs, int64_t first, int64_t count,
                                             int64_t dim) {
  int64_t longest = 1;
  for (int64_t i = first; i < first + count; ++i) longest = std::max<int64_t>(longest, docs[size_t(i)]->rows());
  auto vectors = torch::zeros({count, longest, dim}, torch::kFloat);
  auto mask = torch::zeros({count, longest}, torch::kBool);
  for (int64_t i = 0; i < count; ++i) {
    const RowMatrixXd& d = *docs[size_t(first + i)];
    if (d.rows() == 0) continue;
    Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
        vectors[i].data_ptr<float>(), d.rows(), dim) = d.cast<float>();
    mask[i].narrow(0, 0, d.rows()).fill_(true);
  }
  return {vectors, mask};
}

std::vector<RowMatrixXd> pool_all(const std::vector<RowMatrixXd>& docs, double factor, const WardPoolOptions& ward) {
  std::vector<WardPooled> pooled = ward_pool_many(docs, WardBudget::pool_factor(factor), ward, at::get_num_threads());
  std::vector<RowMatrixXd> out;
  out.reserve(pooled.size());
  for (auto& p : pooled) out.push_back(std::move(p.vectors));
  return out;
}

RetrievalMetrics rank_corpus(const torch::Tensor& queries, const torch::Tensor& query_mask,
                             const std::vector<RowMatrixXd>& docs, const BeirData& data) {
  const auto n_docs = int64_t(docs.size()), n_queries = queries.size(0), dim = queries.size(2);
  std::vector<const RowMatrixXd*> ptrs;
  for (const auto& d : docs) ptrs.push_back(&d);
  auto scores = torch::empty({n_queries, n_docs}, torch::kFloat);
  for (int64_t first = 0; first < n_docs; first += kDocumentSlice) {
    const int64_t count = std::min(kDocumentSlice, n_docs - first);
    auto [vectors, mask] = pack(ptrs, first, count, dim);
    for (int64_t q = 0; q < n_queries; q += kQuerySlice) {
      const int64_t nq = std::min(kQuerySlice, n_queries - q);
      scores.narrow(0, q, nq).narrow(1, first, count)
          .copy_(maxsim_scores(queries.narrow(0, q, nq), query_mask.narrow(0, q, nq), vectors, mask));
    }
  }
  RetrievalAccumulator acc;
  for (int64_t q = 0; q < n_queries; ++q) {
    auto row = scores[q].contiguous();
    std::vector<std::string> ranked_ids;
    for (int64_t i : rank_documents(row.data_ptr<float>(), n_docs, data.corpus_ids, 100))
      ranked_ids.push_back(data.corpus_ids[size_t(i)]);
    const std::string& query_id = data.query_ids[size_t(q)];
    acc.add(query_id, ranked_ids, data.qrels.at(query_id));
  }
  return acc.result();
}

}  // namespace

std::vector<PooledRetrieval> evaluate_multi_vector_retrieval(
    Transformer& model, const Tokenizer& tokenizer, const BeirData& data, const MultiVectorSpec& spec,
    const std::vector<double>& pool_factors, const WardPoolOptions& ward,
    const std::function<void(int64_t, int64_t)>& progress) {
  const auto n_corpus = int64_t(data.corpus_texts.size());
  auto corpus_progress = [&](int64_t done, int64_t) { if (progress) progress(done, n_corpus); };
  const std::vector<RowMatrixXd> docs = encode_documents(model, tokenizer, data.corpus_texts, spec, corpus_progress);
  torch::NoGradGuard no_grad;
  auto [queries, query_mask] = [&] {
    EvalModeGuard eval_mode(model);
    return encode_queries(model, tokenizer, data.query_texts, spec);
  }();
  std::vector<PooledRetrieval> results;
  for (double factor : pool_factors) {
    const std::vector<RowMatrixXd> pooled = factor == 1 ? std::vector<RowMatrixXd>{} : pool_all(docs, factor, ward);
    const std::vector<RowMatrixXd>& scored = factor == 1 ? docs : pooled;
    double vectors = 0;
    for (const auto& d : scored) vectors += double(d.rows());
    results.push_back({factor, rank_corpus(queries, query_mask, scored, data), vectors / double(std::max<size_t>(1, scored.size()))});
  }
  return results;
}

}  // namespace spread
