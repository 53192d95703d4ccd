#include "spread/eval/multi_vector.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <numeric>

#include "spread/data/special_tokens.h"
#include "spread/eval/forward_memory.h"
#include "spread/losses/maxsim.h"
#include "spread/util/error.h"

namespace spread {
namespace {

constexpr int64_t kDocumentSlice = 256;  // documents scored per MaxSim call in evaluation
constexpr int64_t kQuerySlice = 64;

void require_markers(const SpecialIds& s) {
  if (!s.has_markers())
    throw user_error("tokenizer.json", 0, "special_tokens", "this run's tokenizer has no [Q] / [D] ids (it was built "
                     "before spread reserved them)", "pretrain the backbone again with this version of spread");
}

// Right-pads seqs to `length` (0 = the longest) with `fill`; attend marks the real tokens.
TokenBatch pad_tokens(const std::vector<const std::vector<int32_t>*>& seqs, int64_t length, int32_t fill) {
  for (const auto* s : seqs) length = std::max<int64_t>(length, int64_t(s->size()));
  const auto B = int64_t(seqs.size());
  auto ids = torch::full({B, length}, int64_t(fill), torch::kLong);
  auto attend = torch::zeros({B, length}, torch::kBool);
  auto ids_a = ids.accessor<int64_t, 2>();
  auto attend_a = attend.accessor<bool, 2>();
  for (int64_t b = 0; b < B; ++b)
    for (size_t t = 0; t < seqs[size_t(b)]->size(); ++t) {
      ids_a[b][int64_t(t)] = (*seqs[size_t(b)])[t];
      attend_a[b][int64_t(t)] = true;
    }
  return {ids, attend, attend};
}

TokenBatch to_device(TokenBatch b, const torch::Device& device) {
  if (device.is_cpu()) return b;
  return {b.ids.to(device), b.attend.to(device), b.score.to(device)};
}

RowMatrixXd to_matrix(const torch::Tensor& rows) {
  auto x = rows.to(torch::kCPU, torch::kDouble).contiguous();
  return Eigen::Map<const RowMatrixXd>(x.data_ptr<double>(), x.size(0), x.size(1));
}

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

// Queries' vectors and scoring masks, in eval mode (the caller holds no_grad).
std::pair<torch::Tensor, torch::Tensor> encode_queries(Transformer& model, const Tokenizer& tokenizer,
                                                       const std::vector<std::string>& texts,
                                                       const MultiVectorSpec& spec) {
  std::vector<std::vector<int32_t>> seqs;
  for (const auto& t : texts) seqs.push_back(query_tokens(tokenizer, t, spec));
  std::vector<torch::Tensor> vectors, masks;
  if (!seqs.empty())
    check_forward_memory(model->config(), std::min(spec.batch_size, int64_t(seqs.size())), spec.query_length, false);
  for (size_t first = 0; first < seqs.size(); first += size_t(spec.batch_size)) {
    std::vector<const std::vector<int32_t>*> batch;
    for (size_t i = first; i < std::min(seqs.size(), first + size_t(spec.batch_size)); ++i) batch.push_back(&seqs[i]);
    auto b = to_device(query_batch(batch, tokenizer.special_ids(), spec), spec.device);
    // Every batch padded to the query length, so the batches concatenate.
    if (b.ids.size(1) < spec.query_length) {
      const int64_t extra = spec.query_length - b.ids.size(1);
      b.ids = torch::constant_pad_nd(b.ids, {0, extra}, 0);
      b.attend = torch::constant_pad_nd(b.attend, {0, extra}, 0);
      b.score = torch::constant_pad_nd(b.score, {0, extra}, 0);
    }
    vectors.push_back(encode_tokens(model, b).to(torch::kCPU, torch::kFloat));
    masks.push_back(b.score.to(torch::kCPU));
  }
  return {torch::cat(vectors), torch::cat(masks)};
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
    acc.add(ranked_ids, data.qrels.at(data.query_ids[size_t(q)]));
  }
  return acc.result();
}

}  // namespace

std::vector<bool> punctuation_ids(const Tokenizer& tokenizer) {
  const SpecialIds s = tokenizer.special_ids();
  const int64_t base = s.present() ? s.pad : tokenizer.vocab_size();
  std::vector<bool> skip(size_t(tokenizer.vocab_size()), false);
  for (int64_t id = 0; id < base; ++id) {
    std::string text = tokenizer.decode({int32_t(id)});
    bool any = false, all = true;
    for (unsigned char c : text) {
      if (std::isspace(c)) continue;
      any = true;
      all = all && c < 128 && std::ispunct(c);
    }
    skip[size_t(id)] = any && all;
  }
  return skip;
}

