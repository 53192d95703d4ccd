#include "spread/model/transformer.h"

#include "spread/model/attention.h"
#include "spread/model/direct_linear.h"
#include "spread/model/recompute.h"
#include "spread/model/residual_norm.h"
#include "spread/model/rotary.h"
#include "spread/runtime/packed_linear.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/dropout.h>
#include <torch/nn/functional/normalization.h>
#include <torch/nn/init.h>

#include <cmath>
#include <limits>
#include <tuple>

namespace spread {
namespace {

torch::nn::Linear make_linear(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

// An embedding table; with WeightInit::none its rows are left as allocated (torch::nn::Embedding draws N(0, 1)
// otherwise).
torch::nn::Embedding make_embedding(int64_t rows, int64_t width, WeightInit init) {
  torch::nn::EmbeddingOptions options(rows, width);
  if (init == WeightInit::none) options._weight(torch::empty({rows, width}));
  return torch::nn::Embedding(options);
}

Norm make_norm(const TransformerConfig& cfg) {
  NormOptions o;
  o.dim = cfg.n_embd;
  o.eps = cfg.norm.eps;
  o.rms = cfg.norm.rms;
  o.bias = cfg.norm.bias;
  return Norm(o);
}

torch::Tensor activation(const torch::Tensor& x, bool gelu_tanh) {
  return gelu_tanh ? at::gelu(x, "tanh") : at::gelu(x);
}

torch::Tensor maybe_dropout(const torch::Tensor& x, double p, bool training) {
  // Skipping the call at p = 0 saves an operator (and an allocation) per site and step.
  return (p > 0 && training) ? torch::dropout(x, p, training) : x;
}

// {h, norm(h)} for h = x + a + a_bias, as one node (model/residual_norm.h).
std::pair<torch::Tensor, torch::Tensor> add_and_norm(const torch::Tensor& x, const torch::Tensor& a,
                                                     const torch::Tensor& a_bias, const Norm& norm) {
  return residual_norm(x, a, a_bias, norm->weight, norm->bias, norm->options().eps, norm->options().rms);
}

}  // namespace

PackedRows PackedRows::of(const torch::Tensor& key_padding) {
  PackedRows packed;
  if (!key_padding.defined() || !key_padding.device().is_cpu()) return packed;
  const int64_t positions = key_padding.numel();
  auto index = key_padding.reshape({-1}).nonzero().squeeze(1);
  // At this share of padding the gathers and scatters around each attention cost what the padded rows did in a
  // forward pass (a training step already gains 7%; docs/benchmarks.md); below it they were not measured.
  if (positions - index.numel() < kMinPaddedShare * double(positions)) return packed;
  packed.index = index;
  packed.batch = key_padding.size(0);
  packed.length = key_padding.size(1);
  return packed;
}

torch::Tensor PackedRows::pad(const torch::Tensor& rows) const {
  const int64_t width = rows.size(-1);
  return torch::zeros({batch * length, width}, rows.options())
      .index_copy(0, index, rows)
      .view({batch, length, width});
}

torch::Tensor PackedRows::unpad(const torch::Tensor& padded) const {
  return padded.reshape({batch * length, padded.size(-1)}).index_select(0, index);
}

torch::Tensor mixed_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                           at::ScalarType dtype, bool training) {
  // On the CPU the products go to the GEMMs of model/direct_linear.h where the process has them.
  if (takes_direct_gemm(x, dtype, training)) return direct_linear(x, weight, bias, dtype);
  // float32 inference (no gradient wanted): the weight packed once (runtime/packed_linear.h).
  if (takes_packed_linear(x, weight, dtype, training)) return packed_linear(x, weight, bias);
  // A 16-bit model (every parameter converted) or a float32 product: LibTorch's linear as it is.
  if (dtype == at::kFloat || x.scalar_type() != at::kFloat) return at::linear(x, weight, bias);
  // Elsewhere the product's output is rounded to `dtype` once (oneDNN accumulates in float32) and widened back: what
  // follows (bias, residual adds, LayerNorm, GELU, attention) sees float32. The bias is added after the cast so
  // that its gradient is a float32 sum over the batch.
  auto y = at::linear(x.to(dtype), weight.to(dtype)).to(x.scalar_type());
  return bias.defined() ? y + bias : y;
}

SelfAttentionImpl::SelfAttentionImpl(const TransformerConfig& cfg, int64_t layer)
    : n_head_(cfg.n_head),
      n_kv_head_(cfg.kv_heads()),
      window_(cfg.is_local(layer) ? cfg.attention.window / 2 : -1),
      causal_(cfg.causal),
      recompute_(cfg.recompute),
      rope_(cfg.positions.rope),
      dropout_(cfg.dropout),
      matmul_dtype_(cfg.matmul_dtype),
      rope_theta_(cfg.rope_theta_of(layer)) {
  const int64_t head_size = cfg.n_embd / cfg.n_head;
  qkv = register_module("qkv", make_linear(cfg.n_embd, (cfg.n_head + 2 * n_kv_head_) * head_size, cfg.bias));
  proj = register_module("proj", make_linear(cfg.n_embd, cfg.n_embd, cfg.bias));
}

std::pair<torch::Tensor, torch::Tensor> SelfAttentionImpl::rope_tables(int64_t T, const torch::Device& device) const {
  // As transformers computes them: float32 inverse frequencies, an outer product with the positions, the angles
  // repeated for both halves.
  const int64_t head_size = proj->weight.size(1) / n_head_;
  auto on = torch::TensorOptions(device);
  auto powers = torch::pow(rope_theta_, torch::arange(0, head_size, 2, on.dtype(torch::kLong)).to(torch::kFloat) /
                                            double(head_size));
  auto inv_freq = torch::ones_like(powers) / powers;
  auto angles = torch::outer(torch::arange(T, on.dtype(torch::kLong)).to(torch::kFloat), inv_freq);
  auto both = torch::cat({angles, angles}, -1).unsqueeze(1);  // [T, 1, D]
  return {both.cos(), both.sin()};
}

torch::Tensor SelfAttentionImpl::rotate_and_expand(const torch::Tensor& qkv_out) const {
  torch::Tensor cos, sin;  // undefined without rope: the grouped-query repetition only
  if (rope_) std::tie(cos, sin) = rope_tables(qkv_out.size(1), qkv_out.device());
  return rotate_and_repeat_heads(qkv_out, cos, sin, n_head_, n_kv_head_);
}

torch::Tensor SelfAttentionImpl::local_mask(const torch::Tensor& mask, int64_t T) const {
  auto band = window_mask(T, window_, qkv->weight.options());
  if (!mask.defined()) return band;
  // A padding query far from every valid key would see nothing, and softmax's NaN in its row would reach the valid
  // rows of the next layer (0 * NaN in P v): it sees itself instead (the fused kernel gives such rows 0). Valid
  // queries see no padding either way.
  auto m = (mask + band).clone();
  m.diagonal(0, -2, -1).zero_();
  return m;
}

torch::Tensor SelfAttentionImpl::attention_mask(const torch::Tensor& key_padding, int64_t T) const {
  // Built for this T, once per forward pass: a [block, block] table kept per layer would cost block^2 floats each,
  // 256 MiB per layer at ModernBERT's and SmolLM's 8192 positions.
  const auto options = qkv->weight.options();
  torch::Tensor mask;
  if (causal_)
    mask = torch::full({T, T}, -std::numeric_limits<float>::infinity(), options).triu(1).view({1, 1, T, T});
  if (!key_padding.defined()) return mask;
  const int64_t B = key_padding.size(0);
  auto pad = torch::zeros({B, 1, 1, T}, options)
                 .masked_fill(key_padding.logical_not().view({B, 1, 1, T}), -std::numeric_limits<float>::infinity());
  return mask.defined() ? mask + pad : pad;
}

torch::Tensor SelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& mask, bool add_proj_bias,
                                         const PackedRows& packed) {
  TORCH_CHECK(!mask.defined() || mask.dim() == 4,
              "SelfAttention: mask must be the additive 4-D mask of attention_mask(), not key padding");
  auto qkv_out = mixed_linear(x, qkv->weight, qkv->bias, matmul_dtype_, is_training());  // [B, T, 3C], float32
  if (packed) qkv_out = packed.pad(qkv_out);
  if (rope_ || n_kv_head_ != n_head_) qkv_out = rotate_and_expand(qkv_out);
  const double attention_dropout = is_training() ? dropout_ : 0.0;
  torch::Tensor y;
  if (fused_attention_supported(qkv_out)) {
    y = fused_attention(qkv_out, mask, n_head_, attention_dropout, causal_, window_, matmul_dtype_);
  } else {
    y = unfused_attention(qkv_out, window_ < 0 ? mask : local_mask(mask, qkv_out.size(1)), n_head_,
                          attention_dropout, recompute_);
  }
  if (packed) y = packed.unpad(y);
  return maybe_dropout(mixed_linear(y, proj->weight, add_proj_bias ? proj->bias : torch::Tensor(), matmul_dtype_,
                                    is_training()),
                       dropout_, is_training());
}

