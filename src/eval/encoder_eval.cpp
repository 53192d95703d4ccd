#include "spread/eval/encoder_eval.h"

#include "spread/encode/embed.h"
#include "spread/eval/sts.h"

namespace spread {
namespace {

constexpr int64_t kQueryChunk = 256;  // queries scored against the corpus at a time: bounds the score matrix

torch::Tensor normalized(const torch::Tensor& x) { return torch::nn::functional::normalize(x, torch::nn::functional::NormalizeFuncOptions().dim(1)); }

}  // namespace

StsScore evaluate_sts(Transformer& model, const Tokenizer& tokenizer, const std::vector<StsPair>& pairs,
                      const EncoderSpec& spec) {
  std::vector<std::string> first, second;
  std::vector<double> gold;
  for (const auto& p : pairs) {
    first.push_back(p.a);
    second.push_back(p.b);
    gold.push_back(p.score);
  }
  auto ea = normalized(embed_texts(model, tokenizer, first, spec.max_length, spec.pooling, spec.batch_size, spec.device));
  auto eb = normalized(embed_texts(model, tokenizer, second, spec.max_length, spec.pooling, spec.batch_size, spec.device));
  auto cos = (ea * eb).sum(1).to(torch::kDouble).contiguous();
  std::vector<double> predicted(cos.data_ptr<double>(), cos.data_ptr<double>() + cos.numel());
  return {spearman(predicted, gold), int64_t(pairs.size())};
}

RetrievalMetrics evaluate_retrieval(Transformer& model, const Tokenizer& tokenizer, const BeirData& data,
                                    const EncoderSpec& spec, const std::function<void(int64_t, int64_t)>& progress) {
  const auto n_corpus = int64_t(data.corpus_texts.size()), n_queries = int64_t(data.query_texts.size());
  const int64_t total = n_corpus + n_queries;
  auto corpus_progress = [&](int64_t done, int64_t) { if (progress) progress(done, total); };
  auto query_progress = [&](int64_t done, int64_t) { if (progress) progress(n_corpus + done, total); };
  auto corpus = normalized(embed_texts(model, tokenizer, data.corpus_texts, spec.max_length, spec.pooling,
                                       spec.batch_size, spec.device, corpus_progress));
  auto queries = normalized(embed_texts(model, tokenizer, data.query_texts, spec.max_length, spec.pooling,
                                        spec.batch_size, spec.device, query_progress));
  RetrievalAccumulator acc;
  for (int64_t first = 0; first < n_queries; first += kQueryChunk) {
    auto scores = torch::matmul(queries.narrow(0, first, std::min(kQueryChunk, n_queries - first)), corpus.t()).contiguous();
    for (int64_t q = 0; q < scores.size(0); ++q) {
      const std::string& query_id = data.query_ids[size_t(first + q)];
      auto ranked = rank_documents(scores[q].data_ptr<float>(), n_corpus, data.corpus_ids, 100);
      std::vector<std::string> ranked_ids;
      for (int64_t i : ranked) ranked_ids.push_back(data.corpus_ids[size_t(i)]);
      acc.add(query_id, ranked_ids, data.qrels.at(query_id));
    }
  }
  return acc.result();
}

}  // namespace spread
