#include "spread/losses/maxsim.h"

#include <limits>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

namespace spread {
namespace {

torch::Tensor valid_mask(const torch::Tensor& mask, const torch::Tensor& tokens) {
  if (!mask.defined()) return torch::ones({tokens.size(0), tokens.size(1)}, tokens.options().dtype(torch::kBool));
  if (mask.dim() != 2 || mask.size(0) != tokens.size(0) || mask.size(1) != tokens.size(1))
    throw std::invalid_argument("maxsim_scores: a mask must be [rows, tokens] like its token tensor");
  return mask.to(torch::kBool);
}

torch::ScalarType sum_dtype(const torch::Tensor& t) {
  return t.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

// Scores of all queries against one chunk of documents: [Q, c].
torch::Tensor score_chunk(const torch::Tensor& q_flat, const torch::Tensor& q_valid, int64_t Q, int64_t Lq,
                          const torch::Tensor& docs, const torch::Tensor& doc_valid) {
  const int64_t c = docs.size(0), Ld = docs.size(1);
  auto sim = torch::matmul(q_flat, docs.reshape({c * Ld, docs.size(2)}).t()).view({Q, Lq, c, Ld});
  const double lowest = sim.scalar_type() == torch::kDouble ? std::numeric_limits<double>::lowest()
                                                             : double(std::numeric_limits<float>::lowest());
  sim = sim.masked_fill(doc_valid.logical_not().view({1, 1, c, Ld}), lowest);
  auto best = std::get<0>(sim.max(3)).to(sum_dtype(sim));                          // [Q, Lq, c]
  return best.masked_fill(q_valid.logical_not().view({Q, Lq, 1}), 0.0).sum(1);  // [Q, c]
}

}  // namespace

torch::Tensor maxsim_scores(const torch::Tensor& queries, const torch::Tensor& query_mask,
                            const torch::Tensor& documents, const torch::Tensor& document_mask, int64_t max_block) {
  if (queries.dim() != 3 || documents.dim() != 3 || queries.size(2) != documents.size(2))
    throw std::invalid_argument("maxsim_scores: queries [Q, Lq, d] and documents [N, Ld, d] of one width d");
  const int64_t Q = queries.size(0), Lq = queries.size(1), N = documents.size(0), Ld = documents.size(1);
  const auto q_valid = valid_mask(query_mask, queries), d_valid = valid_mask(document_mask, documents);
  const auto q_flat = queries.reshape({Q * Lq, queries.size(2)});
  const int64_t chunk = std::max<int64_t>(1, max_block / std::max<int64_t>(1, Q * Lq * Ld));
  if (chunk >= N) return score_chunk(q_flat, q_valid, Q, Lq, documents, d_valid);
  std::vector<torch::Tensor> parts;
  for (int64_t first = 0; first < N; first += chunk) {
    const int64_t c = std::min(chunk, N - first);
    parts.push_back(score_chunk(q_flat, q_valid, Q, Lq, documents.narrow(0, first, c), d_valid.narrow(0, first, c)));
  }
  return torch::cat(parts, 1);
}

torch::Tensor maxsim_contrastive_loss(const torch::Tensor& scores, double temperature) {
  if (!(temperature > 0)) throw std::invalid_argument("maxsim_contrastive_loss: temperature must be positive");
  if (scores.dim() != 2 || scores.size(0) == 0 || scores.size(1) % scores.size(0) != 0)
    throw std::invalid_argument("maxsim_contrastive_loss: scores must be [Q, Q N]");
  const int64_t Q = scores.size(0), N = scores.size(1) / Q;
  const auto labels = torch::arange(Q, scores.options().dtype(torch::kLong)) * N;
  auto logits = temperature == 1.0 ? scores : scores / temperature;
  return torch::cross_entropy_loss(logits.to(sum_dtype(scores)), labels);
}

}  // namespace spread
