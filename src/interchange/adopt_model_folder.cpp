// train.init_from of another model folder (interchange/hf_import.h): the run's recipe takes the folder's shape,
// tokenizer and, for PyLate folders, its multi-vector head, markers and skiplist.
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "spread/data/hf_run_tokenizer.h"
#include "spread/interchange/hf_import.h"
#include "spread/util/error.h"
#include "spread/util/model_folder.h"

namespace fs = std::filesystem;

namespace spread {

namespace {

// A recipe value that the folder decides: the folder's, unless the recipe set another one than the default.
template <class T>
void adopt(T& value, const T& folder_value, const T& default_value, const std::string& key, const Recipe& recipe) {
  if (value != default_value && value != folder_value)
    throw user_error(recipe.source, 0, key, fmt::format("is {} but the model folder {} has {}", value,
                                                        recipe.train.init_from, folder_value),
                     "leave the key out: the folder decides the model's shape and tokenizer");
  value = folder_value;
}

// The recipe checks that read the model's shape, which parse_recipe leaves to this point when the folder gives it.
void check_against_folder_shape(const Recipe& r) {
  const auto& m = r.model;
  auto longer = [&](int64_t length, const std::string& key) {
    if (length > m.block_size)
      throw user_error(r.source, 0, key, fmt::format("{} is longer than the model folder's {} positions", length,
                                                     m.block_size), "lower " + key);
  };
  longer(r.data.max_length, "data.max_length");
  const ObjectiveTraits& objective = r.objective();
  if (objective.head == Head::token_vectors) {
    longer(r.loss.maxsim.query_length, "loss.maxsim.query_length");
    longer(r.loss.maxsim.document_length, "loss.maxsim.document_length");
  }
  for (auto dim : r.loss.contrastive.matryoshka_dims)
    if (dim > m.n_embd)
      throw user_error(r.source, 0, "loss.contrastive.matryoshka_dims",
                       fmt::format("{} is wider than the model folder's width {}", dim, m.n_embd));
  // The folder's attention decides (contrastive takes either: decoder embedders pool the last token).
  if (!objective.fits(m.causal))
    throw user_error(r.source, 0, "train.objective",
                     fmt::format("\"{}\" does not fit the model folder {}, a {} model", objective.name,
                                 r.train.init_from, m.causal ? "causal (GPT-2)" : "bidirectional (BERT)"),
                     "use objective " + objective_names([&](const ObjectiveTraits& t) { return t.fits(m.causal); }));
  if (objective.head == Head::token_vectors && r.tokenizer.lowercase)
    throw user_error(r.source, 0, "tokenizer.lowercase",
                     fmt::format("the model folder {} lower-cases its texts (do_lower_case), and PyLate's folders "
                                 "have no lower-casing step", r.train.init_from),
                     "train maxsim from a folder without do_lower_case");
}

// A ColBERT from a folder of a plain encoder, as PyLate's models.ColBERT makes one: the recipe's markers, else
// PyLate's "[Q] " and "[D] ", added to the folder's tokenizer where it lacks them, and one embedding row per token
// of the tokenizer then (PyLate resizes the embeddings to len(tokenizer); init_from_run starts the new rows at the
// mean of the folder's, as transformers' resize_token_embeddings does).
void colbert_from_encoder(Recipe& r) {
  auto& t = r.tokenizer;
  if (t.query_marker.empty() != t.document_marker.empty())
    throw user_error(r.source, 0, t.query_marker.empty() ? "tokenizer.query_marker" : "tokenizer.document_marker",
                     "is missing: the two markers go together",
                     "set both, or neither for PyLate's \"[Q] \" and \"[D] \"");
  if (t.query_marker.empty()) {
    const ColbertModules pylate;
    t.query_marker = pylate.query_prefix;
    t.document_marker = pylate.document_prefix;
  }
  r.model.vocab_size = load_hf_run_tokenizer(t.path, {t.query_marker, t.document_marker})->vocab_size();
}

// A PyLate folder decides the multi-vector head, the markers and the skiplist; its lengths and query expansion are
// the defaults of the run, which the recipe may change.
void adopt_colbert(Recipe& r, const Recipe& implied) {
  const ModelConfig dm;
  const TokenizerConfig dt;
  const MaxSimConfig ds;
  adopt(r.model.head_dim, implied.model.head_dim, dm.head_dim, "model.head_dim", r);
  adopt(r.tokenizer.query_marker, implied.tokenizer.query_marker, dt.query_marker, "tokenizer.query_marker", r);
  adopt(r.tokenizer.document_marker, implied.tokenizer.document_marker, dt.document_marker,
        "tokenizer.document_marker", r);
  auto& m = r.loss.maxsim;
  const auto& f = implied.loss.maxsim;
  adopt(m.skiplist_words, f.skiplist_words, ds.skiplist_words, "loss.maxsim.skiplist_words", r);
  m.skiplist = m.skiplist || f.skiplist;
  if (m.query_length == ds.query_length) m.query_length = f.query_length;
  if (m.document_length == ds.document_length) m.document_length = f.document_length;
  if (m.query_expansion == ds.query_expansion) m.query_expansion = f.query_expansion;
}

}  // namespace

Recipe adopt_model_folder(const Recipe& recipe) {
  const std::string& from = recipe.train.init_from;
  if (from.empty() || !is_foreign_model_folder(from)) return recipe;
  const Recipe implied = recipe_of_model_folder(read_hf_model_folder(from, /*with_weights=*/false));
  Recipe r = recipe;
  const ModelConfig d;
  auto& m = r.model;
  const auto& f = implied.model;
  adopt(m.n_layer, f.n_layer, d.n_layer, "model.n_layer", r);
  adopt(m.n_head, f.n_head, d.n_head, "model.n_head", r);
  adopt(m.n_embd, f.n_embd, d.n_embd, "model.n_embd", r);
  adopt(m.block_size, f.block_size, d.block_size, "model.block_size", r);
  adopt(m.bias, f.bias, d.bias, "model.bias", r);
  adopt(m.norm_position, f.norm_position, d.norm_position, "model.norm_position", r);
  adopt(m.activation, f.activation, d.activation, "model.activation", r);
  adopt(m.intermediate_size, f.intermediate_size, d.intermediate_size, "model.intermediate_size", r);
  adopt(m.layer_norm_eps, f.layer_norm_eps, d.layer_norm_eps, "model.layer_norm_eps", r);
  adopt(m.type_vocab_size, f.type_vocab_size, d.type_vocab_size, "model.type_vocab_size", r);
  adopt(m.vocab_size, f.vocab_size, d.vocab_size, "model.vocab_size", r);
  adopt(m.positions, f.positions, d.positions, "model.positions", r);
  adopt(m.rope_theta, f.rope_theta, d.rope_theta, "model.rope_theta", r);
  adopt(m.norm, f.norm, d.norm, "model.norm", r);
  adopt(m.norm_bias, f.norm_bias, d.norm_bias, "model.norm_bias", r);
  adopt(m.mlp, f.mlp, d.mlp, "model.mlp", r);
  adopt(m.n_kv_head, f.n_kv_head, d.n_kv_head, "model.n_kv_head", r);
  adopt(m.tie_embeddings, f.tie_embeddings, d.tie_embeddings, "model.tie_embeddings", r);
  adopt(m.attention_window, f.attention_window, d.attention_window, "model.attention_window", r);
  adopt(m.global_every, f.global_every, d.global_every, "model.global_every", r);
  adopt(m.local_rope_theta, f.local_rope_theta, d.local_rope_theta, "model.local_rope_theta", r);
  adopt(m.embedding_norm, f.embedding_norm, d.embedding_norm, "model.embedding_norm", r);
  adopt(m.first_block_norm, f.first_block_norm, d.first_block_norm, "model.first_block_norm", r);
  adopt(m.mlm_dense_bias, f.mlm_dense_bias, d.mlm_dense_bias, "model.mlm_dense_bias", r);
  // Encoders attend both ways whatever the recipe's default (true, for LMs); an LM folder stays causal.
  if (!implied.is_encoder_objective()) adopt(m.causal, f.causal, d.causal, "model.causal", r);
  else m.causal = false;
  // The MLM head is BERT's own when training MLM from a folder that has one; other objectives do not use it.
  m.mlm_transform = r.objective().head == Head::masked_token && f.mlm_transform;
  const TokenizerConfig dt;
  adopt(r.tokenizer.kind, implied.tokenizer.kind, dt.kind, "tokenizer.kind", r);
  adopt(r.tokenizer.lowercase, implied.tokenizer.lowercase, dt.lowercase, "tokenizer.lowercase", r);
  if (!recipe.tokenizer.path.empty() &&
      fs::weakly_canonical(recipe.tokenizer.path) != fs::weakly_canonical(implied.tokenizer.path))
    throw user_error(recipe.source, 0, "tokenizer.path", fmt::format("is {} but the model folder {} has its own "
                     "tokenizer ({})", recipe.tokenizer.path, from, implied.tokenizer.path),
                     "leave the key out: the folder decides the model's shape and tokenizer");
  r.tokenizer.path = implied.tokenizer.path;
  if (r.data.max_length == 0) r.data.max_length = implied.data.max_length;
  if (r.loss.contrastive.pooling == ContrastiveConfig().pooling) r.loss.contrastive.pooling = implied.loss.contrastive.pooling;
  const auto token_vectors = [](const Recipe& x) { return x.objective().head == Head::token_vectors; };
  if (token_vectors(r)) {
    if (token_vectors(implied)) adopt_colbert(r, implied);
    else colbert_from_encoder(r);
  }
  check_against_folder_shape(r);
  return r;
}

}  // namespace spread
