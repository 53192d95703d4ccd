#include "spread/interchange/hf_layout.h"

#include <fmt/format.h>

#include "spread/util/error.h"

namespace spread {
namespace {

// One block parameter in GPT-2: its spread suffix, GPT-2's, whether Conv1D transposes it, and for biases the
// width of the layer (so that a missing bias can be written as zeros).
struct Gpt2Name {
  const char* spread;
  const char* hf;
  bool transposed;
  int64_t bias_width_per_embd;  // 0 for weights and LayerNorm biases
};

const std::vector<Gpt2Name>& gpt2_block_names() {
  static const std::vector<Gpt2Name> names = {
      {"ln1.weight", "ln_1.weight", false, 0},           {"ln1.bias", "ln_1.bias", false, 0},
      {"attn.qkv.weight", "attn.c_attn.weight", true, 0}, {"attn.qkv.bias", "attn.c_attn.bias", false, 3},
      {"attn.proj.weight", "attn.c_proj.weight", true, 0}, {"attn.proj.bias", "attn.c_proj.bias", false, 1},
      {"ln2.weight", "ln_2.weight", false, 0},           {"ln2.bias", "ln_2.bias", false, 0},
      {"mlp.fc.weight", "mlp.c_fc.weight", true, 0},     {"mlp.fc.bias", "mlp.c_fc.bias", false, 4},
      {"mlp.proj.weight", "mlp.c_proj.weight", true, 0}, {"mlp.proj.bias", "mlp.c_proj.bias", false, 1}};
  return names;
}

const std::vector<std::pair<std::string, std::string>>& gpt2_top_names() {
  static const std::vector<std::pair<std::string, std::string>> names = {
      {"wte.weight", "transformer.wte.weight"},
      {"wpe.weight", "transformer.wpe.weight"},
      {"ln_f.weight", "transformer.ln_f.weight"},
      {"ln_f.bias", "transformer.ln_f.bias"}};
  return names;
}

const torch::Tensor& param(const NamedTensors& params, const std::string& name) {
  auto it = params.find(name);
  TORCH_CHECK(it != params.end(), "spread model has no parameter ", name);
  return it->second;
}

// A Linear's bias, or zeros when the model was built without biases.
torch::Tensor bias_or_zeros(const NamedTensors& params, const std::string& name, int64_t width) {
  auto it = params.find(name);
  return it != params.end() ? it->second : torch::zeros({width});
}

// The HF tensor named `hf`, with or without GPT2LMHeadModel's "transformer." prefix.
const torch::Tensor* find_gpt2(const NamedTensors& hf, const std::string& name) {
  auto it = hf.find(name);
  if (it == hf.end() && name.rfind("transformer.", 0) == 0) it = hf.find(name.substr(12));
  return it == hf.end() ? nullptr : &it->second;
}

const torch::Tensor& require_gpt2(const NamedTensors& hf, const std::string& name, const std::string& source) {
  const torch::Tensor* t = find_gpt2(hf, name);
  if (!t)
    throw user_error(source, 0, name, "missing from model.safetensors",
                     "give a GPT-2 export of spread or a GPT2LMHeadModel / GPT2Model folder");
  return *t;
}

}  // namespace

NamedTensors spread_parameters(const Transformer& model) {
  NamedTensors out;
  for (const auto& item : model->named_parameters()) out[item.key()] = item.value().detach().to(torch::kCPU);
  return out;
}

NamedTensors gpt2_tensors(const NamedTensors& params, const TransformerConfig& cfg) {
  NamedTensors out;
  for (const auto& [from, to] : gpt2_top_names()) out[to] = param(params, from);
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string s = fmt::format("blocks.{}.", i), h = fmt::format("transformer.h.{}.", i);
    for (const auto& n : gpt2_block_names()) {
      if (n.bias_width_per_embd > 0) {
        const int64_t width = n.spread == std::string("mlp.fc.bias") ? cfg.mlp_width() : n.bias_width_per_embd * cfg.n_embd;
        out[h + n.hf] = bias_or_zeros(params, s + n.spread, width);
        continue;
      }
      const auto& t = param(params, s + n.spread);
      out[h + n.hf] = n.transposed ? t.t().contiguous() : t;
    }
  }
  return out;
}