MlpImpl::MlpImpl(const TransformerConfig& cfg)
    : dropout_(cfg.dropout),
      recompute_(cfg.recompute),
      gelu_tanh_(cfg.mlp.gelu_tanh),
      gated_(cfg.mlp.gated),
      silu_(cfg.mlp.silu),
      matmul_dtype_(cfg.matmul_dtype) {
  fc = register_module("fc", make_linear(cfg.n_embd, (gated_ ? 2 : 1) * cfg.mlp_width(), cfg.bias));
  proj = register_module("proj", make_linear(cfg.mlp_width(), cfg.n_embd, cfg.bias));
}

// What the MLP computes is model/reference.cpp's mlp(); this picks the kernel that computes it: a node that
// recomputes the gated product or the exact GELU in backward instead of keeping it, or plain operators.
torch::Tensor MlpImpl::forward(const torch::Tensor& x, bool add_proj_bias) {
  const torch::Tensor proj_bias = add_proj_bias ? proj->bias : torch::Tensor();
  torch::Tensor y;
  if (gated_ && recompute_ && (silu_ || !gelu_tanh_)) {  // SwiGLU, GeGLU: the gated product is recomputed
    y = gated_linear(mixed_linear(x, fc->weight, fc->bias, matmul_dtype_, is_training()), proj->weight, proj_bias,
                     silu_, matmul_dtype_, is_training());
  } else if (gated_ || silu_) {
    auto h = mixed_linear(x, fc->weight, fc->bias, matmul_dtype_, is_training());
    auto act = [&](const torch::Tensor& t) { return silu_ ? at::silu(t) : activation(t, gelu_tanh_); };
    if (gated_) {
      const int64_t width = h.size(-1) / 2;
      h = act(h.narrow(-1, 0, width)) * h.narrow(-1, width, width);
    } else {
      h = act(h);
    }
    y = mixed_linear(h, proj->weight, proj_bias, matmul_dtype_, is_training());
  } else if (recompute_ && !gelu_tanh_) {  // fc's bias is added (and its gradient summed) inside the GELU node's loops
    y = gelu_linear(mixed_linear(x, fc->weight, {}, matmul_dtype_, is_training()), proj->weight, proj_bias,
                    matmul_dtype_, fc->bias, is_training());
  } else {
    // The tanh GELU (imported GPT-2s) keeps its activation for backward: gelu_linear recomputes the exact one only.
    const bool training = is_training();
    y = mixed_linear(activation(mixed_linear(x, fc->weight, fc->bias, matmul_dtype_, training), gelu_tanh_),
                     proj->weight, proj_bias, matmul_dtype_, training);
  }
  return maybe_dropout(y, dropout_, is_training());
}

