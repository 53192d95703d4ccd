#pragma once
// In-batch contrastive loss, InfoNCE (docs/design.md §5): sentence-transformers' MultipleNegativesRankingLoss
// (Henderson et al. 2017, arXiv:1705.00652, section 4.4), its MultipleNegativesSymmetricRankingLoss and its
// MatryoshkaLoss (Kusupati et al. 2022, arXiv:2205.13147), on text embeddings (pooling/pooling.h).
// Anchors a_1..a_B, each with a positive p_i and K >= 0 hard negatives n^1_i..n^K_i. Every anchor is scored against
// every candidate of the batch, c = [p_1..p_B, n^1_1..n^1_B, ..., n^K_1..n^K_B] (N = B (1 + K) columns):
//   s_ij = cos(a_i, c_j) / tau,   cos(x, y) = x.y / (max(||x||, 1e-12) max(||y||, 1e-12))   (ST's util.cos_sim)
//   L_fwd = (1/B) sum_i [ logsumexp_j s_ij - s_ii ]                 = mean_i CE(s_i, i)
// symmetric: the positives also pick their anchor among all anchors (hard negatives take no part):
//   L_bwd = (1/B) sum_i [ logsumexp_j s_ji - s_ii ]  (j over the B anchors),   L = (L_fwd + L_bwd) / 2
// Duplicate masking: a batch that holds one text twice has false negatives (a_i's positive text is also at column
// j != i). With text ids given, for every row i the columns j != i with candidate_text_ids[j] ==
// candidate_text_ids[i] leave a_i's softmax (s_ij = -inf), and in the symmetric term the anchors j != i with
// anchor_text_ids[j] == anchor_text_ids[i] leave p_i's. Column i is never masked, so every row stays finite.
// Matryoshka (matryoshka_dims non-empty): L = sum_{m in dims} L computed on the prefixes a[:, :m], c[:, :m]
// (cosines re-normalise each prefix), unit weights; the full width enters only when listed.
// Edge values: 0 <= L_fwd; L_fwd = log N when all embeddings coincide; L_fwd -> 0 as every positive pulls ahead.
// Dtypes: scores, logsumexp and the mean run in float32 (float64 for float64 input) whatever the embeddings'
// dtype; the loss is a float32 (float64) scalar. Cost: one [B, d] x [d, N] product per Matryoshka dimension.
#include <cstdint>
#include <vector>
#include <torch/types.h>

namespace spread {

struct ContrastiveOptions {
  double temperature = 0.05;             // tau; ST's scale = 1 / tau = 20
  bool symmetric = false;                // add the positives -> anchors term (MultipleNegativesSymmetricRankingLoss)
  std::vector<int64_t> matryoshka_dims;  // empty = the full width only; else the sum over these prefix widths
};

// Throws std::invalid_argument naming the bad field: temperature not a positive finite number, a Matryoshka width
// that is not positive or (when dim > 0) exceeds the embedding width dim.
void check_contrastive_options(const ContrastiveOptions& opt, int64_t dim = 0);

// anchors: [B, d] floating; candidates: [B (1 + K), d], ordered as above. anchor_text_ids: [B] and
// candidate_text_ids: [B (1 + K)] integer (equal id = equal text), each optional (undefined = no masking on that
// side; anchor ids matter only in symmetric mode). Validates opt against d (check_contrastive_options).
torch::Tensor info_nce(const torch::Tensor& anchors, const torch::Tensor& candidates, const ContrastiveOptions& opt,
                       const torch::Tensor& anchor_text_ids = {}, const torch::Tensor& candidate_text_ids = {});

}  // namespace spread