nlohmann::json gpt2_config(const TransformerConfig& cfg, int32_t bos_id, int32_t eos_id) {
  auto id = [](int32_t v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", cfg.vocab_size},
          {"n_positions", cfg.block_size},
          {"n_ctx", cfg.block_size},  // read by old transformers versions
          {"n_embd", cfg.n_embd},
          {"n_layer", cfg.n_layer},
          {"n_head", cfg.n_head},
          {"n_inner", cfg.mlp_width()},
          {"activation_function", cfg.gelu_tanh ? "gelu_new" : "gelu"},
          {"layer_norm_epsilon", cfg.layer_norm_eps},
          {"resid_pdrop", cfg.dropout},
          {"embd_pdrop", cfg.dropout},
          {"attn_pdrop", cfg.dropout},
          {"initializer_range", 0.02},
          {"scale_attn_weights", true},
          {"scale_attn_by_inverse_layer_idx", false},
          {"reorder_and_upcast_attn", false},
          {"tie_word_embeddings", true},
          {"use_cache", true},
          {"bos_token_id", id(bos_id)},
          {"eos_token_id", id(eos_id)},
          {"torch_dtype", "float32"}};
}

NamedTensors spread_tensors_from_gpt2(const NamedTensors& hf, const TransformerConfig& cfg,
                                      const std::string& source) {
  NamedTensors out;
  for (const auto& [to, from] : gpt2_top_names()) out["model." + to] = require_gpt2(hf, from, source);
  auto& wpe = out["model.wpe.weight"];
  if (wpe.dim() == 2 && wpe.size(0) > cfg.block_size) wpe = wpe.narrow(0, 0, cfg.block_size);  // a longer context
  if (const torch::Tensor* head = find_gpt2(hf, "lm_head.weight"))
    if (!head->sizes().equals(out["model.wte.weight"].sizes()) || !torch::equal(*head, out["model.wte.weight"]))
      throw user_error(source, 0, "lm_head.weight", "differs from transformer.wte.weight",
                       "spread ties its output embedding to the input one: only tied GPT-2 models load");
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string s = fmt::format("model.blocks.{}.", i), h = fmt::format("transformer.h.{}.", i);
    for (const auto& n : gpt2_block_names()) {
      const auto& t = require_gpt2(hf, h + n.hf, source);
      const bool model_has_it = cfg.bias || n.bias_width_per_embd == 0;
      if (!model_has_it) {
        if (t.count_nonzero().item<int64_t>() != 0)
          throw user_error(source, 0, h + n.hf, "is not zero but the model has no biases ([model] bias = false)",
                           "set bias = true in [model] to load this model");
        continue;
      }
      out[s + n.spread] = n.transposed && t.dim() == 2 ? t.t().contiguous() : t;
    }
  }
  return out;
}

NamedTensors megatron_bert_tensors(const NamedTensors& params, const TransformerConfig& cfg) {
  const int64_t C = cfg.n_embd;
  NamedTensors out;
  out["embeddings.word_embeddings.weight"] = param(params, "wte.weight");
  out["embeddings.position_embeddings.weight"] = param(params, "wpe.weight");
  // spread's own encoder has no segments (zeros); one with BERT's token types adds type 0's row everywhere.
  const auto types = params.find("wtt.weight");
  out["embeddings.token_type_embeddings.weight"] = types != params.end() ? types->second : torch::zeros({2, C});
  out["encoder.ln.weight"] = param(params, "ln_f.weight");
  out["encoder.ln.bias"] = param(params, "ln_f.bias");
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string s = fmt::format("blocks.{}.", i), h = fmt::format("encoder.layer.{}.", i);
    auto linear = [&](const std::string& from, const std::string& to, int64_t width) {
      out[h + to + ".weight"] = param(params, s + from + ".weight");
      out[h + to + ".bias"] = bias_or_zeros(params, s + from + ".bias", width);
    };
    out[h + "attention.ln.weight"] = param(params, s + "ln1.weight");
    out[h + "attention.ln.bias"] = param(params, s + "ln1.bias");
    // The fused projection's rows are q | k | v (the [B, T, 3, H, D] view in model/attention.cpp).
    const auto w = param(params, s + "attn.qkv.weight");
    const auto b = bias_or_zeros(params, s + "attn.qkv.bias", 3 * C);
    const char* parts[] = {"query", "key", "value"};
    for (int64_t p = 0; p < 3; ++p) {
      out[h + "attention.self." + parts[p] + ".weight"] = w.narrow(0, p * C, C).contiguous();
      out[h + "attention.self." + parts[p] + ".bias"] = b.narrow(0, p * C, C).contiguous();
    }
    linear("attn.proj", "attention.output.dense", C);
    out[h + "ln.weight"] = param(params, s + "ln2.weight");
    out[h + "ln.bias"] = param(params, s + "ln2.bias");
    linear("mlp.fc", "intermediate.dense", cfg.mlp_width());
    linear("mlp.proj", "output.dense", C);
  }
  return out;
}

