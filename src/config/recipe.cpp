// Recipe loading: one schema table drives parsing, validation, --set overrides and the resolved TOML, so a key
// is declared exactly once (name, type, range).
#include "spread/config/recipe.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <toml++/toml.h>
#include <type_traits>

#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/model_folder.h"

namespace spread {
namespace {

// Where a value came from, for messages.
struct Origin {
  std::string file;
  int line = 0;
};

struct Field {
  std::string key;  // "section.key" (section may itself be dotted: "loss.dispersion.lambda")
  std::string type_name;
  std::function<void(Recipe&, const toml::node&, const Origin&)> parse;
  std::function<void(const Recipe&, toml::table&, const std::string& leaf)> emit;
  std::string allowed;  // the values parse accepts, for the reference ("" = any of the type)
};

// "lo..hi" for the recipe reference; the largest values read as "no limit".
template <class T>
std::string range_text(T lo, T hi) {
  bool unbounded = hi == std::numeric_limits<T>::max();
  if constexpr (std::is_floating_point_v<T>) unbounded = unbounded || std::isinf(hi);
  return unbounded ? fmt::format(">= {}", lo) : fmt::format("{} .. {}", lo, hi);
}

[[noreturn]] void fail(const Origin& at, const std::string& key, const std::string& problem,
                       const std::string& hint = "") {
  throw user_error(at.file, at.line, key, problem, hint);
}

std::string node_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date/time";
  }
}

template <class T>
using Ref = std::function<T&(Recipe&)>;
template <class T>
using CRef = std::function<const T&(const Recipe&)>;

Field int_field(std::string key, Ref<int64_t> ref, int64_t lo, int64_t hi) {
  Field f{key, "integer", nullptr, nullptr, range_text(lo, hi)};
  f.parse = [=](Recipe& r, const toml::node& n, const Origin& at) {
    if (!n.is_integer()) fail(at, key, "expected an integer, got " + node_type_name(n));
    int64_t v = n.as_integer()->get();
    if (v < lo || v > hi) fail(at, key, fmt::format("{} is out of range", v), fmt::format("allowed: {}..{}", lo, hi));
    ref(r) = v;
  };
  f.emit = [=](const Recipe& r, toml::table& t, const std::string& leaf) {
    t.insert_or_assign(leaf, ref(const_cast<Recipe&>(r)));
  };
  return f;
}

Field float_field(std::string key, Ref<double> ref, double lo, double hi) {
  Field f{key, "number", nullptr, nullptr, range_text(lo, hi)};
  f.parse = [=](Recipe& r, const toml::node& n, const Origin& at) {
    if (!n.is_number()) fail(at, key, "expected a number, got " + node_type_name(n));
    double v = n.is_integer() ? double(n.as_integer()->get()) : n.as_floating_point()->get();
    if (!(v >= lo && v <= hi)) fail(at, key, fmt::format("{} is out of range", v), fmt::format("allowed: {}..{}", lo, hi));
    ref(r) = v;
  };
  f.emit = [=](const Recipe& r, toml::table& t, const std::string& leaf) {
    t.insert_or_assign(leaf, ref(const_cast<Recipe&>(r)));
  };
  return f;
}

Field bool_field(std::string key, Ref<bool> ref) {
  Field f{key, "boolean", nullptr, nullptr};
  f.parse = [=](Recipe& r, const toml::node& n, const Origin& at) {
    if (!n.is_boolean()) fail(at, key, "expected true or false, got " + node_type_name(n));
    ref(r) = n.as_boolean()->get();
  };
  f.emit = [=](const Recipe& r, toml::table& t, const std::string& leaf) {
    t.insert_or_assign(leaf, ref(const_cast<Recipe&>(r)));
  };
  return f;
}

// choices empty = any string.
Field string_field(std::string key, Ref<std::string> ref, std::vector<std::string> choices = {}) {
  Field f{key, "string", nullptr, nullptr, fmt::format("{}", fmt::join(choices, ", "))};
  f.parse = [=](Recipe& r, const toml::node& n, const Origin& at) {
    if (!n.is_string()) fail(at, key, "expected a string, got " + node_type_name(n));
    std::string v = n.as_string()->get();
    if (!choices.empty() && std::find(choices.begin(), choices.end(), v) == choices.end())
      fail(at, key, fmt::format("'{}' is not allowed", v), fmt::format("use one of: {}", fmt::join(choices, ", ")));
    ref(r) = v;
  };
  f.emit = [=](const Recipe& r, toml::table& t, const std::string& leaf) {
    t.insert_or_assign(leaf, ref(const_cast<Recipe&>(r)));
  };
  return f;
}

// train.objective: one of the registry's names (config/objective.h).
Field objective_field(std::string key, Ref<Objective> ref) {
  std::vector<std::string> names;
  for (const auto* t : objectives()) names.push_back(t->name);
  Field f{key, "string", nullptr, nullptr, fmt::format("{}", fmt::join(names, ", "))};
  f.parse = [=](Recipe& r, const toml::node& n, const Origin& at) {
    if (!n.is_string()) fail(at, key, "expected a string, got " + node_type_name(n));
    const std::string v = n.as_string()->get();
    const auto objective = objective_named(v);
    if (!objective)
      fail(at, key, fmt::format("'{}' is not allowed", v),
           "use one of: " + objective_names([](const ObjectiveTraits&) { return true; }));
    ref(r) = *objective;
  };
  f.emit = [=](const Recipe& r, toml::table& t, const std::string& leaf) {
    t.insert_or_assign(leaf, name_of(ref(const_cast<Recipe&>(r))));
  };
  return f;
}

// A string or an array of strings.
Field string_list_field(std::string key, Ref<std::vector<std::string>> ref) {
  Field f{key, "string or array of strings", nullptr, nullptr};
  f.parse = [=](Recipe& r, const toml::node& n, const Origin& at) {
    std::vector<std::string> out;
    if (n.is_string()) {
      out.push_back(n.as_string()->get());
    } else if (n.is_array()) {
      for (const auto& e : *n.as_array()) {
        if (!e.is_string()) fail(at, key, "expected an array of strings, found " + node_type_name(e) + " in it");
        out.push_back(e.as_string()->get());
      }
    } else {
      fail(at, key, "expected a string or an array of strings, got " + node_type_name(n));
    }
    ref(r) = out;
  };
  f.emit = [=](const Recipe& r, toml::table& t, const std::string& leaf) {
    toml::array a;
    for (const auto& s : ref(const_cast<Recipe&>(r))) a.push_back(s);
    t.insert_or_assign(leaf, std::move(a));
  };
  return f;
}

// An array of integers (an empty array is allowed).
Field int_list_field(std::string key, Ref<std::vector<int64_t>> ref, int64_t lo, int64_t hi) {
  Field f{key, "array of integers", nullptr, nullptr, "each " + range_text(lo, hi)};
  f.parse = [=](Recipe& r, const toml::node& n, const Origin& at) {
    if (!n.is_array()) fail(at, key, "expected an array of integers, got " + node_type_name(n));
    std::vector<int64_t> out;
    for (const auto& e : *n.as_array()) {
      if (!e.is_integer()) fail(at, key, "expected an array of integers, found " + node_type_name(e) + " in it");
      int64_t v = e.as_integer()->get();
      if (v < lo || v > hi) fail(at, key, fmt::format("{} is out of range", v), fmt::format("allowed: {}..{}", lo, hi));
      out.push_back(v);
    }
    ref(r) = out;
  };
  f.emit = [=](const Recipe& r, toml::table& t, const std::string& leaf) {
    toml::array a;
    for (auto v : ref(const_cast<Recipe&>(r))) a.push_back(v);
    t.insert_or_assign(leaf, std::move(a));
  };
  return f;
}

