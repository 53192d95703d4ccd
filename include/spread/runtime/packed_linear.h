#pragma once
// Inference products with the weight packed once: y = x W^T + b in float32 on the CPU through a oneDNN matmul
// primitive whose weight operand is W reordered, on first use, into the blocked layout oneDNN's kernels read, and
// kept for the next call. LibTorch's linear (OpenBLAS) copies W into its packed panels again on every call, which
// on an encoder's forward passes (a few hundred rows per product) is a tenth of the product's time; the packed
// primitive ran those products 1.1-1.35x faster here (docs/benchmarks.md, `spread encode --model`).
// Built where the LibTorch is Debian's 1.13, which links Debian's oneDNN 2.x (libdnnl-dev gives its headers); other
// builds keep LibTorch's linear.
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace spread {

// Whether this build has the packed product and it ran a small product correctly in this process.
bool has_packed_linear();

// Whether packed_linear serves this inference product: has_packed_linear(), x and weight float32 on the CPU, and
// no gradient wanted (grad mode off: the product is not differentiable).
bool takes_packed_linear(const at::Tensor& x, const at::Tensor& weight);

// x [..., in], weight [out, in], bias [out] or undefined -> float32 [..., out]. The packed copy of `weight` is kept
// while that tensor lives and is unchanged (the same storage and version counter); a weight changed in place or
// replaced is packed again on its next call.
at::Tensor packed_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// Products packed_linear has run in this process (tests count them to see which path a layer took).
int64_t packed_products_run();

}  // namespace spread