nlohmann::json megatron_bert_config(const TransformerConfig& cfg, int32_t pad_id) {
  return {{"architectures", {"MegatronBertModel"}},
          {"model_type", "megatron-bert"},
          {"vocab_size", cfg.vocab_size},
          {"hidden_size", cfg.n_embd},
          {"num_hidden_layers", cfg.n_layer},
          {"num_attention_heads", cfg.n_head},
          {"intermediate_size", cfg.mlp_width()},
          {"hidden_act", cfg.gelu_tanh ? "gelu_new" : "gelu"},
          {"hidden_dropout_prob", cfg.dropout},
          {"attention_probs_dropout_prob", cfg.dropout},
          {"max_position_embeddings", cfg.block_size},
          {"type_vocab_size", cfg.type_vocab_size > 0 ? cfg.type_vocab_size : 2},
          {"initializer_range", 0.02},
          {"layer_norm_eps", cfg.layer_norm_eps},
          {"pad_token_id", std::max(pad_id, 0)},
          {"position_embedding_type", "absolute"},
          {"use_cache", false},
          {"torch_dtype", "float32"}};
}

NamedTensors bert_tensors(const NamedTensors& params, const TransformerConfig& cfg) {
  const int64_t C = cfg.n_embd;
  NamedTensors out;
  auto copy = [&](const std::string& from, const std::string& to) { out[to] = param(params, from); };
  auto linear = [&](const std::string& from, const std::string& to) {
    copy(from + ".weight", to + ".weight");
    copy(from + ".bias", to + ".bias");
  };
  copy("wte.weight", "embeddings.word_embeddings.weight");
  copy("wpe.weight", "embeddings.position_embeddings.weight");
  copy("wtt.weight", "embeddings.token_type_embeddings.weight");
  linear("emb_norm", "embeddings.LayerNorm");
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string s = fmt::format("blocks.{}.", i), h = fmt::format("encoder.layer.{}.", i);
    const char* parts[] = {"query", "key", "value"};
    for (const std::string kind : {"weight", "bias"}) {
      const auto& t = param(params, s + "attn.qkv." + kind);
      for (int64_t p = 0; p < 3; ++p) out[h + "attention.self." + parts[p] + "." + kind] = t.narrow(0, p * C, C).contiguous();
    }
    linear(s + "attn.proj", h + "attention.output.dense");
    linear(s + "ln1", h + "attention.output.LayerNorm");
    linear(s + "mlp.fc", h + "intermediate.dense");
    linear(s + "mlp.proj", h + "output.dense");
    linear(s + "ln2", h + "output.LayerNorm");
  }
  return out;
}

