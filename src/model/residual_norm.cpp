#include "spread/model/residual_norm.h"

#include "spread/model/norm.h"
#include "spread/model/recompute.h"
#include "spread/runtime/vectorize.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>

namespace spread {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows per chunk: the chunks (and so the order of the column sums in backward) do not depend on the number of
// threads, so neither do a run's numbers.
constexpr int64_t kRowsPerChunk = 32;

// For `rows` rows of `cols`: h = x + a + a_bias, and n = (h - mean) * rstd * weight + bias with the row's mean and
// rstd = 1 / sqrt(biased variance + eps), which are kept for backward. Not centred (RMSNorm): mean 0, so rstd is
// 1 / sqrt(mean(h^2) + eps).
SPREAD_VECTOR_CLONES void residual_norm_rows(const float* x, const float* a, const float* a_bias, const float* weight,
                                             const float* bias, float eps, bool centred, float* h, float* n,
                                             float* mean, float* rstd, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols, *ar = a + r * cols;
    float *hr = h + r * cols, *nr = n + r * cols;
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < cols; ++j) {
      hr[j] = xr[j] + ar[j] + a_bias[j];
      sum += hr[j];
    }
    const float mu = centred ? sum / float(cols) : 0.0f;
    float squares = 0;  // two passes over a row in cache: no cancellation as in E[h^2] - mean^2
#pragma omp simd reduction(+ : squares)
    for (int64_t j = 0; j < cols; ++j) squares += (hr[j] - mu) * (hr[j] - mu);
    const float rs = 1.0f / std::sqrt(squares / float(cols) + eps);
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) nr[j] = (hr[j] - mu) * rs * weight[j] + bias[j];
    mean[r] = mu;
    rstd[r] = rs;
  }
}

// LayerNorm's backward plus the residual gradient: with xhat = (h - mean) * rstd and gy = g_n * weight,
// d_h = g_h + rstd * (gy - mean(gy) - xhat * mean(gy * xhat)); not centred (RMSNorm), the mean(gy) term goes with
// the mean. The column sums of g_n * xhat (weight), g_n (bias) and d_h (a_bias) are added to sums[0 | 1 | 2][cols].
// The sums are added in a loop of their own, after the row's d_h is written: in one loop with d_h's stores, the
// call took 0.36 ms in some runs and 1.6 ms in others on this VM (shape B); split, 0.32 and 0.85.
SPREAD_VECTOR_CLONES void residual_norm_backward_rows(const float* g_h, const float* g_n, const float* h,
                                                      const float* mean, const float* rstd, const float* weight,
                                                      bool centred, float* d_h, float* sums, int64_t rows,
                                                      int64_t cols) {
  float *d_weight = sums, *d_bias = sums + cols, *d_a_bias = sums + 2 * cols;
  for (int64_t r = 0; r < rows; ++r) {
    const float *ghr = g_h + r * cols, *gnr = g_n + r * cols, *hr = h + r * cols;
    float* dhr = d_h + r * cols;
    const float mu = mean[r], rs = rstd[r];
    float gy_sum = 0, gy_xhat_sum = 0;
#pragma omp simd reduction(+ : gy_sum, gy_xhat_sum)
    for (int64_t j = 0; j < cols; ++j) {
      const float gy = gnr[j] * weight[j];
      gy_sum += gy;
      gy_xhat_sum += gy * (hr[j] - mu) * rs;
    }
    const float gy_mean = centred ? gy_sum / float(cols) : 0.0f, gy_xhat_mean = gy_xhat_sum / float(cols);
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) {
      const float xhat = (hr[j] - mu) * rs;
      dhr[j] = ghr[j] + rs * (gnr[j] * weight[j] - gy_mean - xhat * gy_xhat_mean);
    }
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) {
      d_weight[j] += gnr[j] * ((hr[j] - mu) * rs);
      d_bias[j] += gnr[j];
      d_a_bias[j] += dhr[j];
    }
  }
}

