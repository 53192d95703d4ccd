#pragma once
// One transformer for every objective (docs/design.md §9), as the trainer runs it: the shape is a
// TransformerConfig (model/config.h), what each option computes is written plainly in model/reference.h, and this
// module computes the same up to float rounding through the CPU fast paths (fused attention, residual adds fused
// with the next norm, recomputing MLP nodes, direct and packed GEMMs, padding packed out). The forward pass can hand
// back every layer's hidden states so that losses and diagnostics work on them.
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <utility>
#include <vector>

#include "spread/model/config.h"
#include "spread/model/norm.h"

namespace spread {

// y = x W^T + b with the product in `dtype`: for kFloat float32; for kBFloat16, x and W rounded to bf16 and the
// product accumulated in float32. On the CPU, where the process has the GEMMs, model/direct_linear.h runs them (bf16
// products written in float32 with the bias; float32 ones by oneDNN's sgemm where `training`: the calling module is
// in training mode). A float32 product in inference (not `training`, grad mode off) takes the weight packed once
// (runtime/packed_linear.h) where the build has it. Elsewhere LibTorch's linear; in bf16 its bf16 mm rounds the
// product to bf16, it is widened back to float32 and the bias added in float32. dW and dx are products in `dtype`
// the same way; db is a float32 sum. bias may be undefined.
torch::Tensor mixed_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                           at::ScalarType dtype, bool training = false);

// The valid tokens of a right- or left-padded batch as rows: an encoder runs everything that works token by token
// (the linear layers, norms, the MLP) on these N rows only, and pads them back to [B, T, ..] around attention.
// A batch of short queries padded to its longest one is a quarter padding, and the matmuls are most of the step.
struct PackedRows {
  torch::Tensor index;  // [N] int64: b * T + t of each valid token, in batch order; undefined = not packed
  int64_t batch = 0, length = 0;
  // The packing of key_padding ([B, T] bool, true = valid) when it pays: a CPU batch with at least
  // kMinPaddedShare of its positions padding. Otherwise (also for undefined key_padding) an unpacked one.
  static PackedRows of(const torch::Tensor& key_padding);
  static constexpr double kMinPaddedShare = 0.125;
  explicit operator bool() const { return index.defined(); }
  torch::Tensor pad(const torch::Tensor& rows) const;     // [N, W] -> [B, T, W], zeros at the padding
  torch::Tensor unpad(const torch::Tensor& padded) const;  // [B, T, W] -> [N, W]
};

// Multi-head self-attention with one fused QKV projection and an additive mask. On CPU float32 with LibTorch's BLAS
// visible (with or without attention dropout) the attention is one fused autograd node over the
// projection's output (model/attention.h); elsewhere LibTorch operators, with cfg.recompute one node that keeps
// no [B*H, T, T] tensor.
class SelfAttentionImpl : public torch::nn::Module {
 public:
  // layer: the block's index, which decides local or global attention and the rotary base (cfg.is_local).
  explicit SelfAttentionImpl(const TransformerConfig& cfg, int64_t layer = 0);
  // x: [B, T, C]; mask: attention_mask(...) of this batch, or undefined when nothing is masked.
  // add_proj_bias = false leaves proj's bias out, for a caller that adds it itself (the block's residual add).
  // packed: x is packed rows [N, C] (PackedRows), padded for the attention and packed again after it.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask = {}, bool add_proj_bias = true,
                        const PackedRows& packed = {});
  // The additive mask [1 | B, 1, T, T] (0 = attend, -inf = masked) for key_padding ([B, T] bool, true = valid,
  // or undefined) and this module's causality; undefined when nothing is masked. Built once per forward pass
  // and shared by the layers.
  torch::Tensor attention_mask(const torch::Tensor& key_padding, int64_t T) const;

  torch::nn::Linear qkv{nullptr}, proj{nullptr};  // qkv's rows: q of every head, then k and v of the kv heads

 private:
  // [B, T, 3C] as the attention kernels take it from the projection's [B, T, (H + 2 K) D]: q and k rotated (RoPE),
  // k and v repeated to every query head of their group (grouped-query attention).
  torch::Tensor rotate_and_expand(const torch::Tensor& qkv_out) const;
  // cos and sin of the rotary angles of positions 0..T-1, [T, 1, D] float32 on `device`. Computed per forward pass
  // rather than kept: a table of every position in every layer cost block * D * 8 bytes each (64 MiB per layer at
  // Llama 3's 131,072 positions), and recomputing T * D angles is noise against the layer's matmuls.
  std::pair<torch::Tensor, torch::Tensor> rope_tables(int64_t T, const torch::Device& device) const;
  // The unfused path's mask of a local layer: `mask` (attention_mask's, or undefined) within the window, [.., T, T].
  torch::Tensor local_mask(const torch::Tensor& mask, int64_t T) const;
  int64_t n_head_, n_kv_head_;
  int64_t window_;  // >= 0: local attention's half width; -1: global
  bool causal_, recompute_, rope_;
  double dropout_;
  at::ScalarType matmul_dtype_;
  double rope_theta_;  // this layer's rotary base (the local one on local layers); used when rope_
};
TORCH_MODULE(SelfAttention);

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const TransformerConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x, bool add_proj_bias = true);  // add_proj_bias as SelfAttention's
  torch::nn::Linear fc{nullptr}, proj{nullptr};  // gated: fc's rows are [gate; up]

 private:
  double dropout_;
  bool recompute_, gelu_tanh_, gated_, silu_;
  at::ScalarType matmul_dtype_;
};
TORCH_MODULE(Mlp);

