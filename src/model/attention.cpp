#include "spread/model/attention.h"

#include "spread/model/recompute.h"
#include "spread/runtime/direct_mm.h"
#include "spread/runtime/blas.h"
#include "spread/runtime/fast_math.h"
#include "spread/runtime/vectorize.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

namespace spread {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// OpenBLAS's pthread build may thread each sgemm_ itself (it checks for enclosing OpenMP regions only in its
// OpenMP build): heads then run one after another rather than N x N threads.
int64_t head_grain(int64_t heads) {
  static const bool blas_threads_itself = blas_info().threading == "pthread";
  return blas_threads_itself ? heads : 1;
}

void add_row(float* row, const float* mask_row, int cols) {
  for (int j = 0; j < cols; ++j) row[j] += mask_row[j];
}

// x[i, j] *= by[i, j] for the rows x cols block of two row-major buffers with their own row strides.
SPREAD_VECTOR_CLONES void multiply_rows(float* x, int64_t ld, const float* by, int64_t by_ld, int rows, int cols) {
  for (int i = 0; i < rows; ++i) {
    float* row = x + i * ld;
    const float* factor = by + i * by_ld;
#pragma omp simd
    for (int j = 0; j < cols; ++j) row[j] *= factor[j];
  }
}

// A block of query rows of one head: `rows` rows starting at query `row0`, against `cols` key columns starting at
// key `col0`, stored with row stride `ld` (buffer column j is key col0 + j). With `causal`, query t sees keys up to t;
// with a window w >= 0, keys s with |t - s| <= w (ModernBERT's local attention). The columns of a row outside what it
// sees are set to 0 and never read, so the kernel skips the masked part of the scores instead of relying on a mask's
// -inf there (and no T x T mask is needed for either).
struct RowBlock {
  int row0, rows, col0, cols;
  int64_t ld;
  bool causal;
  int window;  // < 0: none
  int first(int i) const { return window < 0 ? 0 : std::max(0, row0 + i - window - col0); }
  int end(int i) const {
    int e = cols;
    if (causal) e = std::min(e, row0 + i + 1 - col0);
    if (window >= 0) e = std::min(e, row0 + i + window + 1 - col0);
    return e;
  }
};

// The rows x cols block at s (row stride ld) rounded to bf16 into `to` (the same layout).
SPREAD_VECTOR_CLONES void round_rows_to_bf16(const float* s, int rows, int cols, int64_t ld, Bf16* to) {
  for (int i = 0; i < rows; ++i) {
    const float* row = s + i * ld;
    Bf16* out = to + i * ld;
#pragma omp simd
    for (int j = 0; j < cols; ++j) out[j] = to_bf16(row[j]);
  }
}

// The probabilities (or their gradient) of a row block as the next product's operand, in the products' type: the
// float32 rows themselves, or rounded to bf16 into `low` (the same layout), as PyTorch's autocast attention rounds
// its probabilities before P v.
const float* operand(const float* s, const RowBlock&, std::vector<float>&) { return s; }
const Bf16* operand(const float* s, const RowBlock& b, std::vector<Bf16>& low) {
  Bf16* out = low.data() + b.row0 * b.ld;
  round_rows_to_bf16(s, b.rows, b.cols, b.ld, out);
  return out;
}

// Scores (already scaled) plus mask to probabilities, in place, row by row; lse gets each row's log-sum-exp.
// A row with nothing to attend to (a padding query outside every valid key's window) becomes 0 with lse = +inf, so
// that backward recomputes zero probabilities for it, as FlashAttention and PyTorch's memory-efficient attention
// do: softmax's NaN there would reach every valid row of the next layer through 0 * NaN in P v. mask: the block's
// first mask row from column col0 on.
SPREAD_VECTOR_CLONES void softmax_rows(float* s, const RowBlock& b, const float* mask, int64_t mask_ld, float* lse) {
  for (int i = 0; i < b.rows; ++i) {
    const int f = b.first(i), n = b.end(i) - f;
    std::fill(s + i * b.ld, s + i * b.ld + f, 0.0f);
    std::fill(s + i * b.ld + f + n, s + i * b.ld + b.cols, 0.0f);
    float* row = s + i * b.ld + f;
    if (mask) add_row(row, mask + i * mask_ld + f, n);
    float top = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : top)
    for (int j = 0; j < n; ++j) top = std::max(top, row[j]);
    if (top == -std::numeric_limits<float>::infinity()) {
      std::fill(row, row + n, 0.0f);
      lse[i] = std::numeric_limits<float>::infinity();
      continue;
    }
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < n; ++j) {
      row[j] = exp_nonpositive(row[j] - top);
      sum += row[j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < n; ++j) row[j] *= inv;
    lse[i] = top + std::log(sum);
  }
}