// loss.dispersion.layers: "last", "all", or an array of layer indices (0 = embedding output, i = block i; checked
// against n_layer later).
Field layers_field(std::string key) {
  Field f{key, "\"last\", \"all\" or an array of layer indices", nullptr, nullptr};
  f.parse = [=](Recipe& r, const toml::node& n, const Origin& at) {
    auto& d = r.loss.dispersion;
    if (n.is_string()) {
      std::string v = n.as_string()->get();
      if (v != "last" && v != "all") fail(at, key, fmt::format("'{}' is not allowed", v), "use \"last\", \"all\" or an array such as [2, 4]");
      d.layers_mode = v;
      d.layers.clear();
    } else if (n.is_array() && !n.as_array()->empty()) {
      d.layers.clear();
      for (const auto& e : *n.as_array()) {
        if (!e.is_integer()) fail(at, key, "expected an array of integers (layer indices: 0 = embedding output, 1 = first block)");
        d.layers.push_back(e.as_integer()->get());
      }
      d.layers_mode = "list";
    } else {
      fail(at, key, "expected \"last\", \"all\" or a non-empty array of layer indices, got " + node_type_name(n));
    }
  };
  f.emit = [=](const Recipe& r, toml::table& t, const std::string& leaf) {
    const auto& d = r.loss.dispersion;
    if (d.layers_mode == "list") {
      toml::array a;
      for (auto i : d.layers) a.push_back(i);
      t.insert_or_assign(leaf, std::move(a));
    } else {
      t.insert_or_assign(leaf, d.layers_mode);
    }
  };
  return f;
}

// One [[data.mix]] entry's key, for errors: "data.mix[1].weight" (entries counted from 0).
std::string mix_key(size_t i, const std::string& leaf) { return fmt::format("data.mix[{}].{}", i, leaf); }

ShardMix parse_mix_entry(const toml::node& e, size_t i, const Origin& at) {
  const Origin entry_at{at.file, e.source().begin.line > 0 ? int(e.source().begin.line) : at.line};
  if (!e.is_table())
    fail(entry_at, fmt::format("data.mix[{}]", i), "expected a table { shards = \"...\", weight = ... }, got " +
         node_type_name(e), "write each entry as [[data.mix]] with shards = \"DIR/train_*.bin\" and weight = 0.5");
  ShardMix m;
  bool has_shards = false;
  for (const auto& [k, v] : *e.as_table()) {
    const std::string leaf(k.str());
    const Origin at_key{at.file, v.source().begin.line > 0 ? int(v.source().begin.line) : entry_at.line};
    if (leaf == "shards") {
      if (!v.is_string() || v.as_string()->get().empty())
        fail(at_key, mix_key(i, leaf), "expected a file pattern such as \"DIR/train_*.bin\"");
      m.shards = v.as_string()->get();
      has_shards = true;
    } else if (leaf == "weight") {
      const char* hint = "weights are relative shares, such as 0.7 and 0.3";
      if (!v.is_number()) fail(at_key, mix_key(i, leaf), "expected a positive number, got " + node_type_name(v), hint);
      m.weight = v.is_integer() ? double(v.as_integer()->get()) : v.as_floating_point()->get();
      if (!(m.weight > 0) || !std::isfinite(m.weight))
        fail(at_key, mix_key(i, leaf), fmt::format("{} is not a positive number", m.weight), hint);
    } else {
      fail(at_key, mix_key(i, leaf), "unknown key", "valid keys in [[data.mix]]: shards, weight");
    }
  }
  if (!has_shards) fail(entry_at, mix_key(i, "shards"), "missing", "give the entry's shard files, e.g. shards = \"DIR/train_*.bin\"");
  return m;
}

// data.mix: an array of tables ([[data.mix]], or --set 'data.mix=[{shards = "...", weight = 0.5}]').
Field mix_field(std::string key) {
  Field f{key, "array of tables", nullptr, nullptr, "each { shards = pattern, weight > 0 (default 1) }"};
  f.parse = [=](Recipe& r, const toml::node& n, const Origin& at) {
    if (!n.is_array()) fail(at, key, "expected [[data.mix]] tables, got " + node_type_name(n));
    std::vector<ShardMix> out;
    for (const auto& e : *n.as_array()) out.push_back(parse_mix_entry(e, out.size(), at));
    r.data.mix = out;
  };
  f.emit = [=](const Recipe& r, toml::table& t, const std::string& leaf) {
    toml::array a;
    for (const auto& m : r.data.mix) a.push_back(toml::table{{"shards", m.shards}, {"weight", m.weight}});
    t.insert_or_assign(leaf, std::move(a));
  };
  return f;
}

constexpr int64_t kBig = std::numeric_limits<int64_t>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();
// Tokens per encoder text: [CLS], at least one token of the text, [SEP].
constexpr int64_t kMinEncoderLength = 3;

#define REF(expr) [](Recipe& r) -> auto& { return r.expr; }

