// The table of Hugging Face architectures (interchange/architecture.h): each model shape is held by exactly one
// architecture, the one export writes; writing a model and reading it back through the same entry (config.json and
// weights) gives a model that computes the same. Exactness against transformers itself is in test_hf_import.cpp and
// test_export.cpp; this checks the table's wiring.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>

#include "spread/interchange/architecture.h"
#include "spread/run/setup.h"
#include "spread/util/error.h"

namespace {

using spread::TransformerConfig;

TransformerConfig base() {
  TransformerConfig c;
  c.vocab_size = 13;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  c.block_size = 6;
  return c;
}

// One model of each layout, as spread's recipes or imports make them.
std::map<std::string, TransformerConfig> one_model_per_layout() {
  TransformerConfig gpt2 = base();
  gpt2.causal = true;
  TransformerConfig llama = base();
  llama.n_head = 4, llama.attention.n_kv_head = 2, llama.n_embd = 16, llama.mlp.width = 20;
  llama.causal = true, llama.positions.rope = true, llama.norm.rms = true, llama.mlp.gated = true,
  llama.mlp.silu = true;
  llama.bias = false, llama.norm.bias = false, llama.compat.tie_embeddings = false;
  TransformerConfig bert = base();
  bert.causal = false, bert.norm.post = true, bert.compat.type_vocab_size = 2, bert.norm.eps = 1e-12;
  TransformerConfig distilbert = bert;
  distilbert.compat.type_vocab_size = 0, distilbert.mlp.width = 20, distilbert.mlp.gelu_tanh = true;
  TransformerConfig megatron = base();
  megatron.causal = false;
  TransformerConfig modernbert = base();
  modernbert.n_head = 2, modernbert.n_embd = 16, modernbert.n_layer = 4, modernbert.causal = false;
  modernbert.positions.rope = true, modernbert.mlp.gated = true, modernbert.norm.bias = false, modernbert.bias = false;
  modernbert.attention.window = 2, modernbert.attention.global_every = 3, modernbert.positions.local_rope_theta = 50.0;
  modernbert.norm.embedding = true, modernbert.norm.first_block = false;
  return {{"gpt2", gpt2},         {"llama", llama},           {"bert", bert},
          {"distilbert", distilbert}, {"megatron-bert", megatron}, {"modernbert", modernbert}};
}

}  // namespace

TEST(Architectures, EachModelShapeIsHeldByExactlyOneArchitecture) {
  const auto models = one_model_per_layout();
  for (const auto& a : spread::architectures())
    EXPECT_EQ(models.count(a.layout), a.holds ? 1u : 0u) << a.layout << ": every written layout is tried here";
  for (const auto& [layout, cfg] : models) {
    std::vector<std::string> holding;
    for (const auto& a : spread::architectures())
      if (a.holds && a.holds(cfg)) holding.push_back(a.layout);
    ASSERT_EQ(holding.size(), 1u) << layout;
    EXPECT_EQ(holding[0], layout);
    EXPECT_EQ(spread::architecture_holding(cfg)->layout, layout);
  }
}

TEST(Architectures, NamesSelectTheirEntryAndUnknownOnesNone) {
  std::set<std::string> seen;
  for (const auto& a : spread::architectures()) {
    EXPECT_FALSE(a.names.empty() || a.model_types.empty()) << a.layout;
    for (const auto* list : {&a.names, &a.model_types})
      for (const auto& name : *list) {
        EXPECT_TRUE(seen.insert(name).second) << name << " names two architectures";
        EXPECT_EQ(spread::architecture_named(name), &a) << name;
      }
  }
  EXPECT_EQ(spread::architecture_named("T5EncoderModel"), nullptr);
  EXPECT_EQ(spread::architecture_named(""), nullptr);
  const std::string supported = spread::supported_architectures();
  EXPECT_NE(supported.find("BertForPreTraining"), std::string::npos) << supported;
  EXPECT_NE(supported.find("ModernBertForMaskedLM"), std::string::npos) << supported;
  EXPECT_EQ(supported.find("megatron-bert"), std::string::npos) << supported;  // model_types are not listed
}

