#include "spread/model/parameter_count.h"

namespace spread {

double parameter_count(const TransformerConfig& c) {
  const double C = double(c.n_embd), V = double(c.vocab_size);
  const double I = c.mlp.width > 0 ? double(c.mlp.width) : 4 * C;  // mlp_width() without overflow
  const double qkv_rows = (double(c.n_head) + 2 * double(c.kv_heads())) * double(c.n_embd / c.n_head);
  const double norm = C + (c.norm.bias && !c.norm.rms ? C : 0);
  const double fc_rows = (c.mlp.gated ? 2 : 1) * I;
  const double linears = C * qkv_rows + C * C + C * fc_rows + I * C + (c.bias ? qkv_rows + C + fc_rows + C : 0);
  double n = V * C + double(c.n_layer) * (linears + 2 * norm);
  if (!c.norm.first_block && c.n_layer > 0) n -= norm;  // block 0 has no norm before attention
  if (!c.positions.rope) n += double(c.block_size) * C;
  if (!c.norm.post) n += norm;  // ln_f
  if (c.norm.post || c.norm.embedding) n += norm;
  if (c.compat.type_vocab_size > 0) n += double(c.compat.type_vocab_size) * C;
  if (c.head_dim > 0) n += C * double(c.head_dim);
  if (c.compat.mlm_transform) n += C * C + (c.compat.mlm_dense_bias ? C : 0) + norm + V;
  if (!c.compat.tie_embeddings) n += V * C;
  return n;
}

}  // namespace spread