const std::vector<Field>& schema() {
  static const std::vector<Field> fields = {
      string_field("run.name", REF(run.name)),
      string_field("run.out_dir", REF(run.out_dir)),
      int_field("run.seed", REF(run.seed), 0, kBig),
      int_field("run.threads", REF(run.threads), 0, 1024),
      string_field("run.device", REF(run.device)),
      string_field("data.source", REF(data.source), {"text", "wordnet", "pairs", "wordnet_pairs", "stsb", "sick", "beir"}),
      string_list_field("data.path", REF(data.path)),
      string_field("data.shards", REF(data.shards)),
      string_field("data.val_shards", REF(data.val_shards)),
      mix_field("data.mix"),
      float_field("data.val_fraction", REF(data.val_fraction), 0.001, 0.5),
      int_field("data.max_length", REF(data.max_length), 0, 1 << 20),
      string_list_field("data.columns", REF(data.columns)),
      bool_field("data.strict", REF(data.strict)),
      bool_field("data.hard_negatives", REF(data.hard_negatives)),
      string_field("data.qrels", REF(data.qrels)),
      string_field("data.root", REF(data.root)),
      string_field("tokenizer.kind", REF(tokenizer.kind), {"char", "bpe", "unigram", "hf"}),
      int_field("tokenizer.vocab_size", REF(tokenizer.vocab_size), 32, 1 << 20),
      string_field("tokenizer.model", REF(tokenizer.model)),
      string_field("tokenizer.path", REF(tokenizer.path)),
      string_field("tokenizer.query_marker", REF(tokenizer.query_marker)),
      string_field("tokenizer.document_marker", REF(tokenizer.document_marker)),
      bool_field("tokenizer.lowercase", REF(tokenizer.lowercase)),
      int_field("model.n_layer", REF(model.n_layer), 1, 256),
      int_field("model.n_head", REF(model.n_head), 1, 256),
      int_field("model.n_embd", REF(model.n_embd), 1, 65536),
      int_field("model.vocab_size", REF(model.vocab_size), 0, 1 << 24),
      int_field("model.block_size", REF(model.block_size), 2, 1 << 20),
      float_field("model.dropout", REF(model.dropout), 0.0, 0.9),
      bool_field("model.bias", REF(model.bias)),
      bool_field("model.causal", REF(model.causal)),
      bool_field("model.recompute", REF(model.recompute)),
      int_field("model.head_dim", REF(model.head_dim), 1, 65536),
      string_field("model.norm_position", REF(model.norm_position), {"pre", "post"}),
      string_field("model.activation", REF(model.activation), {"gelu", "gelu_tanh"}),
      int_field("model.intermediate_size", REF(model.intermediate_size), 0, 1 << 20),
      float_field("model.layer_norm_eps", REF(model.layer_norm_eps), 1e-30, 1.0),
      int_field("model.type_vocab_size", REF(model.type_vocab_size), 0, 1 << 16),
      bool_field("model.mlm_transform", REF(model.mlm_transform)),
      string_field("model.positions", REF(model.positions), {"learned", "rope"}),
      float_field("model.rope_theta", REF(model.rope_theta), 1.0, 1e12),
      string_field("model.norm", REF(model.norm), {"layernorm", "rmsnorm"}),
      bool_field("model.norm_bias", REF(model.norm_bias)),
      string_field("model.mlp", REF(model.mlp), {"gelu", "geglu", "swiglu"}),
      int_field("model.n_kv_head", REF(model.n_kv_head), 0, 256),
      bool_field("model.tie_embeddings", REF(model.tie_embeddings)),
      int_field("model.attention_window", REF(model.attention_window), 0, 1 << 20),
      int_field("model.global_every", REF(model.global_every), 0, 256),
      float_field("model.local_rope_theta", REF(model.local_rope_theta), 0.0, 1e12),
      bool_field("model.embedding_norm", REF(model.embedding_norm)),
      bool_field("model.first_block_norm", REF(model.first_block_norm)),
      bool_field("model.mlm_dense_bias", REF(model.mlm_dense_bias)),
      objective_field("train.objective", REF(train.objective)),
      string_field("train.init_from", REF(train.init_from)),
      string_field("train.precision", REF(train.precision), {"fp32", "bf16"}),
      int_field("train.batch_size", REF(train.batch_size), 1, 1 << 20),
      int_field("train.grad_accum", REF(train.grad_accum), 1, 1 << 16),
      int_field("train.max_steps", REF(train.max_steps), 1, kBig),
      float_field("train.lr", REF(train.lr), 0.0, 10.0),
      float_field("train.min_lr", REF(train.min_lr), 0.0, 10.0),
      int_field("train.warmup_steps", REF(train.warmup_steps), 0, kBig),
      string_field("train.schedule", REF(train.schedule), {"cosine", "linear", "wsd"}),
      float_field("train.decay_fraction", REF(train.decay_fraction), 0.0, 1.0),
      string_field("train.decay_shape", REF(train.decay_shape), {"linear", "cosine", "sqrt"}),
      string_field("train.optimizer", REF(train.optimizer), {"adamw", "muon"}),
      float_field("train.muon_lr", REF(train.muon_lr), 0.0, 10.0),
      float_field("train.muon_momentum", REF(train.muon_momentum), 0.0, 0.999999),
      bool_field("train.muon_nesterov", REF(train.muon_nesterov)),
      int_field("train.muon_ns_steps", REF(train.muon_ns_steps), 1, 99),
      string_field("train.muon_ns_precision", REF(train.muon_ns_precision), {"bf16", "fp32"}),
      string_field("train.muon_adjust_lr", REF(train.muon_adjust_lr), {"original", "match_rms_adamw"}),
      float_field("train.weight_decay", REF(train.weight_decay), 0.0, 10.0),
      float_field("train.beta1", REF(train.beta1), 0.0, 0.999999),
      float_field("train.beta2", REF(train.beta2), 0.0, 0.999999),
      float_field("train.eps", REF(train.eps), 1e-30, 1.0),
      float_field("train.grad_clip", REF(train.grad_clip), 0.0, kInf),
      int_field("train.eval_every", REF(train.eval_every), 0, kBig),
      int_field("train.eval_batches", REF(train.eval_batches), 1, 1 << 20),
      int_field("train.ckpt_every", REF(train.ckpt_every), 0, kBig),
      int_field("train.keep_last", REF(train.keep_last), 1, 1000),
      string_field("train.keep_best", REF(train.keep_best)),
      int_field("train.log_every", REF(train.log_every), 1, kBig),
      int_field("train.max_bad_steps", REF(train.max_bad_steps), 1, 1000),
      bool_field("loss.dispersion.enabled", REF(loss.dispersion.enabled)),
      float_field("loss.dispersion.lambda", REF(loss.dispersion.lambda), 0.0, 1e6),
      string_field("loss.dispersion.variant", REF(loss.dispersion.variant),
                   {"angular", "cosine", "l2_repel", "hinge", "decorrelation"}),
      float_field("loss.dispersion.tau", REF(loss.dispersion.tau), 1e-6, 1e6),
      float_field("loss.dispersion.clamp", REF(loss.dispersion.clamp), 1e-6, 0.5),
      int_field("loss.dispersion.max_tokens", REF(loss.dispersion.max_tokens), 2, 1 << 20),
      layers_field("loss.dispersion.layers"),
      bool_field("loss.dispersion.after_norm", REF(loss.dispersion.after_norm)),
      float_field("loss.mlm.mask_prob", REF(loss.mlm.mask_prob), 0.001, 1.0),
      float_field("loss.contrastive.temperature", REF(loss.contrastive.temperature), 1e-4, 100.0),
      bool_field("loss.contrastive.symmetric", REF(loss.contrastive.symmetric)),
      bool_field("loss.contrastive.mask_duplicates", REF(loss.contrastive.mask_duplicates)),
      int_field("loss.contrastive.mini_batch", REF(loss.contrastive.mini_batch), 0, 1 << 20),
      bool_field("loss.contrastive.simcse", REF(loss.contrastive.simcse)),
      int_list_field("loss.contrastive.matryoshka_dims", REF(loss.contrastive.matryoshka_dims), 1, 65536),
      string_field("loss.contrastive.pooling", REF(loss.contrastive.pooling),
                   {"mean", "cls", "last", "max", "weightedmean"}),
      bool_field("loss.contrastive.gather", REF(loss.contrastive.gather)),
      int_field("loss.maxsim.query_length", REF(loss.maxsim.query_length), 4, 1 << 16),
      int_field("loss.maxsim.document_length", REF(loss.maxsim.document_length), 4, 1 << 20),
      bool_field("loss.maxsim.query_expansion", REF(loss.maxsim.query_expansion)),
      bool_field("loss.maxsim.skiplist", REF(loss.maxsim.skiplist)),
      string_list_field("loss.maxsim.skiplist_words", REF(loss.maxsim.skiplist_words)),
      bool_field("loss.maxsim.gather", REF(loss.maxsim.gather)),
      float_field("loss.maxsim.temperature", REF(loss.maxsim.temperature), 1e-4, 100.0),
      bool_field("loss.pooling_aware.enabled", REF(loss.pooling_aware.enabled)),
      float_field("loss.pooling_aware.pool_factor", REF(loss.pooling_aware.pool_factor), 1.0, 1e6),
      float_field("loss.pooling_aware.weight_full", REF(loss.pooling_aware.weight_full), 0.0, 1e6),
      float_field("loss.pooling_aware.weight_pooled", REF(loss.pooling_aware.weight_pooled), 0.0, 1e6),
      string_field("loss.pooling_aware.ste", REF(loss.pooling_aware.ste), {"mean", "identity"}),
      string_field("loss.pooling_aware.ward_distance", REF(loss.pooling_aware.ward_distance), {"cosine", "euclidean"}),
      int_field("loss.pooling_aware.protected_tokens", REF(loss.pooling_aware.protected_tokens), 0, 1 << 16),
      int_field("diagnostics.every", REF(diagnostics.every), 0, kBig),
      int_field("diagnostics.early_every", REF(diagnostics.early_every), 0, kBig),
      int_field("diagnostics.early_until", REF(diagnostics.early_until), 0, kBig),
      int_field("diagnostics.probe_texts", REF(diagnostics.probe_texts), 2, 4096),
      int_field("diagnostics.max_pairs", REF(diagnostics.max_pairs), 1, 1 << 24),
      bool_field("diagnostics.socm", REF(diagnostics.socm)),
      string_field("eval.sts", REF(eval.sts)),
      string_field("eval.beir", REF(eval.beir)),
      string_field("eval.qrels", REF(eval.qrels)),
      string_list_field("eval.choices", REF(eval.choices)),
  };
  return fields;
}

