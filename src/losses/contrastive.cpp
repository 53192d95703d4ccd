// In-batch InfoNCE with hard negatives, optional symmetric term, duplicate masking and Matryoshka prefixes
// (sentence-transformers' MultipleNegativesRankingLoss family; docs/design.md §5). Formulas in contrastive.h.
// CE(s_i, i) is written as logsumexp_j s_ij - s_ii: the same value as cross_entropy, stable at large 1/tau, and
// a masked column (-inf) gets an exactly zero softmax weight and gradient.
#include "spread/losses/contrastive.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace spread {

namespace {

constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

void check_inputs(const torch::Tensor& anchors, const torch::Tensor& candidates, const torch::Tensor& anchor_ids,
                  const torch::Tensor& candidate_ids) {
  TORCH_CHECK(anchors.dim() == 2 && anchors.is_floating_point() && anchors.size(0) >= 1,
              "info_nce: anchors must be a float [B, d] tensor with B >= 1");
  TORCH_CHECK(candidates.dim() == 2 && candidates.is_floating_point(), "info_nce: candidates must be a float tensor");
  TORCH_CHECK(candidates.size(1) == anchors.size(1), "info_nce: anchors and candidates differ in width");
  TORCH_CHECK(candidates.size(0) >= anchors.size(0) && candidates.size(0) % anchors.size(0) == 0,
              "info_nce: candidates must hold B (1 + K) rows (positives, then K columns of hard negatives)");
  TORCH_CHECK(!anchor_ids.defined() || (anchor_ids.dim() == 1 && anchor_ids.size(0) == anchors.size(0)),
              "info_nce: anchor_text_ids must be [B]");
  TORCH_CHECK(!candidate_ids.defined() || (candidate_ids.dim() == 1 && candidate_ids.size(0) == candidates.size(0)),
              "info_nce: candidate_text_ids must be [B (1 + K)]");
}

// Rows scaled to unit length, x / max(||x||, 1e-12) (torch.nn.functional.normalize, as ST's cos_sim).
torch::Tensor unit_rows(const torch::Tensor& x) {
  return x / torch::linalg_vector_norm(x, 2, {-1}, /*keepdim=*/true).clamp_min(1e-12);
}

// [B, N] bool, true where column j != i carries row i's text: ids[j] == ids[i] for i < B.
torch::Tensor duplicates(const torch::Tensor& ids, int64_t batch, const torch::Device& device) {
  torch::Tensor id = ids.to(device, torch::kLong);
  torch::Tensor same = id.slice(0, 0, batch).unsqueeze(1).eq(id.unsqueeze(0));  // [B, N]
  torch::Tensor diagonal = torch::eye(batch, id.size(0), torch::dtype(torch::kBool).device(device));
  return same.logical_and(diagonal.logical_not());
}

// mean_i [logsumexp_j s_ij - s_ii]; `drop` (may be undefined) removes columns from rows.
torch::Tensor cross_entropy_on_diagonal(const torch::Tensor& scores, const torch::Tensor& drop) {
  torch::Tensor s = drop.defined() ? scores.masked_fill(drop, kMinusInf) : scores;
  return (s.logsumexp(1) - scores.diagonal()).mean();
}

}  // namespace

void check_contrastive_options(const ContrastiveOptions& opt, int64_t dim) {
  if (!(opt.temperature > 0) || !std::isfinite(opt.temperature))
    throw std::invalid_argument("contrastive temperature must be a positive number (ST's scale is 1 / temperature)");
  for (int64_t m : opt.matryoshka_dims) {
    if (m <= 0) throw std::invalid_argument("contrastive matryoshka_dims must be positive widths");
    if (dim > 0 && m > dim)
      throw std::invalid_argument("contrastive matryoshka_dims: width " + std::to_string(m) +
                                  " exceeds the embedding width " + std::to_string(dim));
  }
}

torch::Tensor info_nce(const torch::Tensor& anchors, const torch::Tensor& candidates, const ContrastiveOptions& opt,
                       const torch::Tensor& anchor_text_ids, const torch::Tensor& candidate_text_ids) {
  check_inputs(anchors, candidates, anchor_text_ids, candidate_text_ids);
  const int64_t batch = anchors.size(0), width = anchors.size(1);
  check_contrastive_options(opt, width);
  const auto acc = anchors.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const auto device = anchors.device();

  // The masks depend on the ids only, so they are shared by every Matryoshka width.
  torch::Tensor drop_fwd, drop_bwd;
  if (candidate_text_ids.defined()) drop_fwd = duplicates(candidate_text_ids, batch, device);
  if (opt.symmetric && anchor_text_ids.defined()) drop_bwd = duplicates(anchor_text_ids, batch, device);

  std::vector<int64_t> dims = opt.matryoshka_dims;
  if (dims.empty()) dims.push_back(width);
  const torch::Tensor a_full = anchors.to(acc), c_full = candidates.to(acc);
  torch::Tensor total;
  for (int64_t m : dims) {
    torch::Tensor a = unit_rows(a_full.narrow(1, 0, m)), c = unit_rows(c_full.narrow(1, 0, m));
    torch::Tensor scores = torch::mm(a, c.t()) * (1.0 / opt.temperature);  // [B, N]
    torch::Tensor loss = cross_entropy_on_diagonal(scores, drop_fwd);
    if (opt.symmetric) {
      // p_i against the anchors: the transposed anchor-positive block (ST: scores[:, :B].T).
      loss = (loss + cross_entropy_on_diagonal(scores.narrow(1, 0, batch).t(), drop_bwd)) * 0.5;
    }
    total = total.defined() ? total + loss : loss;
  }
  return total;
}

}  // namespace spread
