#pragma once
// Rotary positions and grouped-query heads between the QKV projection and the attention kernel, as one autograd
// node: the QKV projection of a block with H query heads and K k/v heads, [B, T, (H + 2K) D] in the layout
// [q heads | k heads | v heads], becomes fused_attention's [B, T, 3 H D] ([q | k | v], H heads each) with
//   - q and k rotated by their position's angles, with transformers' Llama pairing (rotate_half: dimension i < D/2
//     turns with i + D/2): y_i = x_i cos_i - x_{i+D/2} sin_i, y_{i+D/2} = x_{i+D/2} cos_{i+D/2} + x_i sin_{i+D/2};
//   - each k/v head repeated for its H/K query heads (head h reads k/v head h / (H/K), as repeat_kv does).
// Why one node: written as LibTorch operators (narrow, cat, two products and a sum per rotation, expand, reshape,
// cat) the forward pass makes about ten [B, T, C]-sized temporaries and backward as many again, which cost the
// Llama-style block more than its attention on small widths. Here each pass is one loop over the tokens; nothing
// is kept for backward but the angle tables (constants).
#include <ATen/core/Tensor.h>

namespace spread {

// qkv: [B, T, (H + 2K) D]; cos, sin: contiguous tables of at least T positions, D values per position ([T', 1, D]
// or [T', D], T' >= T), or both undefined for no rotation (grouped-query heads only). H must be a multiple of K.
// CPU float32 runs spread's loops; any other device or dtype, the same computation from LibTorch operators.
// First-order gradients for qkv only.
at::Tensor rotate_and_repeat_heads(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin,
                                   int64_t n_head, int64_t n_kv_head);

// The same from LibTorch operators (any device, differentiable by autograd): the reference of the loops and their
// fallback.
at::Tensor rotate_and_repeat_heads_reference(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin,
                                             int64_t n_head, int64_t n_kv_head);

}  // namespace spread