#undef REF

// What each key means, for the recipe reference (docs/recipe_reference.md, `spread recipe --keys`). Every key of
// the schema has one (RecipeReference.EveryKeyIsDescribedAndTheDocsAreCurrent).
const std::map<std::string, std::string>& key_meanings() {
  static const std::map<std::string, std::string> meanings{
      {"run.name", "the run's folder name under run.out_dir"},
      {"run.out_dir", "where run folders are made"},
      {"run.seed", "seed of the model's initial weights, the data order and dropout"},
      {"run.threads", "threads of LibTorch and BLAS; 0 = the fastest setting measured for this machine's cores"},
      {"run.device", "cpu, cuda or cuda:N"},
      {"data.source", "where examples come from: text or wordnet (plain text, for lm and mlm); pairs, wordnet_pairs, stsb, sick or beir (pairs, for contrastive and maxsim)"},
      {"data.path", "the text or pair files, the STS-B / SICK file, or the BEIR folder; ${data_root} stands for data.root"},
      {"data.shards", "lm: token shards (llm.c / modded-nanogpt .bin, or spread token files) as a file pattern such as \"DIR/train_*.bin\", read in name order as one stream instead of data.path"},
      {"data.val_shards", "lm with data.shards or data.mix: the validation split's shards, a file pattern"},
      {"data.mix", "lm: [[data.mix]] entries, each shards = a file pattern and weight = its share of the training windows (instead of data.shards)"},
      {"data.val_fraction", "held out for validation: the corpus's last fraction (text), a seeded sample of examples (pairs)"},
      {"data.max_length", "encoder objectives: tokens per text, [CLS] and [SEP] included; 0 = model.block_size"},
      {"data.columns", "pair files: the [anchor, positive, negative...] column names; empty = found by name"},
      {"data.strict", "pair files: a bad row is an error instead of being skipped and counted"},
      {"data.hard_negatives", "sick: only the entailment pairs that have a contradiction, which becomes a hard negative"},
      {"data.qrels", "beir: the split qrels/NAME.tsv; empty = train.tsv when present, else the only one"},
      {"data.root", "the data folder ${data_root} stands for; empty = $SPREAD_DATA, else ../shared/data"},
      {"tokenizer.kind", "char, a trained sentencepiece bpe or unigram vocabulary, or hf (a Hugging Face tokenizer)"},
      {"tokenizer.vocab_size", "bpe and unigram: the vocabulary to train"},
      {"tokenizer.model", "bpe and unigram: an existing sentencepiece model file instead of training one"},
      {"tokenizer.path", "hf: a tokenizer.json, vocab.txt, vocab.json or the folder holding one"},
      {"tokenizer.query_marker", "hf with maxsim: the token that marks queries, added to the vocabulary when it has none, as PyLate adds \"[Q] \" (the default from a model folder); or an entry such as [unused0]"},
      {"tokenizer.document_marker", "hf with maxsim: the token that marks documents (PyLate's \"[D] \", or an entry such as [unused1])"},
      {"tokenizer.lowercase", "hf: each text through Python's str.lower() first (a sentence-transformers folder's do_lower_case)"},
      {"model.n_layer", "transformer blocks"},
      {"model.n_head", "attention heads"},
      {"model.n_embd", "width of the hidden states"},
      {"model.vocab_size", "embedding rows; 0 = the tokenizer's ids (more: a table padded past them)"},
      {"model.block_size", "positions: the longest sequence the model reads"},
      {"model.dropout", "dropout of attention, residual and embeddings while training"},
      {"model.bias", "biases in the linear layers"},
      {"model.causal", "the causal mask (a decoder); false = attention both ways (an encoder)"},
      {"model.recompute", "recompute attention probabilities and GELU outputs in backward: less memory, a little more time"},
      {"model.head_dim", "maxsim: width of the multi-vector head (other objectives have no head)"},
      {"model.norm_position", "pre (GPT-2, Llama) or post (BERT: the norm after each residual add and the embeddings)"},
      {"model.activation", "gelu (exact) or gelu_tanh (GPT-2's gelu_new)"},
      {"model.intermediate_size", "MLP width; 0 = 4 x n_embd"},
      {"model.layer_norm_eps", "the norms' epsilon"},
      {"model.type_vocab_size", "BERT's token types (2); 0 = none"},
      {"model.mlm_transform", "BERT's MLM prediction head (dense, activation, norm, decoder bias)"},
      {"model.positions", "learned (a position table) or rope (rotary positions on queries and keys)"},
      {"model.rope_theta", "the rotary base"},
      {"model.norm", "layernorm or rmsnorm"},
      {"model.norm_bias", "the LayerNorms' bias (RMSNorm has none)"},
      {"model.mlp", "gelu: proj(act(fc x)); geglu: proj(gelu(gate x) * up x); swiglu: the same with SiLU"},
      {"model.n_kv_head", "grouped-query attention: key/value heads, a divisor of n_head; 0 = n_head"},
      {"model.tie_embeddings", "the output matrix is the token embedding; false = one of its own"},
      {"model.attention_window", "> 0: local layers see keys within attention_window / 2 positions either way (ModernBERT)"},
      {"model.global_every", "with a window: layer i attends globally when i % global_every == 0; 0 = none does"},
      {"model.local_rope_theta", "the local layers' rotary base; 0 = rope_theta"},
      {"model.embedding_norm", "a norm after the token embeddings in a pre-norm model (ModernBERT)"},
      {"model.first_block_norm", "false: block 0 attends to the embedding norm's output directly (ModernBERT)"},
      {"model.mlm_dense_bias", "the MLM head's dense bias (with mlm_transform)"},
      {"train.objective", "what is trained: lm (next token), mlm (masked tokens), contrastive (pooled embeddings), maxsim (late interaction)"},
      {"train.init_from", "the initial weights: a run folder's newest checkpoint, a spread export, or a Hugging Face / sentence-transformers / PyLate folder (which also gives the model's shape and tokenizer)"},
      {"train.precision", "fp32, or bf16 for the linear layers (weights, optimizer state and checkpoints stay float32)"},
      {"train.batch_size", "examples per micro-step (per rank when data-parallel)"},
      {"train.grad_accum", "micro-steps per optimizer step"},
      {"train.max_steps", "optimizer steps of the run"},
      {"train.lr", "peak learning rate, reached after warmup_steps"},
      {"train.min_lr", "the learning rate the decay ends at"},
      {"train.warmup_steps", "linear warmup from 0 to lr"},
      {"train.schedule", "after warmup: cosine or linear decay to min_lr, or wsd (stable at lr, then decay_shape to min_lr over the last decay_fraction of the steps)"},
      {"train.decay_fraction", "wsd: the final share of max_steps that decays"},
      {"train.decay_shape", "wsd: the decay's shape, linear, cosine or sqrt (1 - sqrt of the decay's progress)"},
      {"train.optimizer", "adamw, or muon: Muon on the blocks' matrices at muon_lr, AdamW at lr on embeddings, heads, norms and biases"},
      {"train.muon_lr", "Muon's peak learning rate (scaled by the schedule as lr is)"},
      {"train.muon_momentum", "Muon's momentum"},
      {"train.muon_nesterov", "Muon's Nesterov momentum"},
      {"train.muon_ns_steps", "Newton-Schulz iterations of Muon's orthogonalisation"},
      {"train.muon_ns_precision", "bf16 (as torch.optim.Muon) or fp32 Newton-Schulz products"},
      {"train.muon_adjust_lr", "Muon's per-matrix rate: original, lr sqrt(max(1, rows / cols)), or match_rms_adamw, lr 0.2 sqrt(max(rows, cols))"},
      {"train.weight_decay", "AdamW's decoupled weight decay, on parameters of two or more dimensions (not norms or biases)"},
      {"train.beta1", "AdamW's first-moment decay"},
      {"train.beta2", "AdamW's second-moment decay"},
      {"train.eps", "AdamW's epsilon"},
      {"train.grad_clip", "the gradient's global norm is clipped to this; 0 = no clipping"},
      {"train.eval_every", "steps between evaluations (and the last step); 0 = none"},
      {"train.eval_batches", "validation batches per evaluation"},
      {"train.ckpt_every", "steps between checkpoints (and the last step); 0 = none but on SIGINT / SIGTERM"},
      {"train.keep_last", "the newest checkpoints kept"},
      {"train.keep_best", "an evaluation metric (ndcg@10, sts_spearman, val_loss...) whose best checkpoint is kept too and named in best.json; empty = off"},
      {"train.log_every", "steps between log lines"},
      {"train.max_bad_steps", "consecutive non-finite steps before the run stops as diverged"},
      {"loss.dispersion.enabled", "add lambda x the dispersion loss to the LM loss"},
      {"loss.dispersion.lambda", "the dispersion term's weight (0 = computed and logged, no gradient)"},
      {"loss.dispersion.variant", "angular, cosine, l2_repel, hinge or decorrelation (docs/design.md)"},
      {"loss.dispersion.tau", "the temperature of the log-mean-exp variants (angular, l2_repel)"},
      {"loss.dispersion.clamp", "the straight-through clamp t of cosines before arccos (angular, hinge): |C| <= 1 - t"},
      {"loss.dispersion.max_tokens", "tokens subsampled per layer for the pairwise term"},
      {"loss.dispersion.layers", "last, all, or an array of layer indices (0 = the embedding output, i = block i)"},
      {"loss.dispersion.after_norm", "the last block's output after the final norm, as the LM head sees it"},
      {"loss.mlm.mask_prob", "share of non-special tokens chosen; of those 80% become [MASK], 10% a random token, 10% stay"},
      {"loss.contrastive.temperature", "InfoNCE temperature (scale = 1 / temperature; sentence-transformers' 20 is 0.05)"},
      {"loss.contrastive.symmetric", "also the loss of positives against the anchors"},
      {"loss.contrastive.mask_duplicates", "a candidate whose text equals the anchor's positive is not a negative"},
      {"loss.contrastive.mini_batch", "> 0: the cached mode (GradCache) with mini-batches of this many texts; 0 = one pass"},
      {"loss.contrastive.simcse", "unsupervised: the positive is the anchor under another dropout mask"},
      {"loss.contrastive.matryoshka_dims", "the loss also on these leading widths of the embedding; empty = the full width only"},
      {"loss.contrastive.pooling", "how token states become one embedding: mean, cls, last (token), max or weightedmean"},
      {"loss.contrastive.gather", "data-parallel: every rank scores against the whole global batch"},
      {"loss.maxsim.query_length", "tokens per query, markers included"},
      {"loss.maxsim.document_length", "tokens per document, markers included"},
      {"loss.maxsim.query_expansion", "queries padded with [MASK] to query_length, which attend and score (ColBERT)"},
      {"loss.maxsim.skiplist", "document tokens that are punctuation take no part in MaxSim"},
      {"loss.maxsim.skiplist_words", "with skiplist and kind hf: the vocabulary entries skipped instead (PyLate's skiplist_words)"},
      {"loss.maxsim.gather", "data-parallel: every query is scored against the global batch's documents"},
      {"loss.maxsim.temperature", "scores / temperature before the cross-entropy"},
      {"loss.pooling_aware.enabled", "add the loss on Ward-pooled documents to the loss on full ones"},
      {"loss.pooling_aware.pool_factor", "tokens per pooled vector in the loss's pooled documents"},
      {"loss.pooling_aware.weight_full", "weight of the loss on full documents"},
      {"loss.pooling_aware.weight_pooled", "weight of the loss on pooled documents"},
      {"loss.pooling_aware.ste", "how a pooled vector's gradient reaches its members: mean (their share) or identity"},
      {"loss.pooling_aware.ward_distance", "cosine or euclidean distance for Ward clustering"},
      {"loss.pooling_aware.protected_tokens", "leading document tokens never pooled ([CLS], the marker)"},
      {"diagnostics.every", "steps between geometry probes on a fixed validation batch; 0 = off"},
      {"diagnostics.early_every", "also a probe every N steps up to early_until; 0 = off"},
      {"diagnostics.early_until", "the last step of the early probes"},
      {"diagnostics.probe_texts", "sequences in the probe batch"},
      {"diagnostics.max_pairs", "cross-text token pairs sampled for batch_mean_cos"},
      {"diagnostics.socm", "also SOCM over all pairs of probe texts (last layer)"},
      {"eval.sts", "an STS CSV (sentence1, sentence2, score) or SICK.txt: Spearman of cosine against gold, at each evaluation"},
      {"eval.beir", "a BEIR folder: nDCG@10, MRR@10 and Recall@100 by exact search, at each evaluation"},
      {"eval.qrels", "eval.beir's split qrels/NAME.tsv; empty = train.tsv when present, else the only one"},
      {"eval.choices", "lm: multiple-choice JSONL files (context, endings, label), logged as NAME_acc and NAME_acc_norm at each evaluation"},
  };
  return meanings;
}

