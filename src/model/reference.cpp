#include "spread/model/reference.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace spread {
namespace {

using at::Tensor;

class ReferenceModel {
 public:
  ReferenceModel(const TransformerConfig& cfg, const ParameterMap& params) : cfg_(cfg), params_(params) {}

  ReferenceOutput forward(const Tensor& idx, const Tensor& valid) const {
    ReferenceOutput out;
    Tensor x = embeddings(idx);
    out.hidden.push_back(x);
    for (int64_t i = 0; i < cfg_.n_layer; ++i) {
      x = cfg_.norm.post ? post_norm_block(x, i, valid) : pre_norm_block(x, i, valid);
      out.hidden.push_back(x);
    }
    out.final_hidden = cfg_.norm.post ? x : norm(x, "ln_f");
    out.logits = logits(out.final_hidden);
    return out;
  }

 private:
  const Tensor& param(const std::string& name) const {
    const auto it = params_.find(name);
    if (it == params_.end()) throw std::invalid_argument("reference_forward: the model has no parameter " + name);
    return it->second;
  }
  bool has(const std::string& name) const { return params_.count(name) > 0; }

  // x W^T + b; `name` names the layer (blocks.0.attn.qkv), whose bias may be absent.
  Tensor linear(const Tensor& x, const std::string& name) const {
    Tensor y = at::matmul(x, param(name + ".weight").t());
    return has(name + ".bias") ? y + param(name + ".bias") : y;
  }

  // LayerNorm: (x - mean) / sqrt(var + eps) * weight (+ bias), var the biased variance over the features.
  // RMSNorm: x / sqrt(mean(x^2) + eps) * weight.
  Tensor norm(const Tensor& x, const std::string& name) const {
    const double eps = cfg_.norm.eps;
    Tensor y;
    if (cfg_.norm.rms) {
      y = x / at::sqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps);
    } else {
      const Tensor centred = x - x.mean(-1, /*keepdim=*/true);
      y = centred / at::sqrt(centred.pow(2).mean(-1, /*keepdim=*/true) + eps);
    }
    y = y * param(name + ".weight");
    return has(name + ".bias") ? y + param(name + ".bias") : y;
  }

