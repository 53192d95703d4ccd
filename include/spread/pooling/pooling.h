#pragma once
// Text embeddings from token states (docs/design.md §4): one vector per text from the valid tokens of its last layer.
//   mean        e_i = sum_j m_ij x_ij / max(sum_j m_ij, 1)          (sentence-transformers' Pooling "mean")
//   cls         e_i = x_i0                                         (position 0, BOS/CLS)
//   last        e_i = x_i,t(i),  t(i) = the last j with m_ij      (decoder embedders, e.g. E5-Mistral, Qwen3-Embedding)
//   max         e_if = max_j over valid j of x_ijf                 (sentence-transformers' "max")
//   weightedmean e_i = sum_j (j+1) m_ij x_ij / max(sum_j (j+1) m_ij, 1e-9)   (its "weightedmean": weights are the
//               1-based positions in the padded batch, as the library has them)
// Padding never enters a pooled vector, nor receives a gradient from it, whatever it holds (NaN included).
// Edge values: a text with no valid token pools to 0 (mean, weightedmean), to position 0 (cls, last) or to -1e9
// (max, the library's fill value). Results are [B, F] in the
// dtype of hidden and are not normalised (the contrastive loss and the diagnostics normalise on their own); the
// sum of the mean runs in float32 (float64 for float64 input).
#include <string>
#include <torch/types.h>

namespace spread {

// hidden: [B, T, F] floating; mask: [B, T] bool, true = valid token (an integer 0/1 attention mask is accepted too),
// or an undefined tensor (all valid).
torch::Tensor mean_pool(const torch::Tensor& hidden, const torch::Tensor& mask);
torch::Tensor cls_pool(const torch::Tensor& hidden, const torch::Tensor& mask);  // the mask only checks the shape
// The highest valid position of each row: the last token under right padding (and under left padding as well).
torch::Tensor last_token_pool(const torch::Tensor& hidden, const torch::Tensor& mask);
torch::Tensor max_pool(const torch::Tensor& hidden, const torch::Tensor& mask);
torch::Tensor weighted_mean_pool(const torch::Tensor& hidden, const torch::Tensor& mask);

enum class Pooling { Mean, Cls, LastToken, Max, WeightedMean };

// "mean" | "cls" | "last" | "max" | "weightedmean"; throws std::invalid_argument listing the valid names otherwise.
Pooling parse_pooling(const std::string& name);

// The pooling `p` names.
torch::Tensor pool(Pooling p, const torch::Tensor& hidden, const torch::Tensor& mask);

}  // namespace spread