const Field* find_field(const std::string& key) {
  for (const auto& f : schema())
    if (f.key == key) return &f;
  return nullptr;
}

bool is_section(const std::string& path) {
  for (const auto& f : schema())
    if (f.key.rfind(path + ".", 0) == 0) return true;
  return false;
}

std::string keys_of_section(const std::string& section) {
  std::vector<std::string> keys;
  for (const auto& f : schema()) {
    if (f.key.rfind(section + ".", 0) != 0) continue;
    std::string rest = f.key.substr(section.size() + 1);
    if (rest.find('.') == std::string::npos) keys.push_back(rest);
  }
  return fmt::format("{}", fmt::join(keys, ", "));
}

std::string top_sections() {
  std::vector<std::string> names;
  for (const auto& f : schema()) {
    std::string s = f.key.substr(0, f.key.find('.'));
    if (std::find(names.begin(), names.end(), s) == names.end()) names.push_back(s);
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

void apply_table(Recipe& r, const toml::table& table, const std::string& prefix, const std::string& file) {
  for (const auto& [k, node] : table) {
    std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    Origin at{file, int(node.source().begin.line)};
    if (const Field* f = find_field(key)) {
      f->parse(r, node, at);
    } else if (node.is_table() && is_section(key)) {
      apply_table(r, *node.as_table(), key, file);
    } else if (prefix.empty()) {
      fail(at, key, node.is_table() ? "unknown section" : "unknown key", "valid sections: " + top_sections());
    } else {
      fail(at, key, "unknown key", "valid keys in [" + prefix + "]: " + keys_of_section(prefix));
    }
  }
}

std::string toml_quoted(const std::string& word) {
  std::string quoted = "\"";
  for (char c : word) quoted += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return quoted + "\"";
}

// "[q, doc]" -> "[\"q\", \"doc\"]"; items already quoted stay as they are, a value that is no array is returned whole.
std::string bare_words_quoted(const std::string& value) {
  if (value.size() < 2 || value.front() != '[' || value.back() != ']') return value;
  std::vector<std::string> items;
  std::stringstream inner(value.substr(1, value.size() - 2));
  for (std::string item; std::getline(inner, item, ',');) {
    const size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    item = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    items.push_back(!item.empty() && (item.front() == '"' || item.front() == '\'') ? item : toml_quoted(item));
  }
  return fmt::format("[{}]", fmt::join(items, ", "));
}

bool parse_toml_value(const std::string& value, toml::table& out) {
  try {
    out = toml::parse("v = " + value);
    return true;
  } catch (const toml::parse_error&) {
    return false;
  }
}

void apply_override(Recipe& r, const std::string& assignment) {
  const Origin at{"--set", 0};
  auto eq = assignment.find('=');
  if (eq == std::string::npos) fail(at, assignment, "expected section.key=value");
  std::string key = assignment.substr(0, eq), value = assignment.substr(eq + 1);
  const Field* f = find_field(key);
  if (!f) {
    auto dot = key.rfind('.');
    std::string section = dot == std::string::npos ? "" : key.substr(0, dot);
    fail(at, key, "unknown key", is_section(section) ? "valid keys in [" + section + "]: " + keys_of_section(section)
                                                     : "valid sections: " + top_sections());
  }
  // The value is read as TOML (numbers, booleans, arrays, quoted strings); a bare word is taken as a string, in an
  // array too ([q, doc]).
  const bool takes_arrays = f->type_name.find("array") != std::string::npos;  // run.name=[x] stays the name "[x]"
  toml::table parsed;
  if (!parse_toml_value(value, parsed) && !(takes_arrays && parse_toml_value(bare_words_quoted(value), parsed)) &&
      !parse_toml_value(toml_quoted(value), parsed))
    fail(at, key, "cannot read value '" + value + "'");
  // For string keys a bare word stays the word, even one TOML reads as a number (run.name=nan, run.name=1e3).
  const toml::node& node = *parsed.get("v");
  const bool wants_string = f->type_name == "string" || f->type_name == "string or array of strings";
  if (wants_string && !node.is_string() && !node.is_array()) {
    f->parse(r, toml::value<std::string>(value), at);
    return;
  }
  f->parse(r, node, at);
}

bool is_pair_source(const std::string& source) { return source != "text" && source != "wordnet"; }

void validate_maxsim(const Recipe& r) {
  const Origin at{r.source, 0};
  const auto& m = r.loss.maxsim;
  if (m.query_length > r.model.block_size)
    fail(at, "loss.maxsim.query_length", fmt::format("{} is longer than model.block_size = {}", m.query_length,
         r.model.block_size), "raise model.block_size or lower loss.maxsim.query_length");
  if (m.document_length > r.model.block_size)
    fail(at, "loss.maxsim.document_length", fmt::format("{} is longer than model.block_size = {}", m.document_length,
         r.model.block_size), "raise model.block_size or lower loss.maxsim.document_length");
  const auto& p = r.loss.pooling_aware;
  if (p.enabled && p.weight_full + p.weight_pooled <= 0)
    fail(at, "loss.pooling_aware.weight_pooled", "both weights are 0: there is no loss",
         "set weight_full and weight_pooled to 1 (the defaults)");
}

// train.init_from names a model folder that is not a spread export (interchange/hf_import.h, adopt_model_folder): the folder
// gives [model] (its shape, causality) after parsing, and the checks that read the shape run there instead.
bool shape_from_model_folder(const Recipe& r) {
  return !r.train.init_from.empty() && is_foreign_model_folder(r.train.init_from);
}

// kind hf reads tokenizer.path (and, for maxsim, the two marker entries); the other kinds never read them. With
// train.init_from a model folder, the folder's tokenizer is adopted after parsing (interchange/hf_import.h).
void validate_tokenizer(const Recipe& r) {
  const Origin at{r.source, 0};
  const auto& t = r.tokenizer;
  if (t.kind != "hf") {
    if (!t.path.empty())
      fail(at, "tokenizer.path", "is read only with tokenizer.kind = \"hf\"",
           "set kind = \"hf\" to use that Hugging Face tokenizer, or tokenizer.model for a sentencepiece model");
    if (!shape_from_model_folder(r))
      for (const auto& [key, value] : {std::pair{"tokenizer.query_marker", &t.query_marker},
                                       std::pair{"tokenizer.document_marker", &t.document_marker}})
        if (!value->empty())
          fail(at, key, "is read only with tokenizer.kind = \"hf\"",
               "drop it: kinds bpe and unigram reserve [Q] and [D] themselves");
    if (t.lowercase && !shape_from_model_folder(r))
      fail(at, "tokenizer.lowercase", "is read only with tokenizer.kind = \"hf\"",
           "drop it: a char, bpe or unigram vocabulary is learnt from the text as it is");
    return;
  }
  if (t.path.empty())
    fail(at, "tokenizer.path", "tokenizer.kind = \"hf\" needs the Hugging Face tokenizer to use",
         "set path to a tokenizer.json, vocab.txt, vocab.json or a folder holding one");
  if (!t.model.empty())
    fail(at, "tokenizer.model", "is a sentencepiece model; kind hf reads tokenizer.path", "drop tokenizer.model");
  if (t.query_marker.empty() != t.document_marker.empty())
    fail(at, t.query_marker.empty() ? "tokenizer.query_marker" : "tokenizer.document_marker",
         "is missing: the two markers go together", "set both tokenizer.query_marker and tokenizer.document_marker");
  const bool token_vectors = r.objective().head == Head::token_vectors;
  if (token_vectors && t.lowercase)
    fail(at, "tokenizer.lowercase", "is true, and PyLate's folders have no lower-casing step: the export would "
         "encode other ids than training saw", "set tokenizer.lowercase = false for maxsim");
  if (token_vectors && t.query_marker.empty())
    fail(at, "tokenizer.query_marker", "maxsim needs [Q] / [D] markers, and a Hugging Face vocabulary names none",
         "set tokenizer.query_marker and document_marker: \"[Q] \" and \"[D] \" are added to the vocabulary as "
         "PyLate adds them, or name two entries of it (BERT's \"[unused0]\" and \"[unused1]\"); a model folder "
         "as train.init_from gives PyLate's markers by itself");
}

// The objectives that train a causal language model (a next-token head), for messages.
std::string next_token_objectives() {
  return objective_names([](const ObjectiveTraits& t) { return t.head == Head::next_token; });
}

// Which data, model and losses each objective can use.
void validate_objective(const Recipe& r) {
  const Origin at{r.source, 0};
  const ObjectiveTraits& objective = r.objective();
  const bool wants_pairs = objective.inputs == Inputs::pairs;
  const auto pair_objectives = [](const ObjectiveTraits& t) { return t.inputs == Inputs::pairs; };
  if (wants_pairs && !is_pair_source(r.data.source))
    fail(at, "data.source", fmt::format("'{}' gives plain text, but train.objective = \"{}\" needs pairs",
                                        r.data.source, objective.name), "use pairs, wordnet_pairs, stsb, sick or beir");
  if (!wants_pairs && is_pair_source(r.data.source))
    fail(at, "data.source", fmt::format("'{}' gives pairs, but train.objective = \"{}\" needs text", r.data.source,
                                        objective.name),
         "use text or wordnet, or set train.objective = " + objective_names(pair_objectives));
  const bool folder_shape = shape_from_model_folder(r);
  if (objective.head == Head::token_vectors && !folder_shape) validate_maxsim(r);
  // (An LM may be trained without its causal mask, to study it; it then has no exported layout.)
  if (objective.attention == Attention::bidirectional && r.model.causal && !folder_shape)
    fail(at, "model.causal", fmt::format("train.objective = \"{}\" ({}) needs a bidirectional encoder",
                                         objective.name, objective.summary), "set model.causal = false");
  const auto& words = r.loss.maxsim.skiplist_words;
  if (!words.empty() && !r.loss.maxsim.skiplist)
    fail(at, "loss.maxsim.skiplist_words", "is read only with loss.maxsim.skiplist = true",
         "set skiplist = true, or drop the words");
  if (!words.empty() && r.tokenizer.kind != "hf" && !folder_shape)
    fail(at, "loss.maxsim.skiplist_words", "names vocabulary entries, which only tokenizer.kind = \"hf\" has",
         "drop it: kinds bpe and unigram skip punctuation by rule");
  if (is_pair_source(r.data.source) && r.data.source != "wordnet_pairs" && r.data.path.empty())
    fail(at, "data.path", "data.source = \"" + r.data.source + "\" needs a path",
         r.data.source == "beir" ? "the BEIR folder" : "the data file(s)");
  // [CLS] and [SEP] frame every encoder text: a shorter length would leave the text itself out.
  if (r.is_encoder_objective() && r.data.max_length > 0 && r.data.max_length < kMinEncoderLength)
    fail(at, "data.max_length", fmt::format("{} leaves no room for a text token between [CLS] and [SEP]",
                                            r.data.max_length),
         fmt::format("use at least {} (0 = model.block_size)", kMinEncoderLength));
  if (r.data.max_length > r.model.block_size && !folder_shape)
    fail(at, "data.max_length", fmt::format("{} is longer than model.block_size = {}", r.data.max_length, r.model.block_size),
         "raise model.block_size or lower data.max_length");
  if (r.is_encoder_objective() && r.loss.dispersion.enabled)
    fail(at, "loss.dispersion.enabled", "dispersion is a term of the LM objective (train.objective = \"lm\")");
  for (auto dim : r.loss.contrastive.matryoshka_dims)
    if (dim > r.model.n_embd && !folder_shape)
      fail(at, "loss.contrastive.matryoshka_dims", fmt::format("{} is wider than model.n_embd = {}", dim, r.model.n_embd));
}

void validate_blocks(const Recipe& r) {
  const Origin at{r.source, 0};
  const auto& m = r.model;
  if (m.n_kv_head > 0 && m.n_head % m.n_kv_head != 0)
    fail(at, "model.n_kv_head", fmt::format("model.n_head = {} is not a multiple of {}", m.n_head, m.n_kv_head),
         "use a divisor of model.n_head (0 = one k/v head per query head)");
  if (m.positions == "rope" && (m.n_embd / m.n_head) % 2 != 0)
    fail(at, "model.positions", fmt::format("rope rotates pairs of dimensions, and the head size n_embd / n_head = {} "
         "is odd", m.n_embd / m.n_head), "choose model.n_embd and model.n_head with an even quotient");
  if (m.norm == "rmsnorm" && m.norm_position == "post")
    fail(at, "model.norm", "rmsnorm is for pre-norm blocks here", "set model.norm_position = \"pre\"");
  if (m.global_every > 0 && m.attention_window == 0)
    fail(at, "model.global_every", "chooses the global layers among local ones, but model.attention_window = 0 makes "
         "every layer global", "set model.attention_window (ModernBERT: 128), or leave global_every out");
  if (m.local_rope_theta > 0 && m.positions != "rope")
    fail(at, "model.local_rope_theta", "is a rotary base, but model.positions is \"" + m.positions + "\"",
         "set model.positions = \"rope\", or leave local_rope_theta out");
  if (!m.first_block_norm && m.norm_position == "post")
    fail(at, "model.first_block_norm", "a post-norm block normalises after attention and cannot drop its norm",
         "set model.norm_position = \"pre\", or leave first_block_norm out");
}

void validate_shards(const Recipe& r) {
  const Origin at{r.source, 0};
  const DataConfig& d = r.data;
  if (!d.shards.empty() && !d.mix.empty())
    fail(at, "data.mix", "data.shards and data.mix both name the training shards",
         "keep one: data.shards for one set, or [[data.mix]] entries for a weighted mixture");
  const bool sharded = !d.shards.empty() || !d.mix.empty();
  const std::string train_key = d.mix.empty() ? "data.shards" : "data.mix";
  if (sharded != !d.val_shards.empty())
    fail(at, sharded ? "data.val_shards" : "data.shards", train_key + " and data.val_shards go together",
         "set both: the training shards and the validation shards (llm.c: DIR/*_train_*.bin and DIR/*_val_*.bin)");
  if (!sharded) return;
  if (r.objective().head != Head::next_token)
    fail(at, train_key, "token shards train a language model (train.objective = " + next_token_objectives() + ")",
         "leave " + train_key + " out of this recipe");
  if (r.tokenizer.kind == "char" || (r.tokenizer.kind != "hf" && r.tokenizer.model.empty()))
    fail(at, "tokenizer.kind", "token shards need the tokenizer that made them, which cannot be learnt from text "
                               "the run does not read",
         "set tokenizer.kind = \"hf\" and tokenizer.path (GPT-2's tokenizer.json for llm.c's shards), or "
         "tokenizer.model");
}

void validate_schedule(const Recipe& r) {
  const Origin at{r.source, 0};
  const TrainConfig& t = r.train;
  if (t.schedule == "wsd" && t.decay_fraction <= 0)
    fail(at, "train.decay_fraction", "wsd needs a decay, but decay_fraction is 0",
         "set train.decay_fraction to the share of the steps that decays (0.2 is common)");
  const int64_t decay_steps = int64_t(std::llround(t.decay_fraction * double(t.max_steps)));
  if (t.schedule == "wsd" && t.warmup_steps > t.max_steps - decay_steps)
    fail(at, "train.warmup_steps",
         fmt::format("{} warmup steps run into the decay, which starts at step {} (train.max_steps = {}, "
                     "train.decay_fraction = {})", t.warmup_steps, t.max_steps - decay_steps, t.max_steps,
                     t.decay_fraction),
         "lower train.warmup_steps or train.decay_fraction");
}

// Checks that involve several keys. Each names the key to change.
void validate(const Recipe& r) {
  const Origin at{r.source, 0};
  // "." and ".." would put the run in out_dir itself or in its parent, beside (and over) other runs' files.
  // A blank name makes a directory that no listing shows and no shell command names without quotes.
  const bool blank = r.run.name.find_first_not_of(" \t\r\n") == std::string::npos;
  if (blank || r.run.name.find('/') != std::string::npos || r.run.name == "." || r.run.name == "..")
    fail(at, "run.name", "'" + r.run.name + "' is not a directory name",
         "use a name with a visible character and without '/', not . or ..");
  if (r.run.device != "cpu" && r.run.device.rfind("cuda", 0) != 0 && r.run.device != "mps")
    fail(at, "run.device", "'" + r.run.device + "' is not a device", "use cpu, cuda or cuda:N");
  if (r.model.n_embd % r.model.n_head != 0)
    fail(at, "model.n_embd", fmt::format("{} is not divisible by model.n_head = {}", r.model.n_embd, r.model.n_head));
  validate_blocks(r);
  if (r.train.min_lr > r.train.lr)
    fail(at, "train.min_lr", fmt::format("{} is larger than train.lr = {}", r.train.min_lr, r.train.lr));
  validate_schedule(r);
  if (!r.eval.choices.empty() && r.objective().head != Head::next_token)
    fail(at, "eval.choices",
         "multiple-choice scores need a causal language model (train.objective = " + next_token_objectives() + ")",
         "leave eval.choices out of this recipe");
  validate_shards(r);
  if (r.data.source == "text" && r.data.path.empty() && r.data.shards.empty() && r.data.mix.empty())
    fail(at, "data.path", "data.source = \"text\" needs at least one file", "set data.path = \"corpus.txt\"");
  if (!r.train.keep_best.empty() &&
      (r.train.eval_every <= 0 || r.train.ckpt_every <= 0 || r.train.eval_every % r.train.ckpt_every != 0))
    fail(at, "train.keep_best", fmt::format("keeps the checkpoint of the best evaluation, but train.eval_every = {} "
                                            "is not a multiple of train.ckpt_every = {}",
                                            r.train.eval_every, r.train.ckpt_every),
         "set train.ckpt_every to train.eval_every (or a divisor of it), or train.keep_best = \"\"");
  validate_objective(r);
  validate_tokenizer(r);
  if ((r.diagnostics.early_every > 0) != (r.diagnostics.early_until > 0))
    fail(at, r.diagnostics.early_every > 0 ? "diagnostics.early_until" : "diagnostics.early_every",
         "diagnostics.early_every and diagnostics.early_until go together",
         "set both (e.g. early_every = 5, early_until = 50) or neither");
  const auto& d = r.loss.dispersion;
  for (auto layer : d.layers)
    if (layer < 0 || layer > r.model.n_layer)
      fail(at, "loss.dispersion.layers", fmt::format("layer {} does not exist", layer),
           fmt::format("layers are numbered 0 (embedding output) .. {} (last block)", r.model.n_layer));
}

// --- data.root: one folder for the data sets, "${data_root}" in the paths that name them ----------------------

constexpr const char* kDataRootVariable = "${data_root}";

// data.root, else SPREAD_DATA, else the folder beside the repository that the team's machines have.
std::string data_root_of(const Recipe& r, std::string* origin) {
  if (!r.data.root.empty()) {
    *origin = "data.root";
    return r.data.root;
  }
  if (const char* env = std::getenv("SPREAD_DATA"); env != nullptr && *env != '\0') {
    *origin = "SPREAD_DATA";
    return env;
  }
  *origin = "the default";
  return "../shared/data";
}

// `value` with "${data_root}" replaced; any other "${...}" is an error naming the key.
std::string expand_data_root(const std::string& value, const std::string& root, const Origin& at,
                             const std::string& key) {
  std::string out;
  for (size_t i = 0; i < value.size();) {
    if (value.compare(i, 2, "${") != 0) {
      out += value[i++];
      continue;
    }
    if (value.compare(i, std::strlen(kDataRootVariable), kDataRootVariable) != 0)
      fail(at, key, "'" + value + "' holds an unknown variable", "the only one is ${data_root} (data.root)");
    out += root;
    i += std::strlen(kDataRootVariable);
  }
  return out;
}

// Replaces ${data_root} in every path key and records the folder in data.root. A path made from the data root must
// exist: the usual cause is a machine without the data sets, and the fix is to say where they are.
void resolve_data_root(Recipe& r) {
  const Origin at{r.source, 0};
  std::string origin;
  const std::string root = data_root_of(r, &origin);
  auto resolve = [&](std::string& value, const std::string& key) {
    if (value.find("${") == std::string::npos) return;
    value = expand_data_root(value, root, at, key);
    std::error_code unreadable;  // a name past the system's limit is this key's error, not a filesystem_error
    if (!std::filesystem::exists(value, unreadable))
      fail(at, key,
           fmt::format("'{}' {} (data root '{}', from {})", value,
                       unreadable ? "cannot be looked at: " + unreadable.message() : "does not exist", root, origin),
           std::string("set SPREAD_DATA or data.root to the folder that holds the data sets (docs/data.md)") +
               (key.rfind("eval.", 0) == 0 ? ", or --set " + key + "= to leave this evaluation out" : ""));
  };
  for (auto& path : r.data.path) resolve(path, "data.path");
  // Patterns, not paths: their files are found (or not) when the run starts.
  for (auto* pattern : {&r.data.shards, &r.data.val_shards})
    if (pattern->find("${") != std::string::npos) *pattern = expand_data_root(*pattern, root, at, "data.shards");
  for (size_t i = 0; i < r.data.mix.size(); ++i)
    if (r.data.mix[i].shards.find("${") != std::string::npos)
      r.data.mix[i].shards = expand_data_root(r.data.mix[i].shards, root, at, mix_key(i, "shards"));
  resolve(r.eval.sts, "eval.sts");
  resolve(r.eval.beir, "eval.beir");
  for (auto& path : r.eval.choices) resolve(path, "eval.choices");
  resolve(r.tokenizer.model, "tokenizer.model");
  resolve(r.tokenizer.path, "tokenizer.path");
  r.data.root = root;
}

}  // namespace

std::string Recipe::run_dir() const { return (std::filesystem::path(run.out_dir) / run.name).string(); }

Recipe parse_recipe(const std::string& toml_text, const std::string& source_name,
                    const std::vector<std::string>& overrides) {
  Recipe r;
  r.source = source_name;
  toml::table parsed;
  try {
    parsed = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& err) {
    throw user_error(source_name, int(err.source().begin.line), "", "invalid TOML: " + std::string(err.description()));
  }
  apply_table(r, parsed, "", source_name);
  for (const auto& o : overrides) apply_override(r, o);
  resolve_data_root(r);
  validate(r);
  return r;
}

Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides) {
  auto text = read_whole_file(path);
  if (!text) throw user_error(path, 0, "", "cannot read the recipe file", "check the path");
  return parse_recipe(*text, path, overrides);
}

