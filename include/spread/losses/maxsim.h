#pragma once
// Late-interaction scoring and its contrastive loss (docs/design.md §6.2; ColBERT, Khattab & Zaharia 2020; PyLate's
// colbert_scores and Contrastive loss). Token vectors are unit rows of a multi-vector head
// (TransformerImpl::token_vectors).
//   s(q, D) = sum_{valid i of q} max_{valid j of D} <q_i, d_j>
// Masked document tokens are filled with the dtype's lowest value before the max, so a padding token never wins,
// even when every real similarity is negative; the sum over query tokens runs in float32 (float64 input: float64).
// A document without any valid token would score the lowest value per query token: callers never pass one.
// Contrastive layout: Q queries, each with N documents (positive first, then hard negatives), all Q N documents of
// the batch scored by every query: scores [Q, Q N], the positive of query i is column i N, and
//   L = mean_i CE(scores_i / temperature, i N)        (temperature 1 by default, as PyLate's)
#include <cstdint>
#include <torch/types.h>

namespace spread {

// queries [Q, Lq, d], query_mask [Q, Lq] (bool or 0/1; undefined = all valid); documents [N, Ld, d], document_mask
// [N, Ld] (likewise). Returns [Q, N]. Documents are scored in chunks whose [Q Lq, chunk Ld] similarity block holds
// at most max_block elements (at least one document per chunk), so memory stays bounded for large corpora.
// Throws std::invalid_argument for mismatched shapes.
torch::Tensor maxsim_scores(const torch::Tensor& queries, const torch::Tensor& query_mask,
                            const torch::Tensor& documents, const torch::Tensor& document_mask,
                            int64_t max_block = int64_t(1) << 24);

// scores [Q, Q N] -> the mean cross-entropy above. Throws std::invalid_argument when the column count is not a
// multiple of the row count or temperature is not positive.
torch::Tensor maxsim_contrastive_loss(const torch::Tensor& scores, double temperature = 1.0);

}  // namespace spread