std::vector<int32_t> query_tokens(const Tokenizer& tokenizer, const std::string& text, const MultiVectorSpec& spec) {
  require_markers(tokenizer.special_ids());
  return encode_for_encoder(tokenizer, text, spec.query_length, tokenizer.special_ids().query);
}

std::vector<int32_t> document_tokens(const Tokenizer& tokenizer, const std::string& text, const MultiVectorSpec& spec) {
  require_markers(tokenizer.special_ids());
  return encode_for_encoder(tokenizer, text, spec.document_length, tokenizer.special_ids().document);
}

TokenBatch query_batch(const std::vector<const std::vector<int32_t>*>& seqs, const SpecialIds& special,
                       const MultiVectorSpec& spec) {
  if (!spec.query_expansion) return pad_tokens(seqs, 0, special.pad);
  TokenBatch b = pad_tokens(seqs, spec.query_length, special.mask);
  b.score = torch::ones_like(b.attend);
  return b;
}

TokenBatch document_batch(const std::vector<const std::vector<int32_t>*>& seqs, const SpecialIds& special,
                          const MultiVectorSpec& spec) {
  TokenBatch b = pad_tokens(seqs, 0, special.pad);
  if (spec.skip.empty()) return b;
  auto skip = torch::zeros_like(b.attend);
  auto ids = b.ids.accessor<int64_t, 2>();
  auto skip_a = skip.accessor<bool, 2>();
  for (int64_t i = 0; i < ids.size(0); ++i)
    for (int64_t t = 0; t < ids.size(1); ++t)
      skip_a[i][t] = ids[i][t] >= 0 && ids[i][t] < int64_t(spec.skip.size()) && spec.skip[size_t(ids[i][t])];
  b.score = b.attend & skip.logical_not();
  return b;
}

torch::Tensor encode_tokens(Transformer& model, const TokenBatch& batch) {
  auto out = model->forward(batch.ids, /*want_hidden=*/false, /*want_logits=*/false, batch.attend);
  return model->token_vectors(out.final_hidden);
}

std::vector<RowMatrixXd> encode_documents(Transformer& model, const Tokenizer& tokenizer,
                                          const std::vector<std::string>& texts, const MultiVectorSpec& spec,
                                          const std::function<void(int64_t, int64_t)>& progress) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  std::vector<std::vector<int32_t>> seqs;
  for (const auto& t : texts) seqs.push_back(document_tokens(tokenizer, t, spec));
  const auto n = int64_t(seqs.size());
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return seqs[a].size() > seqs[b].size(); });
  std::vector<RowMatrixXd> out(static_cast<size_t>(n));
  if (n > 0)
    check_forward_memory(model->config(), std::min(spec.batch_size, n), int64_t(seqs[size_t(order[0])].size()), false);
  for (int64_t first = 0; first < n; first += spec.batch_size) {
    const int64_t count = std::min(spec.batch_size, n - first);
    std::vector<const std::vector<int32_t>*> batch;
    for (int64_t i = first; i < first + count; ++i) batch.push_back(&seqs[size_t(order[size_t(i)])]);
    TokenBatch b = to_device(document_batch(batch, tokenizer.special_ids(), spec), spec.device);
    auto vectors = encode_tokens(model, b).to(torch::kCPU);
    auto score = b.score.to(torch::kCPU);
    for (int64_t i = 0; i < count; ++i)
      out[size_t(order[size_t(first + i)])] = to_matrix(vectors[i].index({score[i]}));
    if (progress) progress(first + count, n);
  }
  model->train(was_training);
  return out;
}

std::vector<PooledRetrieval> evaluate_multi_vector_retrieval(
    Transformer& model, const Tokenizer& tokenizer, const BeirData& data, const MultiVectorSpec& spec,
    const std::vector<double>& pool_factors, const WardPoolOptions& ward,
    const std::function<void(int64_t, int64_t)>& progress) {
  const auto n_corpus = int64_t(data.corpus_texts.size());
  auto corpus_progress = [&](int64_t done, int64_t) { if (progress) progress(done, n_corpus); };
  const std::vector<RowMatrixXd> docs = encode_documents(model, tokenizer, data.corpus_texts, spec, corpus_progress);
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  auto [queries, query_mask] = encode_queries(model, tokenizer, data.query_texts, spec);
  model->train(was_training);
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
