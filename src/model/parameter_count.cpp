#include "spread/model/parameter_count.h"

namespace spread {

double parameter_count(const TransformerConfig& c) {
  const double C = double(c.n_embd), V = double(c.vocab_size);
  const double I = c.intermediate_size > 0 ? double(c.intermediate_size) : 4 * C;  // mlp_width() without overflow
  const double qkv_rows = (double(c.n_head) + 2 * double(c.kv_heads())) * double(c.n_embd / c.n_head);
  const double norm = C + (c.norm_bias && !c.rms_norm ? C : 0);
  const double fc_rows = (c.gated_mlp ? 2 : 1) * I;
  const double linears = C * qkv_rows + C * C + C * fc_rows + I * C + (c.bias ? qkv_rows + C + fc_rows + C : 0);
  double n = V * C + double(c.n_layer) * (linears + 2 * norm);
  if (!c.first_block_norm && c.n_layer > 0) n -= norm;  // block 0 has no norm before attention
  if (!c.rope) n += double(c.block_size) * C;
  if (!c.post_norm) n += norm;  // ln_f
  if (c.post_norm || c.embedding_norm) n += norm;
  if (c.type_vocab_size > 0) n += double(c.type_vocab_size) * C;
  if (c.head_dim > 0) n += C * double(c.head_dim);
  if (c.mlm_transform) n += C * C + (c.mlm_dense_bias ? C : 0) + norm + V;
  if (!c.tie_embeddings) n += V * C;
  return n;
}

}  // namespace spread