namespace {

// A key's default as TOML writes it.
std::string default_text(const Field& f) {
  toml::table t;
  f.emit(Recipe{}, t, "value");
  std::ostringstream out;
  t.get("value")->visit([&out](const auto& value) { out << value; });
  return out.str();
}

std::string markdown_cell(std::string text) {
  for (size_t at = text.find('|'); at != std::string::npos; at = text.find('|', at + 2)) text.replace(at, 1, "\\|");
  return text;
}

}  // namespace

std::string recipe_reference(bool markdown) {
  std::string out, section;
  if (markdown)
    out += "# Recipe reference\n\nEvery key of a recipe, with its type, default, allowed values and meaning. This page is "
           "generated by\n`spread recipe --keys --markdown` from the schema in `src/config/recipe.cpp`, and a test fails "
           "when the two differ.\nA key may also be given on the command line: `spread train RECIPE --set "
           "section.key=value`.\n";
  for (const auto& f : schema()) {
    const auto meaning = key_meanings().find(f.key);
    if (meaning == key_meanings().end()) throw std::logic_error("recipe key " + f.key + " has no meaning");
    const std::string here = f.key.substr(0, f.key.rfind('.')), leaf = f.key.substr(f.key.rfind('.') + 1);
    if (markdown && here != section)
      out += "\n## [" + here + "]\n\n| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n";
    section = here;
    if (markdown)
      out += fmt::format("| `{}` | {} | `{}` | {} | {} |\n", leaf, f.type_name, markdown_cell(default_text(f)),
                         markdown_cell(f.allowed), markdown_cell(meaning->second));
    else
      out += fmt::format("{}  ({}, default {}{})\n    {}\n", f.key, f.type_name, default_text(f),
                         f.allowed.empty() ? "" : "; " + f.allowed, meaning->second);
  }
  return out;
}

std::string recipe_to_toml(const Recipe& recipe) {
  toml::table root;
  for (const auto& f : schema()) {
    auto dot = f.key.rfind('.');
    toml::table* t = &root;
    std::string path = f.key.substr(0, dot);
    size_t start = 0;
    while (start <= path.size()) {
      size_t next = path.find('.', start);
      std::string part = path.substr(start, next == std::string::npos ? std::string::npos : next - start);
      auto [it, inserted] = t->insert(part, toml::table{});
      t = it->second.as_table();
      if (next == std::string::npos) break;
      start = next + 1;
    }
    f.emit(recipe, *t, f.key.substr(dot + 1));
  }
  std::ostringstream out;
  out << "# Resolved recipe written by spread (every key, defaults included).\n" << root << "\n";
  return out.str();
}

}  // namespace spread
