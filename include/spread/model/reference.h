#pragma once
// spread's transformer written to be read: each option of TransformerConfig as a few lines of tensor algebra, in
// the order a token meets it (embeddings, blocks, final norm, output head). It is the specification of the model
// and the tests' oracle for model/transformer.h, which computes the same through the CPU fast paths; it shares no
// code with them (it includes nothing of spread but the config) and is never run in training.
//
// For a batch of token ids idx [B, T]:
//   x = wte[idx] (+ wpe[0..T) unless rope) (+ wtt[0] with token types) (then emb_norm when post-norm or
//       norm.embedding)
//   each block i, pre-norm:  x = x + attn_i(ln1(x));  x = x + mlp_i(ln2(x))     (no ln1 in block 0 without
//                                                                               norm.first_block)
//                 post-norm: x = ln1(x + attn_i(x));  x = ln2(x + mlp_i(x))
//   final = ln_f(x) (pre-norm) or x (post-norm)
//   logits = head(final) @ E^T (+ mlm_bias), E = wte tied or lm_head; head = mlm_norm(gelu(mlm_dense(.))) with the
//            MLM transform, the identity otherwise
// attn_i: q, k, v from one projection (q of n_head heads, then k and v of the kv heads), q and k rotated by their
// positions (rope, the local base on local layers), each k/v head serving n_head / kv_heads query heads in order,
// softmax(q k^T / sqrt(D)) over the keys a query may see (not padding; not later ones when causal; within
// window / 2 on local layers), times v, then the output projection.
// mlp_i: proj(act(fc(x))), or proj(act(gate) * up) with fc(x) = [gate; up] when gated; act = SiLU or GELU.
#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "spread/model/config.h"

namespace spread {

// A model's parameters by their checkpoint names (TransformerImpl::named_parameters: wte.weight,
// blocks.0.attn.qkv.weight, ln_f.bias, mlm_bias, ...).
using ParameterMap = std::map<std::string, at::Tensor>;

struct ReferenceOutput {
  std::vector<at::Tensor> hidden;  // n_layer + 1 entries: 0 = the embeddings, i = block i's output
  at::Tensor final_hidden;         // [B, T, C]: the last block's output after the final norm
  at::Tensor logits;               // [B, T, V]
};

// idx: [B, T] int64; key_padding: [B, T] bool (true = valid) or undefined (every position valid). Inference: no
// dropout, every product in the parameters' dtype. Differentiable by autograd with respect to the parameters.
// Values at padding positions are unspecified (nothing valid reads them). Throws std::invalid_argument naming a
// parameter the config needs and `params` lacks.
ReferenceOutput reference_forward(const TransformerConfig& cfg, const ParameterMap& params, const at::Tensor& idx,
                                  const at::Tensor& key_padding = {});

// Late-interaction token vectors of final hidden states [.., C]: head.weight applied, each row L2-normalised.
at::Tensor reference_token_vectors(const ParameterMap& params, const at::Tensor& final_hidden);

}  // namespace spread