BlockImpl::BlockImpl(const TransformerConfig& cfg, int64_t layer) : dropout_(cfg.dropout) {
  if (layer > 0 || cfg.norm.first_block) ln1 = register_module("ln1", make_norm(cfg));
  attn = register_module("attn", SelfAttention(cfg, layer));
  ln2 = register_module("ln2", make_norm(cfg));
  mlp = register_module("mlp", Mlp(cfg));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  auto h = x + attn->forward(ln1.is_empty() ? x : ln1->forward(x), mask);
  return h + mlp->forward(ln2->forward(h));
}

std::pair<torch::Tensor, torch::Tensor> BlockImpl::forward_fused(const torch::Tensor& x, const torch::Tensor& x_normed,
                                                                 const torch::Tensor& mask, const Norm& next_norm,
                                                                 const PackedRows& packed) {
  // A branch's output bias moves into the residual add unless dropout comes between them.
  const bool fold = !(dropout_ > 0 && is_training());
  auto [h, h_normed] = add_and_norm(x, attn->forward(x_normed, mask, !fold, packed),
                                    fold ? attn->proj->bias : torch::Tensor(), ln2);
  return add_and_norm(h, mlp->forward(h_normed, !fold), fold ? mlp->proj->bias : torch::Tensor(), next_norm);
}