class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const TransformerConfig& cfg, int64_t layer = 0);
  // x + attn(ln1(x)) + mlp(ln2(...)), module by module; mask as SelfAttention's.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask = {});
  // The same block as the model runs it: x_normed = ln1(x) (computed by the previous block's last residual add),
  // and {output, next_norm(output)}, each residual add fused with the LayerNorm after it and the branch's output
  // bias (model/residual_norm.h). Equal to forward() up to float rounding.
  // x and x_normed may be packed rows (packed as SelfAttention's).
  std::pair<torch::Tensor, torch::Tensor> forward_fused(const torch::Tensor& x, const torch::Tensor& x_normed,
                                                        const torch::Tensor& mask, const Norm& next_norm,
                                                        const PackedRows& packed = {});
  // A post-norm block (BERT): ln2(h + mlp(h)) for h = ln1(x + attn(x)), each add fused with its norm.
  torch::Tensor forward_post(const torch::Tensor& x, const torch::Tensor& mask, const PackedRows& packed = {});
  Norm ln1{nullptr}, ln2{nullptr};  // ln1: none in block 0 without cfg.first_block_norm
  SelfAttention attn{nullptr};
  Mlp mlp{nullptr};

 private:
  double dropout_;
};
TORCH_MODULE(Block);

struct TransformerOutput {
  torch::Tensor logits;               // [B, T, V]; undefined when not requested
  std::vector<torch::Tensor> hidden;  // n_layer + 1 entries when requested: 0 = embeddings, i = block i output
  torch::Tensor final_hidden;         // last block output after the final LayerNorm: [B, T, C]
};

// How a new model's parameters start. `none` leaves the matrices and embeddings as allocated (LibTorch's own
// Linear initialisation aside), for a caller that overwrites every parameter next: loading a checkpoint or model
// folder, where the random draws cost 0.17 s of a MiniLM-sized `spread encode --model` and nothing else.
enum class WeightInit { random, none };

class TransformerImpl : public torch::nn::Module {
 public:
  // Parameter names (named_parameters) are spread's checkpoint keys: wte, wpe, blocks.I.{ln1,attn.qkv,attn.proj,
  // ln2,mlp.fc,mlp.proj}, ln_f, head, for the BERT options wtt, emb_norm, mlm_dense, mlm_norm, mlm_bias, and
  // lm_head for an untied output matrix.
  explicit TransformerImpl(const TransformerConfig& cfg, WeightInit init = WeightInit::random);

  // idx: [B, T] int64 token ids, T <= block_size. key_padding: [B, T] bool (true = valid) or undefined.
  // pack_padding: the caller reads nothing at the padding positions, so a batch with enough padding may run its
  // blocks on the valid tokens only (PackedRows); hidden states and logits are then zero (logits: the output bias)
  // there. False for callers that read outputs at key-masked positions (ColBERT's expanded queries).
  TransformerOutput forward(const torch::Tensor& idx, bool want_hidden = false, bool want_logits = true,
                            const torch::Tensor& key_padding = {}, bool pack_padding = false);

  // Vocabulary logits [.., V] of final hidden states [.., C]: the MLM transform when the model has one, the tied
  // embedding, the decoder bias when there is one. What forward's logits are; the MLM loss calls it on the
  // chosen positions only.
  torch::Tensor output_logits(const torch::Tensor& final_hidden);

  // Mean cross-entropy of next-token prediction, the LM's training loss (targets: [B, T], -1 = ignore).
  static torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets);

  // Multi-vector token vectors (ColBERT): the head applied to final hidden states [.., C], each row L2-normalised
  // (norm floored at 1e-12): [.., head_dim], float32 for 16-bit models. Needs config().head_dim > 0.
  torch::Tensor token_vectors(const torch::Tensor& final_hidden);

  const TransformerConfig& config() const { return cfg_; }
  int64_t num_parameters(bool exclude_positions = true) const;

  torch::nn::Embedding wte{nullptr}, wpe{nullptr};  // wpe: learned positions only (not with rope)
  torch::nn::ModuleList blocks{nullptr};
  Norm ln_f{nullptr};   // pre-norm only
  torch::nn::Linear head{nullptr};  // registered only when head_dim > 0
  torch::nn::Embedding wtt{nullptr};    // type_vocab_size > 0 only
  Norm emb_norm{nullptr};  // post_norm or embedding_norm only
  torch::nn::Linear mlm_dense{nullptr};    // mlm_transform only, with mlm_norm and mlm_bias
  Norm mlm_norm{nullptr};
  torch::Tensor mlm_bias;
  torch::nn::Linear lm_head{nullptr};  // untied output matrix (tie_embeddings = false) only

 private:
  void init_weights();
  TransformerConfig cfg_;
  torch::nn::Dropout drop_{nullptr};
};
TORCH_MODULE(Transformer);

// Training FLOPs per token as nanoGPT/PaLM estimate them for MFU: 6N (forward + backward matmuls over the
// non-position parameters N) plus 12 * layers * width * block for attention scores and values.
double flops_per_token(const TransformerConfig& cfg, int64_t n_params);

}  // namespace spread
