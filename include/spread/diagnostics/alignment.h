#pragma once
// Alignment and uniformity of text embeddings (Wang & Isola 2020, "Understanding Contrastive Representation
// Learning through Alignment and Uniformity on the Hypersphere", arXiv:2005.10242; docs/design.md §7.4), with the
// paper's alpha = 2 and t = 2, in float64 under no_grad (inputs of any float dtype and device; no graph is kept).
// Rows are first scaled to unit length, u = x / max(||x||, 1e-12) (an all-zero row stays 0).
//   alignment(u, v) = (1/N) sum_i ||u_i - v_i||^2                                  over positive pairs (u_i, v_i)
//   uniformity(u)   = log( (2 / (N (N - 1))) sum_{i<j} exp(-2 ||u_i - u_j||^2) )
// Lower is better for both. Edge values: alignment 0 for identical directions, 2 for orthogonal, 4 for antipodal
// pairs. Uniformity is 0 when all rows coincide (its maximum) and at least -4 - 4/(N-1), reached exactly by the
// N vertices of a regular simplex (N <= d + 1): sum_{i<j} ||u_i - u_j||^2 = N^2 - ||sum_i u_i||^2 <= N^2 and Jensen.
// For rows drawn uniformly from the sphere it lies above -4 (Jensen, E||u_i - u_j||^2 = 2) and tends to -4 as d
// grows. Both are NaN without data (N = 0; N < 2 for uniformity).
// Cost: alignment O(N d); uniformity O(N^2 d) time in row blocks, so memory stays O(block N), not O(N^2).
#include <torch/types.h>

namespace spread {

// u, v: [N, d] with the same shape; row i of u and of v form a positive pair. Throws std::invalid_argument otherwise.
double alignment(const torch::Tensor& u, const torch::Tensor& v);

// u: [N, d]. Throws std::invalid_argument when u is not 2-D.
double uniformity(const torch::Tensor& u);

}  // namespace spread