torch::Tensor BlockImpl::forward_post(const torch::Tensor& x, const torch::Tensor& mask, const PackedRows& packed) {
  const bool fold = !(dropout_ > 0 && is_training());
  auto h = add_and_norm(x, attn->forward(x, mask, !fold, packed), fold ? attn->proj->bias : torch::Tensor(), ln1)
               .second;
  return add_and_norm(h, mlp->forward(h, !fold), fold ? mlp->proj->bias : torch::Tensor(), ln2).second;
}

TransformerImpl::TransformerImpl(const TransformerConfig& cfg, WeightInit init) : cfg_(cfg) {
  TORCH_CHECK(cfg.n_head % cfg.kv_heads() == 0, "n_head ", cfg.n_head, " is not a multiple of n_kv_head ",
              cfg.kv_heads());
  TORCH_CHECK(!cfg.positions.rope || (cfg.n_embd / cfg.n_head) % 2 == 0, "rope needs an even head size");
  TORCH_CHECK(cfg.norm.first_block || !cfg.norm.post, "a post-norm block 0 needs its norm (first_block_norm)");
  TORCH_CHECK(cfg.attention.window >= 0 && cfg.attention.global_every >= 0,
              "attention_window and global_every must be >= 0");
  wte = register_module("wte", make_embedding(cfg.vocab_size, cfg.n_embd, init));
  if (!cfg.positions.rope) wpe = register_module("wpe", make_embedding(cfg.block_size, cfg.n_embd, init));
  drop_ = register_module("drop", torch::nn::Dropout(cfg.dropout));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < cfg.n_layer; ++i) blocks->push_back(Block(cfg, i));
  if (!cfg.norm.post) ln_f = register_module("ln_f", make_norm(cfg));
  // Registered last, so the other parameters draw the same initial values with and without a head (and
  // without the options of imported models).
  if (cfg.head_dim > 0)
    head = register_module("head", torch::nn::Linear(torch::nn::LinearOptions(cfg.n_embd, cfg.head_dim).bias(false)));
  if (cfg.compat.type_vocab_size > 0)
    wtt = register_module("wtt", make_embedding(cfg.compat.type_vocab_size, cfg.n_embd, init));
  if (cfg.norm.post || cfg.norm.embedding) emb_norm = register_module("emb_norm", make_norm(cfg));
  if (cfg.compat.mlm_transform) {
    mlm_dense = register_module("mlm_dense", make_linear(cfg.n_embd, cfg.n_embd, cfg.compat.mlm_dense_bias));
    mlm_norm = register_module("mlm_norm", make_norm(cfg));
    mlm_bias = register_parameter("mlm_bias", torch::zeros({cfg.vocab_size}));
  }
  if (!cfg.compat.tie_embeddings) lm_head = register_module("lm_head", make_linear(cfg.n_embd, cfg.vocab_size, false));
  if (init == WeightInit::random) init_weights();
}

torch::Tensor TransformerImpl::token_vectors(const torch::Tensor& final_hidden) {
  TORCH_CHECK(!head.is_empty(), "token_vectors needs a model with head_dim > 0");
  auto v = mixed_linear(final_hidden, head->weight, {}, cfg_.matmul_dtype, is_training());
  if (v.element_size() < 4) v = v.to(torch::kFloat);  // bf16 / fp16 models score in float32
  return torch::nn::functional::normalize(v, torch::nn::functional::NormalizeFuncOptions().dim(-1).eps(1e-12));
}

void TransformerImpl::init_weights() {
  torch::NoGradGuard no_grad;
  // N(0, 0.02) everywhere; residual output projections scaled by 1/sqrt(2 * n_layer) (GPT-2).
  const double residual_std = 0.02 / std::sqrt(2.0 * cfg_.n_layer);
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    auto& p = item.value();
    if (p.dim() < 2) {
      if (name.find("ln") == std::string::npos && name.find("norm") == std::string::npos)
        p.zero_();  // biases; LayerNorm keeps weight 1, bias 0
      continue;
    }
    bool residual_out = name.size() > 11 && name.compare(name.size() - 11, 11, "proj.weight") == 0 &&
                        name.find("qkv") == std::string::npos;
    torch::nn::init::normal_(p, 0.0, residual_out ? residual_std : 0.02);
  }
}

