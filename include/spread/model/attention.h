#pragma once
// Fused multi-head self-attention on CPU, one autograd node straight from the QKV projection's output:
//   y[b, t, h*D:(h+1)*D] = softmax(q_bh k_bh^T / sqrt(D) + mask_b) v_bh
// where q, k, v of head h are column blocks of qkv = [B, T, 3C] (C = H*D, layout [q | k | v], heads in order).
// Why: LibTorch 1.13's CPU bmm (without MKL) runs one BLAS call after another for the B*H small matrices, behind
// a select and an addmm per matrix, on one thread, and the [3, B*H, T, D] / [B, T, C] layout changes cost a copy
// each way. Here the heads run in parallel (at::parallel_for; one after another beside OpenBLAS's pthread build,
// which threads each call itself), each with direct BLAS calls on strided views of qkv and a softmax in cache,
// and only the row log-sum-exp [B, H, T] is kept: backward recomputes the probabilities (as FlashAttention
// does), so no [B*H, T, T] tensor is stored (except attention dropout's noise, when there is dropout).
#include <ATen/core/Tensor.h>

namespace spread {

// True when the fused kernel can run on `qkv`: a CPU float32 tensor, and a BLAS with the Fortran sgemm_ entry
// point is loaded in the process and computes a test product right (LibTorch's own; a LibTorch with a private BLAS
// falls back to the unfused path).
bool fused_attention_supported(const at::Tensor& qkv);

// qkv: [B, T, 3C] float32 on CPU; mask: the additive [1 | B, 1, 1 | T, T] mask (0 = attend, -inf = masked), as
// SelfAttention::attention_mask builds it, or undefined; n_head = H. Returns y = [B, T, C]. A fully masked query
// row gives 0 and passes no gradient (as FlashAttention does; the unfused softmax gives NaN there).
// First-order gradients (for qkv only; the mask is a constant). dropout > 0 drops attention probabilities with
// attention_dropout_noise's [B*H, T, T] noise, drawn from LibTorch's default generator exactly as at::dropout draws
// it on the unfused path (so both paths, GradCache's replayed RNG state and resumed runs see the same masks); the
// noise is kept for backward, as at::dropout keeps it.
// causal = true restricts query t to keys 0..t as well (the causal mask may still be passed; it is then redundant)
// and skips the score blocks above the diagonal: rows in blocks of 32 (64 with bf16 products), each block's
// columns stop at its last row.
// window >= 0 restricts query t to keys s with |t - s| <= window (local attention, ModernBERT's local_attention / 2;
// with causal, to t - window..t), in row blocks whose columns span only the keys they see: neither a T x T mask
// nor the scores outside the band are computed. -1: no window.
// products = kBFloat16 (the model's bf16 precision): the five products take bf16 operands (qkv, dy, the
// probabilities and their gradient, each rounded to nearest) and accumulate in float32, as PyTorch's attention under
// autocast does; softmax, the log-sum-exp and every output stay float32. Runs in float32 where the process has no
// bf16 GEMM (fused_attention_has_bf16_products).
at::Tensor fused_attention(const at::Tensor& qkv, const at::Tensor& mask, int64_t n_head, double dropout = 0.0,
                           bool causal = false, int64_t window = -1, at::ScalarType products = at::kFloat);

// True when the process has a bf16 GEMM with float32 accumulation for fused_attention's bf16 products: oneDNN's
// dnnl_gemm_bf16bf16f32 (Debian's LibTorch) or MKL's cblas_gemm_bf16bf16f32 (the torch wheel's), checked on a
// small product.
bool fused_attention_has_bf16_products();

// The additive [1, 1, T, T] mask of a window (0 where |t - s| <= window, -inf elsewhere), for the unfused path.
at::Tensor window_mask(int64_t T, int64_t window, const at::TensorOptions& options);

// at::dropout's noise for probabilities of shape [heads, T, T]: bernoulli(1 - p) / (1 - p).
at::Tensor attention_dropout_noise(int64_t heads, int64_t T, double p, const at::TensorOptions& options);

// The same attention from LibTorch operators (any device): heads split into [3, B*H, T, D] and merged back by
// copies. dropout > 0 drops attention probabilities (training only);
// otherwise recompute picks model/recompute.h's attention_core, which keeps no [B*H, T, T] tensor.
at::Tensor unfused_attention(const at::Tensor& qkv, const at::Tensor& mask, int64_t n_head, double dropout,
                             bool recompute);

}  // namespace spread