// Backward of softmax_rows: recomputes the probabilities P from the scaled scores s, the mask and lse (into s),
// and turns dp = dL/dP into dL/dscores = P * (dp - rowsum(P * dp)) in place (0 where causal hides the key).
SPREAD_VECTOR_CLONES void softmax_backward_rows(float* s, float* dp, const RowBlock& b, const float* mask,
                                                int64_t mask_ld, const float* lse) {
  for (int i = 0; i < b.rows; ++i) {
    const int f = b.first(i), n = b.end(i) - f;
    for (float* row : {s + i * b.ld, dp + i * b.ld}) {
      std::fill(row, row + f, 0.0f);
      std::fill(row + f + n, row + b.cols, 0.0f);
    }
    float* p = s + i * b.ld + f;
    float* d = dp + i * b.ld + f;
    if (mask) add_row(p, mask + i * mask_ld + f, n);
    const float shift = lse[i];
    float dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j < n; ++j) {
      p[j] = exp_nonpositive(p[j] - shift);
      dot += p[j] * d[j];
    }
    for (int j = 0; j < n; ++j) d[j] = p[j] * (d[j] - dot);
  }
}

// Rows per block of the causal and windowed kernels. Fewer rows skip more of the masked products but make each product
// smaller. Measured on Zen 4 (bench_attention, forward + backward): float32 (sgemm_) took 4-8% less time in blocks
// of 32 than of 64 for T = 64 to 512 and the same at T = 1024; the bf16 GEMM took 3% more in blocks of 32 at T = 256.
int block_rows(bool bf16_products) { return bf16_products ? 64 : 32; }

// Where head h of batch row b lives: q, k, v are T x D blocks of qkv with row stride 3C; y, dy are T x D blocks of
// [B, T, C] with row stride C.
struct Geometry {
  int B, T, C, H, D;
  int64_t heads;  // B * H
  float scale;    // 1 / sqrt(D)
  const float* mask = nullptr;
  int64_t mask_batch_stride = 0, mask_ld = 0;

  Geometry(const at::Tensor& qkv, const at::Tensor& mask_tensor, int64_t n_head)
      : B(int(qkv.size(0))), T(int(qkv.size(1))), C(int(qkv.size(2) / 3)), H(int(n_head)), D(C / H),
        heads(int64_t(B) * H), scale(1.0f / std::sqrt(float(D))) {
    if (!mask_tensor.defined()) return;
    mask = mask_tensor.data_ptr<float>();
    mask_batch_stride = mask_tensor.size(0) == 1 ? 0 : mask_tensor.stride(0);
    mask_ld = mask_tensor.size(2) == 1 ? 0 : mask_tensor.stride(2);  // [B, 1, 1, T]: one row for all queries
  }
  int64_t qkv_offset(int64_t bh) const { return (bh / H) * T * 3 * C + (bh % H) * D; }
  int64_t out_offset(int64_t bh) const { return (bh / H) * T * C + (bh % H) * D; }
  // The mask of a row block from its first row and column (a one-row mask serves every query).
  const float* mask_of(int64_t bh, const RowBlock& b) const {
    return mask ? mask + (bh / H) * mask_batch_stride + b.row0 * mask_ld + b.col0 : nullptr;
  }
  // Query row blocks: one block of all T rows and columns, or with `causal` or a window (>= 0) blocks of
  // block_rows(bf16) rows whose columns span only the keys some row of the block sees: causal computes about half of
  // the score products for long sequences (9/16 of them at T = 256 in blocks of 32), a window of w about
  // (rows + 2w) / T of them.
  std::vector<RowBlock> row_blocks(bool causal, int window, bool bf16_products) const {
    const int step = causal || window >= 0 ? block_rows(bf16_products) : T;
    std::vector<RowBlock> blocks;
    for (int row0 = 0; row0 < T; row0 += step) {
      const int rows = std::min(step, T - row0);
      const int col0 = window >= 0 ? std::max(0, row0 - window) : 0;
      int col_end = causal ? row0 + rows : T;
      if (window >= 0) col_end = std::min(col_end, row0 + rows + window);
      blocks.push_back({row0, rows, col0, col_end - col0, T, causal, window});
    }
    return blocks;
  }
  // scores = q k^T * scale for the rows and columns of block b of head bh, into the T x T row-major buffer's
  // rows b.row0 onward (buffer column j = key b.col0 + j). Operand: float or Bf16, qkv's elements in that type.
  template <class Operand>
  void scaled_scores(const Operand* qkv, int64_t bh, const RowBlock& b, float* scores) const {
    const Operand* q = qkv + qkv_offset(bh);
    row_major_gemm(false, true, b.rows, b.cols, D, scale, q + int64_t(b.row0) * 3 * C, 3 * C,
                   q + C + int64_t(b.col0) * 3 * C, 3 * C, 0.0f, scores + int64_t(b.row0) * T, T);
  }
};

