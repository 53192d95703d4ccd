#pragma once
// The shape of spread's one transformer (docs/design.md §9), grouped as a reader meets it: the core sizes first
// (nanoGPT's GPTConfig), then one group per part of a block whose alternatives the models people have need
// (interchange/arch/). Every default is spread's own model: pre-norm LayerNorm blocks, learned positions, a GELU
// MLP 4x as wide, full causal or bidirectional attention, tied input and output embeddings.
// model/reference.h states what each option computes; model/transformer.h is the fast implementation.
#include <c10/core/ScalarType.h>

#include <cstdint>

namespace spread {

struct AttentionConfig {
  int64_t n_kv_head = 0;     // grouped-query attention: heads of k and v, each serving n_head / n_kv_head query
                             // heads in order; 0 = n_head
  int64_t window = 0;        // > 0: the local layers' query t sees keys s with |t - s| <= window / 2 (ModernBERT's
                             // local_attention, the full width); 0: every layer attends globally
  int64_t global_every = 0;  // with a window, layer i attends globally when i % global_every == 0 (ModernBERT: 3);
                             // 0: every layer is local
};

struct MlpConfig {
  int64_t width = 0;       // the hidden width; 0 = 4 * n_embd
  bool gated = false;      // proj(act(gate) * up) with fc = [gate; up] (GeGLU, SwiGLU) instead of proj(act(fc))
  bool silu = false;       // SiLU as the activation (SwiGLU); false: GELU as gelu_tanh says
  bool gelu_tanh = false;  // every GELU of the model (the MLP's and the MLM head's) in the tanh approximation
                           // (GPT-2's "gelu_new"); false: the exact, erf GELU
};

struct NormConfig {
  bool rms = false;  // RMSNorm instead of LayerNorm everywhere (model/norm.h)
  bool bias = true;  // LayerNorm's bias (ModernBERT has none; RMSNorm never has one)
  double eps = 1e-5;
  bool post = false;        // BERT: x = LN(x + attn(x)), x = LN(x + mlp(x)), a norm after the embeddings and no
                            // final one. false: pre-norm (GPT-2, Llama, spread's own)
  bool embedding = false;   // a norm after the embeddings of a pre-norm model (post-norm ones always have one)
  bool first_block = true;  // false: block 0 has no norm before attention (ModernBERT: the embedding norm's
                            // output is its input)
};

struct PositionConfig {
  bool rope = false;            // rotary embeddings on q and k (rotate-half pairs, as transformers' Llama)
                                // instead of learned absolute positions (the model then has no wpe)
  double rope_theta = 10000.0;  // the rotary base
  double local_rope_theta = 0;  // the rotary base of local layers (ModernBERT: 10000); 0 = rope_theta
};

// What imported models carry beyond the blocks: BERT's token types and MLM head, untied output matrices.
struct CompatibilityConfig {
  int64_t type_vocab_size = 0;  // > 0: BERT's token-type embeddings (type 0 is added to every position); 0: none
  bool mlm_transform = false;   // BERT's MLM head: dense, activation, norm, then the output matrix plus a bias
  bool mlm_dense_bias = true;   // the MLM transform's dense bias (ModernBERT's classifier_bias)
  bool tie_embeddings = true;   // false: a separate output matrix lm_head [vocab, n_embd] (Llama, SmolLM)
};

struct TransformerConfig {
  int64_t vocab_size = 0;
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  int64_t block_size = 64;
  double dropout = 0.0;
  bool bias = true;      // biases of the linear layers
  bool causal = true;    // false: bidirectional (encoders)
  int64_t head_dim = 0;  // > 0: a bias-free linear head to this width for multi-vector (late-interaction) token
                         // vectors (token_vectors); 0: no head (the checkpoint then has no head.weight)

  AttentionConfig attention;
  MlpConfig mlp;
  NormConfig norm;
  PositionConfig positions;
  CompatibilityConfig compat;

  // How to compute, not what: the results are equal up to float rounding.
  bool recompute = true;  // recompute attention probabilities and GELU outputs in backward (model/recompute.h)
                          // on the unfused path; the fused CPU attention always recomputes (model/attention.h)
  // kBFloat16: every linear layer and the LM head multiply in bf16 (inputs and weights rounded, float32
  // accumulation, outputs back in float32; bias adds in float32); parameters, attention, norms, activations and
  // everything after the logits stay float32 (mixed_linear). Set by the trainer from train.precision, never saved.
  at::ScalarType matmul_dtype = at::kFloat;

  int64_t mlp_width() const { return mlp.width > 0 ? mlp.width : 4 * n_embd; }
  int64_t kv_heads() const { return attention.n_kv_head > 0 ? attention.n_kv_head : n_head; }
  bool is_local(int64_t layer) const {
    return attention.window > 0 && (attention.global_every <= 0 || layer % attention.global_every != 0);
  }
  // The rotary base of `layer`.
  double rope_theta_of(int64_t layer) const {
    return is_local(layer) && positions.local_rope_theta > 0 ? positions.local_rope_theta : positions.rope_theta;
  }
};

}  // namespace spread