// Written by an entry and read back by the same one: config.json gives the same model (the forward pass agrees on
// random ids) and the weights come back as they were.
TEST(Architectures, WrittenAndReadBackEachComputesTheSameModel) {
  for (const auto& [layout, cfg] : one_model_per_layout()) {
    SCOPED_TRACE(layout);
    const spread::Architecture& a = spread::architecture(layout);
    torch::manual_seed(3);
    spread::Transformer model(cfg);
    model->eval();
    spread::ConfigTokenIds ids;
    ids.pad = 0, ids.cls = 1, ids.sep = 2, ids.bos = 1, ids.eos = 2;
    const nlohmann::json config = a.write_config(cfg, ids);
    const std::string name = config["architectures"][0].get<std::string>();
    EXPECT_EQ(spread::architecture_named(name), &a);
    const TransformerConfig read = a.read_config(config, "config.json", name);
    spread::Transformer back(read);
    back->eval();
    const spread::NamedTensors params = spread::spread_parameters(model);
    const spread::NamedTensors weights = a.read_weights(a.write_weights(params, cfg), read, config, "model");
    spread::load_model_weights(back, weights, "model");
    for (const auto& [key, t] : spread::spread_parameters(back)) {
      const auto it = params.find(key);
      if (it != params.end()) EXPECT_TRUE(torch::equal(t, it->second)) << key;
      // MegatronBertModel always has token types: spread's encoder without them is written with zero rows.
      else EXPECT_TRUE(key == "wtt.weight" && layout == "megatron-bert" && t.count_nonzero().item<int64_t>() == 0);
    }
    const auto idx = torch::randint(0, cfg.vocab_size, {2, cfg.block_size}, torch::kLong);
    torch::NoGradGuard no_grad;
    const auto want = model->forward(idx, /*want_hidden=*/false).logits;
    const auto got = back->forward(idx, /*want_hidden=*/false).logits;
    EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-6)) << (got - want).abs().max().item<double>();
  }
}

// RoBERTa is read only: its position ids start after the padding id, so the model keeps the rows from there on, and
// what it reads is a BERT (written back as BertModel, which computes the same from position 0).
TEST(Architectures, RobertaIsReadAsTheBertItComputes) {
  const spread::Architecture& roberta = spread::architecture("roberta");
  EXPECT_EQ(roberta.holds, nullptr);
  EXPECT_EQ(roberta.write_config, nullptr);
  const nlohmann::json config = {{"vocab_size", 13}, {"hidden_size", 8}, {"num_hidden_layers", 1},
                                 {"num_attention_heads", 2}, {"intermediate_size", 16}, {"hidden_act", "gelu"},
                                 {"max_position_embeddings", 10}, {"type_vocab_size", 1}, {"layer_norm_eps", 1e-5},
                                 {"pad_token_id", 1}};
  const TransformerConfig cfg = roberta.read_config(config, "config.json", "RobertaModel");
  EXPECT_EQ(cfg.block_size, 10 - 2);
  EXPECT_EQ(spread::architecture_holding(cfg)->layout, "bert");
  spread::Transformer bert(cfg);
  spread::NamedTensors hf = spread::architecture("bert").write_weights(spread::spread_parameters(bert), cfg);
  const torch::Tensor positions = torch::randn({10, 8});
  hf["embeddings.position_embeddings.weight"] = positions;
  const spread::NamedTensors read = roberta.read_weights(hf, cfg, config, "model.safetensors");
  EXPECT_TRUE(torch::equal(read.at("model.wpe.weight"), positions.narrow(0, 2, 8)));  // rows 2.. for pad id 1
  hf["embeddings.position_embeddings.weight"] = torch::randn({9, 8});
  EXPECT_THROW(roberta.read_weights(hf, cfg, config, "model.safetensors"), spread::UserError);
  nlohmann::json short_config = config;
  short_config["max_position_embeddings"] = 2;
  EXPECT_THROW(roberta.read_config(short_config, "config.json", "RobertaModel"), spread::UserError);
}