nlohmann::json bert_config(const TransformerConfig& cfg, int32_t pad_id) {
  return {{"architectures", {"BertModel"}},
          {"model_type", "bert"},
          {"vocab_size", cfg.vocab_size},
          {"hidden_size", cfg.n_embd},
          {"num_hidden_layers", cfg.n_layer},
          {"num_attention_heads", cfg.n_head},
          {"intermediate_size", cfg.mlp_width()},
          {"hidden_act", cfg.gelu_tanh ? "gelu_new" : "gelu"},
          {"hidden_dropout_prob", cfg.dropout},
          {"attention_probs_dropout_prob", cfg.dropout},
          {"max_position_embeddings", cfg.block_size},
          {"type_vocab_size", cfg.type_vocab_size},
          {"initializer_range", 0.02},
          {"layer_norm_eps", cfg.layer_norm_eps},
          {"pad_token_id", std::max(pad_id, 0)},
          {"position_embedding_type", "absolute"},
          {"use_cache", false},
          {"torch_dtype", "float32"}};
}

std::vector<LlamaTensor> llama_layout(const TransformerConfig& cfg) {
  const int64_t D = cfg.n_embd / cfg.n_head, q_rows = cfg.n_head * D, kv_rows = cfg.kv_heads() * D;
  const int64_t C = cfg.n_embd, I = cfg.mlp_width();
  std::vector<LlamaTensor> out = {{"wte.weight", {{"model.embed_tokens.weight", cfg.vocab_size}}}};
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string s = fmt::format("blocks.{}.", i), h = fmt::format("model.layers.{}.", i);
    out.push_back({s + "ln1.weight", {{h + "input_layernorm.weight", C}}});
    out.push_back({s + "attn.qkv.weight", {{h + "self_attn.q_proj.weight", q_rows},
                                           {h + "self_attn.k_proj.weight", kv_rows},
                                           {h + "self_attn.v_proj.weight", kv_rows}}});
    out.push_back({s + "attn.proj.weight", {{h + "self_attn.o_proj.weight", C}}});
    out.push_back({s + "ln2.weight", {{h + "post_attention_layernorm.weight", C}}});
    out.push_back({s + "mlp.fc.weight", {{h + "mlp.gate_proj.weight", I}, {h + "mlp.up_proj.weight", I}}});
    out.push_back({s + "mlp.proj.weight", {{h + "mlp.down_proj.weight", C}}});
  }
  out.push_back({"ln_f.weight", {{"model.norm.weight", C}}});
  if (!cfg.tie_embeddings) out.push_back({"lm_head.weight", {{"lm_head.weight", cfg.vocab_size}}});
  return out;
}

bool is_llama_shaped(const TransformerConfig& cfg) {
  return cfg.causal && !cfg.post_norm && cfg.rope && cfg.rms_norm && cfg.gated_mlp && cfg.silu && !cfg.bias &&
         cfg.type_vocab_size == 0 && !cfg.mlm_transform && cfg.head_dim == 0;
}

