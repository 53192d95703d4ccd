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

// The packed weights are kept only while a scope is open (in any thread; nested scopes share them, the outermost
// frees them): around a run of inference passes over weights that do not change meanwhile (an encode, an
// evaluation). Outside a scope nothing is packed. A weight's version counter alone cannot say it changed: spread's
// optimizer writes parameters through their pointers, which LibTorch does not count.
class PackedWeightsScope {
 public:
  PackedWeightsScope();
  ~PackedWeightsScope();
  PackedWeightsScope(const PackedWeightsScope&) = delete;
  PackedWeightsScope& operator=(const PackedWeightsScope&) = delete;
};

// Whether packed_linear serves this product, asked as takes_direct_gemm is (model/direct_linear.h): a float32
// product (`dtype`) of a module not in training mode, no gradient wanted (grad mode off: the product is not
// differentiable), x and weight float32 on the CPU, a PackedWeightsScope open, and has_packed_linear().
bool takes_packed_linear(const at::Tensor& x, const at::Tensor& weight, at::ScalarType dtype, bool training);

// x [..., in], weight [out, in], bias [out] or undefined -> float32 [..., out]. Within a scope the packed copy of
// `weight` is kept while that tensor lives with the same storage and version counter (a weight changed in place
// through LibTorch, or replaced, is packed again); outside one the weight is packed for this call only.
at::Tensor packed_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// Products packed_linear has run in this process (tests count them to see which path a layer took).
int64_t packed_products_run();

}  // namespace spread