at::Tensor checked_mask(const at::Tensor& mask, const at::Tensor& qkv) {
  if (!mask.defined()) return mask;
  const int64_t B = qkv.size(0), T = qkv.size(1);
  TORCH_CHECK(mask.dim() == 4 && (mask.size(0) == 1 || mask.size(0) == B) && mask.size(1) == 1 &&
                  (mask.size(2) == 1 || mask.size(2) == T) && mask.size(3) == T && mask.scalar_type() == at::kFloat &&
                  mask.is_cpu(),
              "fused_attention: mask must be the additive float [1 | B, 1, 1 | T, T] mask, got ", mask.sizes());
  return mask.stride(3) == 1 ? mask : mask.contiguous();
}

// The forward pass over all heads: y (float32 [B, T, C]) and each row's log-sum-exp, from qkv's elements x in the
// products' type (float: sgemm_; Bf16: the bf16 GEMM, the probabilities rounded to bf16 before P v).
template <class Operand>
void attention_forward(const Geometry& g, const std::vector<RowBlock>& blocks, const Operand* x,
                       const float* noise_all, float* out, float* lse_all) {
  at::parallel_for(0, g.heads, head_grain(g.heads), [&](int64_t begin, int64_t end) {
    const int64_t T = g.T, C = g.C;
    std::vector<float> scores(size_t(T) * T);
    std::vector<Operand> low(std::is_same<Operand, float>::value ? 0 : size_t(T) * T);
    for (int64_t bh = begin; bh < end; ++bh) {
      const Operand* v = x + g.qkv_offset(bh) + 2 * C;
      for (const auto& b : blocks) {
        float* s = scores.data() + b.row0 * T;
        g.scaled_scores(x, bh, b, scores.data());
        softmax_rows(s, b, g.mask_of(bh, b), g.mask_ld, lse_all + bh * T + b.row0);
        if (noise_all) multiply_rows(s, T, noise_all + (bh * T + b.row0) * T + b.col0, T, b.rows, b.cols);
        row_major_gemm(false, false, b.rows, g.D, b.cols, 1.0f, operand(s, b, low), T, v + b.col0 * 3 * C, 3 * C,
                       0.0f, out + g.out_offset(bh) + b.row0 * C, C);
      }
    }
  });
}

// The backward pass over all heads into dx (float32 [B, T, 3C]): x and dy_all (dL/dy) in the products' type, as
// attention_forward. `blocks` in reverse order (see FusedAttention::backward).
template <class Operand>
void attention_backward(const Geometry& g, const std::vector<RowBlock>& blocks, int window, const Operand* x,
                        const Operand* dy_all, const float* noise_all, const float* lse_all, float* dx) {
  at::parallel_for(0, g.heads, head_grain(g.heads), [&](int64_t begin, int64_t end) {
    const int64_t T = g.T, D = g.D, C = g.C, ld = 3 * C;
    std::vector<float> probs(size_t(T) * T), dprobs(size_t(T) * T);
    std::vector<Operand> low(std::is_same<Operand, float>::value ? 0 : size_t(T) * T);
    for (int64_t bh = begin; bh < end; ++bh) {
      const Operand *q = x + g.qkv_offset(bh), *k = q + C, *v = q + 2 * C, *dy_head = dy_all + g.out_offset(bh);
      float *dq = dx + g.qkv_offset(bh), *dk = dq + C, *dv = dq + 2 * C;
      if (window >= 0)
        for (int64_t t = 0; t < T; ++t) {
          std::fill(dk + t * ld, dk + t * ld + D, 0.0f);
          std::fill(dv + t * ld, dv + t * ld + D, 0.0f);
        }
      for (const auto& b : blocks) {
        const Operand* dy = dy_head + b.row0 * C;
        float *p = probs.data() + b.row0 * T, *dp = dprobs.data() + b.row0 * T;
        const float beta = b.cols == T && window < 0 ? 0.0f : 1.0f;
        const int64_t key0 = int64_t(b.col0) * ld;  // the block's first key row in qkv and its gradient
        g.scaled_scores(x, bh, b, probs.data());
        // With dropout y = (P * noise) v: dL/d(P * noise) = dy v^T, dL/dP = that * noise, and dv uses P * noise.
        const float* noise = noise_all ? noise_all + (bh * T + b.row0) * T + b.col0 : nullptr;
        row_major_gemm(false, true, b.rows, b.cols, D, 1.0f, dy, C, v + key0, ld, 0.0f, dp, T);
        if (noise) multiply_rows(dp, T, noise, T, b.rows, b.cols);
        softmax_backward_rows(p, dp, b, g.mask_of(bh, b), g.mask_ld, lse_all + bh * T + b.row0);
        if (noise) multiply_rows(p, T, noise, T, b.rows, b.cols);
        row_major_gemm(true, false, b.cols, D, b.rows, 1.0f, operand(p, b, low), T, dy, C, beta, dv + key0, ld);
        const Operand* ds = operand(dp, b, low);  // dL/dscores; P's rounded copy is used up
        row_major_gemm(false, false, b.rows, D, b.cols, g.scale, ds, T, k + key0, ld, 0.0f, dq + b.row0 * ld, ld);
        row_major_gemm(true, false, b.cols, D, b.rows, g.scale, ds, T, q + b.row0 * ld, ld, beta, dk + key0, ld);
      }
    }
  });
}