NamedTensors llama_tensors(const NamedTensors& params, const TransformerConfig& cfg) {
  NamedTensors out;
  for (const auto& t : llama_layout(cfg)) {
    int64_t row = 0;
    for (const auto& [name, rows] : t.parts) {
      out[name] = param(params, t.spread).narrow(0, row, rows).contiguous();
      row += rows;
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> modernbert_layout(const TransformerConfig& cfg) {
  const std::string p = cfg.mlm_transform ? "model." : "";
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](const std::string& spread, const std::string& hf, bool bias) {
    out.push_back({spread + ".weight", hf + ".weight"});
    if (bias) out.push_back({spread + ".bias", hf + ".bias"});
  };
  out.push_back({"wte.weight", p + "embeddings.tok_embeddings.weight"});
  add("emb_norm", p + "embeddings.norm", cfg.norm_bias);
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string s = fmt::format("blocks.{}.", i), h = fmt::format("{}layers.{}.", p, i);
    if (i > 0) add(s + "ln1", h + "attn_norm", cfg.norm_bias);
    add(s + "attn.qkv", h + "attn.Wqkv", cfg.bias);
    add(s + "attn.proj", h + "attn.Wo", cfg.bias);
    add(s + "ln2", h + "mlp_norm", cfg.norm_bias);
    add(s + "mlp.fc", h + "mlp.Wi", cfg.bias);
    add(s + "mlp.proj", h + "mlp.Wo", cfg.bias);
  }
  add("ln_f", p + "final_norm", cfg.norm_bias);
  if (cfg.mlm_transform) {
    add("mlm_dense", "head.dense", cfg.mlm_dense_bias);
    add("mlm_norm", "head.norm", cfg.norm_bias);
    out.push_back({"mlm_bias", "decoder.bias"});
    if (!cfg.tie_embeddings) out.push_back({"lm_head.weight", "decoder.weight"});
  }
  return out;
}

bool is_modernbert_shaped(const TransformerConfig& cfg) {
  return !cfg.causal && !cfg.post_norm && cfg.rope && !cfg.rms_norm && cfg.gated_mlp && !cfg.silu &&
         cfg.embedding_norm && !cfg.first_block_norm && cfg.type_vocab_size == 0 && cfg.kv_heads() == cfg.n_head;
}

NamedTensors modernbert_tensors(const NamedTensors& params, const TransformerConfig& cfg) {
  NamedTensors out;
  for (const auto& [spread_name, hf_name] : modernbert_layout(cfg)) out[hf_name] = param(params, spread_name);
  return out;
}

nlohmann::json modernbert_config(const TransformerConfig& cfg, int32_t pad_id, int32_t cls_id, int32_t sep_id) {
  auto id = [](int32_t v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  const char* act = cfg.gelu_tanh ? "gelu_pytorch_tanh" : "gelu";
  // Without a window every layer is global: one global layer in every 1.
  const int64_t every = cfg.attention_window > 0 ? cfg.global_every : 1;
  return {{"architectures", {cfg.mlm_transform ? "ModernBertForMaskedLM" : "ModernBertModel"}},
          {"model_type", "modernbert"},
          {"vocab_size", cfg.vocab_size},
          {"hidden_size", cfg.n_embd},
          {"intermediate_size", cfg.mlp_width()},
          {"num_hidden_layers", cfg.n_layer},
          {"num_attention_heads", cfg.n_head},
          {"max_position_embeddings", cfg.block_size},
          {"hidden_activation", act},
          {"classifier_activation", act},
          {"norm_eps", cfg.layer_norm_eps},
          {"norm_bias", cfg.norm_bias},
          {"attention_bias", cfg.bias},
          {"mlp_bias", cfg.bias},
          {"classifier_bias", cfg.mlm_dense_bias},
          {"decoder_bias", true},
          {"local_attention", cfg.attention_window > 0 ? cfg.attention_window : 128},
          {"global_attn_every_n_layers", every},
          {"global_rope_theta", cfg.rope_theta},
          {"local_rope_theta", cfg.local_rope_theta > 0 ? cfg.local_rope_theta : cfg.rope_theta},
          {"embedding_dropout", cfg.dropout},
          {"attention_dropout", cfg.dropout},
          {"mlp_dropout", cfg.dropout},
          {"initializer_range", 0.02},
          {"tie_word_embeddings", cfg.tie_embeddings},
          {"pad_token_id", id(pad_id)},
          {"cls_token_id", id(cls_id)},
          {"sep_token_id", id(sep_id)},
          {"bos_token_id", id(cls_id)},
          {"eos_token_id", id(sep_id)},
          {"torch_dtype", "float32"}};
}

nlohmann::json llama_config(const TransformerConfig& cfg, int32_t bos_id, int32_t eos_id) {
  auto id = [](int32_t v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", cfg.vocab_size},
          {"hidden_size", cfg.n_embd},
          {"intermediate_size", cfg.mlp_width()},
          {"num_hidden_layers", cfg.n_layer},
          {"num_attention_heads", cfg.n_head},
          {"num_key_value_heads", cfg.kv_heads()},
          {"head_dim", cfg.n_embd / cfg.n_head},
          {"hidden_act", "silu"},
          {"max_position_embeddings", cfg.block_size},
          {"rms_norm_eps", cfg.layer_norm_eps},
          {"rope_theta", cfg.rope_theta},
          {"rope_scaling", nullptr},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"attention_dropout", cfg.dropout},
          {"initializer_range", 0.02},
          {"tie_word_embeddings", cfg.tie_embeddings},
          {"use_cache", true},
          {"bos_token_id", id(bos_id)},
          {"eos_token_id", id(eos_id)},
          {"torch_dtype", "float32"}};
}

}  // namespace spread