struct ResidualNorm : torch::autograd::Function<ResidualNorm> {
  // a_bias and bias are optionals: LibTorch's custom functions take an undefined input only that way.
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& a,
                               const c10::optional<at::Tensor>& a_bias, const at::Tensor& weight,
                               const c10::optional<at::Tensor>& bias, double eps, bool centred) {
    const int64_t cols = weight.numel(), rows = x.numel() / cols;
    auto h = at::empty_like(x), n = at::empty_like(x);
    auto mean = at::empty({rows}, x.options()), rstd = at::empty({rows}, x.options());
    const at::Tensor zeros = at::zeros({cols}, x.options());
    const at::Tensor shift = a_bias ? *a_bias : zeros, norm_shift = bias ? *bias : zeros;
    const float *xp = x.data_ptr<float>(), *ap = a.data_ptr<float>(), *sp = shift.data_ptr<float>();
    const float *wp = weight.data_ptr<float>(), *bp = norm_shift.data_ptr<float>();
    float *hp = h.data_ptr<float>(), *np = n.data_ptr<float>(), *mp = mean.data_ptr<float>(),
          *rp = rstd.data_ptr<float>();
    at::parallel_for(0, rows, kRowsPerChunk, [&](int64_t r0, int64_t r1) {
      const int64_t o = r0 * cols;
      residual_norm_rows(xp + o, ap + o, sp, wp, bp, float(eps), centred, hp + o, np + o, mp + r0, rp + r0, r1 - r0,
                         cols);
    });
    ctx->save_for_backward({h, mean, rstd, weight});
    ctx->saved_data["has_a_bias"] = a_bias.has_value();
    ctx->saved_data["has_bias"] = bias.has_value();
    ctx->saved_data["centred"] = centred;
    return {h, n};
  }

  // Undefined output gradients arrive as zeros (LibTorch materialises them for custom functions).
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &h = saved[0], &mean = saved[1], &rstd = saved[2], &weight = saved[3];
    const at::Tensor g_h = grads[0].contiguous(), g_n = grads[1].contiguous();
    const int64_t cols = weight.numel(), rows = h.numel() / cols;
    const int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
    auto d_h = at::empty_like(h);
    auto partial = at::zeros({chunks, 3, cols}, h.options());  // per chunk: column sums for weight, bias, a_bias
    const float *ghp = g_h.data_ptr<float>(), *gnp = g_n.data_ptr<float>(), *hp = h.data_ptr<float>();
    const float *mp = mean.data_ptr<float>(), *rp = rstd.data_ptr<float>(), *wp = weight.data_ptr<float>();
    float *dp = d_h.data_ptr<float>(), *sp = partial.data_ptr<float>();
    const bool centred = ctx->saved_data["centred"].toBool();
    at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t r0 = c * kRowsPerChunk, r1 = std::min(rows, r0 + kRowsPerChunk), o = r0 * cols;
        residual_norm_backward_rows(ghp + o, gnp + o, hp + o, mp + r0, rp + r0, wp, centred, dp + o,
                                    sp + c * 3 * cols, r1 - r0, cols);
      }
    });
    const auto sums = partial.sum(0);
    const bool has_a_bias = ctx->saved_data["has_a_bias"].toBool(), has_bias = ctx->saved_data["has_bias"].toBool();
    return {d_h, d_h, has_a_bias ? sums[2] : at::Tensor(), sums[0], has_bias ? sums[1] : at::Tensor(), at::Tensor(),
            at::Tensor()};
  }
};

bool own_loops_apply(const at::Tensor& t) { return t.defined() && t.is_cpu() && t.scalar_type() == at::kFloat; }

}  // namespace

std::pair<at::Tensor, at::Tensor> residual_norm(const at::Tensor& x, const at::Tensor& a, const at::Tensor& a_bias,
                                                const at::Tensor& weight, const at::Tensor& bias, double eps,
                                                bool rms) {
  TORCH_CHECK(x.sizes() == a.sizes(), "residual_norm: x and a must have one shape, got ", x.sizes(), " and ",
              a.sizes());
  TORCH_CHECK(!(rms && bias.defined()), "residual_norm: RMSNorm has no bias");
  const bool own = own_loops_apply(x) && own_loops_apply(a) && own_loops_apply(weight) &&
                   (!bias.defined() || own_loops_apply(bias)) && (!a_bias.defined() || own_loops_apply(a_bias));
  if (!own) {
    auto h = a_bias.defined() ? x + a + a_bias : x + a;
    return {h, rms ? rms_norm(h, weight, eps) : at::layer_norm(h, {x.size(-1)}, weight, bias, eps)};
  }
  TORCH_CHECK(weight.numel() == x.size(-1) && (!bias.defined() || bias.numel() == x.size(-1)) &&
                  (!a_bias.defined() || a_bias.numel() == x.size(-1)),
              "residual_norm: weight, bias and a_bias must have the last dimension's size ", x.size(-1));
  auto contiguous_or_none = [](const at::Tensor& t) { return optional_input(t.defined() ? t.contiguous() : t); };
  auto out = ResidualNorm::apply(x.contiguous(), a.contiguous(), contiguous_or_none(a_bias), weight.contiguous(),
                                 contiguous_or_none(bias), eps, /*centred=*/!rms);
  return {out[0], out[1]};
}

std::pair<at::Tensor, at::Tensor> residual_layer_norm(const at::Tensor& x, const at::Tensor& a, const at::Tensor& a_bias,
                                                      const at::Tensor& weight, const at::Tensor& bias, double eps) {
  return residual_norm(x, a, a_bias, weight, bias, eps, /*rms=*/false);
}

}  // namespace spread