struct FusedAttention : torch::autograd::Function<FusedAttention> {
  // mask is an optional: LibTorch's custom functions take an undefined input only that way. bf16_products: the
  // products take bf16 operands (qkv, the probabilities and dy rounded), accumulating in float32.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& qkv, const c10::optional<at::Tensor>& mask,
                            int64_t n_head, const c10::optional<at::Tensor>& dropout_noise, bool causal,
                            int64_t window, bool bf16_products) {
    const at::Tensor m = mask.value_or(at::Tensor());
    const at::Tensor noise = dropout_noise.value_or(at::Tensor());
    const float* noise_all = noise.defined() ? noise.data_ptr<float>() : nullptr;
    const Geometry g(qkv, m, n_head);
    auto y = at::empty({g.B, g.T, g.C}, qkv.options());
    auto lse = at::empty({g.heads, g.T}, qkv.options());
    const auto blocks = g.row_blocks(causal, int(window), bf16_products);
    if (bf16_products) {
      // Only the rounded copy is kept for backward (half the float32 input's memory).
      const at::Tensor low = qkv.to(at::kBFloat16);
      attention_forward(g, blocks, bf16_bits(low), noise_all, y.data_ptr<float>(), lse.data_ptr<float>());
      ctx->saved_data["qkv_bf16"] = low;  // internal, like lse
    } else {
      attention_forward(g, blocks, qkv.data_ptr<float>(), noise_all, y.data_ptr<float>(), lse.data_ptr<float>());
      ctx->save_for_backward({qkv});
    }
    ctx->saved_data["lse"] = lse;  // internal, never differentiated
    if (m.defined()) ctx->saved_data["mask"] = m;  // a constant: no gradient, no version check needed
    if (noise.defined()) ctx->saved_data["noise"] = noise;  // internal, like lse
    ctx->saved_data["n_head"] = n_head;
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["window"] = window;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto low_found = ctx->saved_data.find("qkv_bf16");
    const bool bf16_products = low_found != ctx->saved_data.end();
    const at::Tensor qkv = bf16_products ? low_found->second.toTensor() : ctx->get_saved_variables()[0];
    const at::Tensor lse = ctx->saved_data["lse"].toTensor();
    const auto found = ctx->saved_data.find("mask");
    const at::Tensor mask = found == ctx->saved_data.end() ? at::Tensor() : found->second.toTensor();
    const auto noise_found = ctx->saved_data.find("noise");
    const float* noise_all =
        noise_found == ctx->saved_data.end() ? nullptr : noise_found->second.toTensor().data_ptr<float>();
    const Geometry g(qkv, mask, ctx->saved_data["n_head"].toInt());
    auto grad_qkv = at::empty(qkv.sizes(), qkv.options().dtype(at::kFloat));
    // Without a window, last block first: it spans every key column, so its dk and dv products (beta = 0)
    // initialise the whole head and the shorter blocks before it add to their leading rows. Windowed blocks span
    // overlapping column ranges: dk and dv start at zero and every block adds.
    const int window = int(ctx->saved_data["window"].toInt());
    auto blocks = g.row_blocks(ctx->saved_data["causal"].toBool(), window, bf16_products);
    std::reverse(blocks.begin(), blocks.end());
    if (bf16_products) {
      const at::Tensor grad_y = grads[0].to(at::kBFloat16).contiguous();
      attention_backward(g, blocks, window, bf16_bits(qkv), bf16_bits(grad_y), noise_all, lse.data_ptr<float>(),
                         grad_qkv.data_ptr<float>());
    } else {
      const at::Tensor grad_y = grads[0].contiguous();
      attention_backward(g, blocks, window, qkv.data_ptr<float>(), grad_y.data_ptr<float>(), noise_all,
                         lse.data_ptr<float>(), grad_qkv.data_ptr<float>());
    }
    return {grad_qkv, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

bool fused_attention_supported(const at::Tensor& qkv) {
  return qkv.is_cpu() && qkv.scalar_type() == at::kFloat && has_sgemm();
}

bool fused_attention_has_bf16_products() { return has_bf16_gemm(); }

at::Tensor attention_dropout_noise(int64_t heads, int64_t T, double p, const at::TensorOptions& options) {
  auto noise = at::empty({heads, T, T}, options);
  noise.bernoulli_(1 - p);
  noise.div_(1 - p);
  return noise;
}

at::Tensor fused_attention(const at::Tensor& qkv, const at::Tensor& mask, int64_t n_head, double dropout,
                           bool causal, int64_t window, at::ScalarType products) {
  TORCH_CHECK(fused_attention_supported(qkv), "fused_attention: needs a CPU float32 qkv and a loaded BLAS");
  TORCH_CHECK(qkv.dim() == 3 && qkv.size(2) % (3 * n_head) == 0, "fused_attention: qkv must be [B, T, 3C] with C ",
              "divisible by n_head = ", n_head, ", got ", qkv.sizes());
  TORCH_CHECK(qkv.size(1) <= std::numeric_limits<int>::max() && qkv.size(2) <= std::numeric_limits<int>::max(),
              "fused_attention: T and 3C must fit BLAS's int, got ", qkv.sizes());
  TORCH_CHECK(dropout >= 0 && dropout < 1, "fused_attention: dropout must be in [0, 1), got ", dropout);
  const at::Tensor m = checked_mask(mask, qkv);
  const at::Tensor noise =
      dropout > 0 ? attention_dropout_noise(qkv.size(0) * n_head, qkv.size(1), dropout, qkv.options()) : at::Tensor();
  TORCH_CHECK(window >= -1, "fused_attention: window must be >= 0, or -1 for none, got ", window);
  const int64_t w = std::min<int64_t>(window, qkv.size(1));  // a window past the sequence sees all of it
  TORCH_CHECK(products == at::kFloat || products == at::kBFloat16,
              "fused_attention: products must be float32 or bf16, got ", products);
  const bool bf16_products = products == at::kBFloat16 && fused_attention_has_bf16_products();
  return FusedAttention::apply(qkv.contiguous(), optional_input(m), n_head, optional_input(noise), causal, w,
                               bf16_products);
}

at::Tensor window_mask(int64_t T, int64_t window, const at::TensorOptions& options) {
  auto t = at::arange(T, options.dtype(at::kLong));
  auto outside = (t.view({T, 1}) - t.view({1, T})).abs() > window;
  return at::zeros({1, 1, T, T}, options).masked_fill(outside.view({1, 1, T, T}),
                                                      -std::numeric_limits<float>::infinity());
}

at::Tensor unfused_attention(const at::Tensor& qkv, const at::Tensor& mask, int64_t n_head, double dropout,
                             bool recompute) {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, H = n_head, D = C / H;
  // [B, T, 3, H, D] -> [3, B*H, T, D] in one copy, so q, k, v are contiguous [B*H, T, D] slices.
  auto heads = qkv.view({B, T, 3, H, D}).permute({2, 0, 3, 1, 4}).contiguous().view({3, B * H, T, D});
  at::Tensor y;
  if (recompute && dropout == 0) {
    y = attention_core(heads, mask, B);
  } else {
    auto probs = attention_probs(heads[0], heads[1], mask, B, 1.0 / std::sqrt(double(D)));
    y = at::bmm(at::dropout(probs, dropout, /*train=*/dropout > 0), heads[2]);
  }
  return y.view({B, H, T, D}).transpose(1, 2).reshape({B, T, C});
}

}  // namespace spread
