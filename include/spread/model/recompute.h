#pragma once
// Activation-lean pieces of the transformer (selective recomputation, as in Megatron-LM): each is one autograd
// node that keeps only its small inputs and recomputes its largest intermediate in backward. Per block this
// drops the [B*H, T, T] attention probabilities and the [B, T, 4C] GELU output from the saved activations
// (~40% of a block's activation memory at block 256), for one extra QK^T, softmax and GELU in backward; the gated
// MLPs (SwiGLU, GeGLU) likewise drop their [B, T, W] gated product.
// First-order gradients only (no double backward).
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

namespace spread {

// LibTorch's custom autograd functions take an undefined tensor input only as an empty optional.
inline c10::optional<at::Tensor> optional_input(const at::Tensor& t) {
  return t.defined() ? c10::optional<at::Tensor>(t) : c10::nullopt;
}

// softmax(q k^T * scale + mask) for q, k = [B*H, T, D]: [B*H, T, T]. Plain autograd ops (the path used with
// attention dropout, and by attention_core on both passes). mask as for attention_core.
at::Tensor attention_probs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& mask, int64_t batch,
                           double scale);

// softmax(q k^T / sqrt(D) + mask) v for qkv = [3, B*H, T, D] (q, k, v stacked, contiguous) -> [B*H, T, D].
// mask: additive float [1 | B, 1, T, T] (0 = attend, -inf = masked), or undefined for none. batch = B.
// Rows that are fully masked give NaN, as the unfused softmax does.
at::Tensor attention_core(const at::Tensor& qkv, const at::Tensor& mask, int64_t batch);

// linear(gelu(h + h_bias), weight, bias), with either bias possibly undefined; the GELU (exact, erf) output is not
// kept. h_bias is the bias of the product that made h (the MLP's first layer, computed without it): adding it
// here folds its gradient, a column sum of dL/dh, into the GELU-backward loop instead of a pass of its own. On CPU
// float32 the GELU and its derivative are spread's vectorized loops (runtime/fast_math.h), elsewhere LibTorch's.
// matmul_dtype kBFloat16: the two products (forward, dW and dh) in bf16 with float32 accumulation, as
// mixed_linear (model/transformer.h); GELU, its derivative and the bias gradients stay float32. The products go to
// the GEMMs of model/direct_linear.h where mixed_linear's would (training: the calling module is in training mode;
// in float32 the forward product, dW and dh then). In float32 inference (not `training`, grad mode off) there is no
// node: the activation, then runtime/packed_linear.h's product where the build has it.
at::Tensor gelu_linear(const at::Tensor& h, const at::Tensor& weight, const at::Tensor& bias,
                       at::ScalarType matmul_dtype = at::kFloat, const at::Tensor& h_bias = {}, bool training = false);

// linear(act(a) * b, weight, bias) for h = [a | b] ([..., 2W], the gated MLP's first product: gate, then up),
// act = SiLU (SwiGLU) or the exact GELU (GeGLU); bias may be undefined. The gated product is not kept: backward
// recomputes it in the loop that makes dL/dh, one pass over h (the LibTorch operators make two [..., 2W] tensors
// of zeros and copies for the two halves' gradients, besides the products). matmul_dtype as for gelu_linear.
at::Tensor gated_linear(const at::Tensor& h, const at::Tensor& weight, const at::Tensor& bias, bool silu,
                        at::ScalarType matmul_dtype = at::kFloat, bool training = false);

}  // namespace spread