// The forward pass of model/reference.cpp, computed the fast way: each block's residual add fused with the norm
// after it, padding packed out of the token-wise work, the output bias folded into the residual add.
TransformerOutput TransformerImpl::forward(const torch::Tensor& idx, bool want_hidden, bool want_logits,
                                           const torch::Tensor& key_padding, bool pack_padding) {
  const int64_t T = idx.size(1);
  TORCH_CHECK(T <= cfg_.block_size, "sequence of length ", T, " exceeds block_size ", cfg_.block_size);
  auto x = wpe.is_empty() ? wte->forward(idx) : wte->forward(idx) + wpe->weight.narrow(0, 0, T);
  if (!wtt.is_empty()) x = x + wtt->weight[0];  // every position is of type 0, as a single text is in BERT
  if (!emb_norm.is_empty()) x = emb_norm->forward(x);
  x = maybe_dropout(x, cfg_.dropout, is_training());
  TransformerOutput out;
  if (want_hidden) out.hidden.push_back(x);
  const int64_t n_blocks = int64_t(blocks->size());
  auto block = [&](int64_t i) { return blocks[i]->as<Block>(); };
  const auto mask = n_blocks == 0 ? torch::Tensor() : block(0)->attn->attention_mask(key_padding, T);
  const PackedRows packed = n_blocks > 0 && pack_padding ? PackedRows::of(key_padding) : PackedRows();
  if (packed) x = packed.unpad(x);
  auto padded = [&](const torch::Tensor& rows) { return packed ? packed.pad(rows) : rows; };
  if (cfg_.norm.post) {
    for (int64_t i = 0; i < n_blocks; ++i) {
      x = block(i)->forward_post(x, mask, packed);
      if (want_hidden) out.hidden.push_back(padded(x));
    }
    out.final_hidden = padded(x);
    if (want_logits) out.logits = output_logits(out.final_hidden);
    return out;
  }
  // Each block's residual stream arrives with its LayerNorm already applied: the previous block computed the
  // norm in the same pass as its last residual add (residual_norm.h).
  auto normed = n_blocks == 0                  ? ln_f->forward(x)
                : block(0)->ln1.is_empty() ? x
                                           : block(0)->ln1->forward(x);
  for (int64_t i = 0; i < n_blocks; ++i) {
    std::tie(x, normed) =
        block(i)->forward_fused(x, normed, mask, i + 1 < n_blocks ? block(i + 1)->ln1 : ln_f, packed);
    if (want_hidden) out.hidden.push_back(padded(x));
  }
  out.final_hidden = padded(normed);
  if (want_logits) out.logits = output_logits(out.final_hidden);
  return out;
}

torch::Tensor TransformerImpl::output_logits(const torch::Tensor& final_hidden) {
  torch::Tensor h = final_hidden;
  if (!mlm_dense.is_empty())
    h = mlm_norm->forward(activation(
        mixed_linear(h, mlm_dense->weight, mlm_dense->bias, cfg_.matmul_dtype, is_training()), cfg_.mlp.gelu_tanh));
  // The output matrix (tied: the embedding); the logits are float32 for the loss whatever the product's dtype.
  return mixed_linear(h, lm_head.is_empty() ? wte->weight : lm_head->weight, mlm_bias, cfg_.matmul_dtype,
                      is_training());
}

torch::Tensor TransformerImpl::lm_loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  return torch::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}), {},
                                   at::Reduction::Mean, /*ignore_index=*/-1);
}

int64_t TransformerImpl::num_parameters(bool exclude_positions) const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  if (exclude_positions && !wpe.is_empty()) n -= wpe->weight.numel();
  return n;
}

double flops_per_token(const TransformerConfig& cfg, int64_t n_params) {
  return 6.0 * double(n_params) + 12.0 * cfg.n_layer * cfg.n_embd * cfg.block_size;
}

}  // namespace spread