  // GELU exactly, 0.5 x (1 + erf(x / sqrt 2)), or in GPT-2's tanh approximation.
  Tensor gelu(const Tensor& x) const {
    if (!cfg_.mlp.gelu_tanh) return 0.5 * x * (1.0 + at::erf(x / std::sqrt(2.0)));
    return 0.5 * x * (1.0 + at::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x.pow(3))));
  }
  Tensor mlp_activation(const Tensor& x) const { return cfg_.mlp.silu ? x * at::sigmoid(x) : gelu(x); }

  Tensor embeddings(const Tensor& idx) const {
    const int64_t T = idx.size(1);
    Tensor x = at::embedding(param("wte.weight"), idx);
    if (!cfg_.positions.rope) x = x + param("wpe.weight").narrow(0, 0, T);
    if (cfg_.compat.type_vocab_size > 0) x = x + param("wtt.weight")[0];  // one text: every token of type 0
    if (cfg_.norm.post || cfg_.norm.embedding) x = norm(x, "emb_norm");
    return x;
  }

  Tensor pre_norm_block(Tensor x, int64_t layer, const Tensor& valid) const {
    const std::string b = "blocks." + std::to_string(layer) + ".";
    const bool has_ln1 = layer > 0 || cfg_.norm.first_block;
    x = x + attention(has_ln1 ? norm(x, b + "ln1") : x, layer, valid);
    return x + mlp(norm(x, b + "ln2"), layer);
  }

  Tensor post_norm_block(Tensor x, int64_t layer, const Tensor& valid) const {
    const std::string b = "blocks." + std::to_string(layer) + ".";
    x = norm(x + attention(x, layer, valid), b + "ln1");
    return norm(x + mlp(x, layer), b + "ln2");
  }

  Tensor mlp(const Tensor& x, int64_t layer) const {
    const std::string b = "blocks." + std::to_string(layer) + ".mlp.";
    Tensor h = linear(x, b + "fc");
    if (cfg_.mlp.gated) {
      const int64_t width = h.size(-1) / 2;
      h = mlp_activation(h.narrow(-1, 0, width)) * h.narrow(-1, width, width);
    } else {
      h = mlp_activation(h);
    }
    return linear(h, b + "proj");
  }

  Tensor attention(const Tensor& x, int64_t layer, const Tensor& valid) const {
    const std::string b = "blocks." + std::to_string(layer) + ".attn.";
    const int64_t B = x.size(0), T = x.size(1), H = cfg_.n_head, K = cfg_.kv_heads(), D = cfg_.n_embd / H;
    const Tensor qkv = linear(x, b + "qkv");  // [B, T, (H + 2K) D]: q heads, k heads, v heads
    auto heads = [&](int64_t first, int64_t count) {
      return qkv.narrow(-1, first * D, count * D).view({B, T, count, D}).transpose(1, 2);  // [B, count, T, D]
    };
    Tensor q = heads(0, H), k = heads(H, K), v = heads(H + K, K);
    if (cfg_.positions.rope) {
      const auto [cos, sin] = rotary_angles(T, D, cfg_.rope_theta_of(layer), x.options());
      q = q * cos + rotate_half(q) * sin;
      k = k * cos + rotate_half(k) * sin;
    }
    k = k.repeat_interleave(H / K, /*dim=*/1);  // query head h reads k/v head h / (H / K)
    v = v.repeat_interleave(H / K, /*dim=*/1);
    const Tensor scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(D));  // [B, H, T, T]
    // A query that may see no key (a padding position) gets a row of NaN from softmax; it is made zero, so that
    // it cannot reach the valid rows through the next layer's P v (0 * NaN).
    const Tensor probs =
        at::softmax(
            scores.masked_fill(visible(T, layer, valid).logical_not(), -std::numeric_limits<double>::infinity()), -1)
            .nan_to_num(0.0);
    const Tensor y = at::matmul(probs, v).transpose(1, 2).reshape({B, T, H * D});
    return linear(y, b + "proj");
  }

  // [B | 1, 1, T, T] bool: query t may see key s.
  Tensor visible(int64_t T, int64_t layer, const Tensor& valid) const {
    const auto positions = at::arange(T, at::kLong);
    const Tensor t = positions.view({T, 1}), s = positions.view({1, T});
    Tensor mask = at::ones({T, T}, at::kBool);
    if (cfg_.causal) mask = mask.logical_and(s <= t);
    if (cfg_.is_local(layer)) mask = mask.logical_and((t - s).abs() <= cfg_.attention.window / 2);
    mask = mask.view({1, 1, T, T}).to(valid.defined() ? valid.device() : mask.device());
    return valid.defined() ? mask.logical_and(valid.view({valid.size(0), 1, 1, T})) : mask;
  }

  // cos and sin [T, D] of the angles t / base^(2j / D) of positions t, for j < D/2, repeated for both halves.
  static std::pair<Tensor, Tensor> rotary_angles(int64_t T, int64_t D, double base, const at::TensorOptions& options) {
    const Tensor inv_freq = 1.0 / at::pow(base, at::arange(0, D, 2, options) / double(D));
    const Tensor angles = at::outer(at::arange(T, options), inv_freq);
    const Tensor both = at::cat({angles, angles}, -1);
    return {both.cos(), both.sin()};
  }

  // (x1, x2) -> (-x2, x1) for the halves of the last dimension: dimension i < D/2 turns with i + D/2.
  static Tensor rotate_half(const Tensor& x) {
    const int64_t half = x.size(-1) / 2;
    return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  }

  Tensor logits(const Tensor& final_hidden) const {
    Tensor h = final_hidden;
    if (cfg_.compat.mlm_transform) h = norm(gelu(linear(h, "mlm_dense")), "mlm_norm");
    const Tensor& output = cfg_.compat.tie_embeddings ? param("wte.weight") : param("lm_head.weight");
    const Tensor y = at::matmul(h, output.t());
    return has("mlm_bias") ? y + param("mlm_bias") : y;
  }

  const TransformerConfig& cfg_;
  const ParameterMap& params_;
};

}  // namespace

ReferenceOutput reference_forward(const TransformerConfig& cfg, const ParameterMap& params, const at::Tensor& idx,
                                  const at::Tensor& key_padding) {
  return ReferenceModel(cfg, params).forward(idx, key_padding);
}

at::Tensor reference_token_vectors(const ParameterMap& params, const at::Tensor& final_hidden) {
  const auto it = params.find("head.weight");
  if (it == params.end())
    throw std::invalid_argument("reference_token_vectors: the model has no parameter head.weight");
  const at::Tensor v = at::matmul(final_hidden, it->second.t());
  return v / v.norm(2, -1, /*keepdim=*/true).clamp_min(1e-12);
}

}  // namespace spread
