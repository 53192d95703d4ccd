// The trainer's transformer (model/transformer.h, the CPU fast paths) against the readable reference
// (model/reference.h) on one configuration per architecture family, every option on: hidden states, final states,
// logits and token vectors in inference, with padding packed out and not, and every parameter's gradient in
// training mode (the fused and recomputing backward passes against autograd through plain operators). The
// parameters are drawn so that no bias is zero and no norm weight one, so a misrouted one shows.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "spread/model/reference.h"
#include "spread/model/transformer.h"
#include "test_paths.h"

using spread::TransformerConfig;

namespace {

struct Family {
  std::string name;
  TransformerConfig cfg;
};
void PrintTo(const Family& f, std::ostream* os) { *os << f.name; }

TransformerConfig base(bool causal) {
  TransformerConfig c;
  c.vocab_size = 37;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_embd = 32;
  c.block_size = 16;
  c.causal = causal;
  return c;
}

std::vector<Family> families() {
  std::vector<Family> out;
  out.push_back({"spread_lm", base(true)});
  TransformerConfig gpt2 = base(true);
  gpt2.mlp.gelu_tanh = true;
  gpt2.mlp.width = 40;
  out.push_back({"gpt2", gpt2});
  TransformerConfig bert = base(false);
  bert.norm.post = true;
  bert.norm.eps = 1e-12;
  bert.compat.type_vocab_size = 2;
  bert.compat.mlm_transform = true;
  out.push_back({"bert", bert});
  TransformerConfig llama = base(true);
  llama.bias = false;
  llama.norm.rms = true;
  llama.positions.rope = true;
  llama.positions.rope_theta = 500000.0;
  llama.mlp.gated = llama.mlp.silu = true;
  llama.mlp.width = 24;
  llama.attention.n_kv_head = 2;
  llama.compat.tie_embeddings = false;
  out.push_back({"llama", llama});
  TransformerConfig modern = base(false);
  modern.n_layer = 4;
  modern.bias = false;
  modern.norm.bias = false;
  modern.norm.embedding = true;
  modern.norm.first_block = false;
  modern.positions.rope = true;
  modern.positions.rope_theta = 160000.0;
  modern.positions.local_rope_theta = 10000.0;
  modern.attention.window = 4;
  modern.attention.global_every = 3;
  modern.mlp.gated = true;
  modern.compat.mlm_transform = true;
  modern.compat.mlm_dense_bias = false;
  out.push_back({"modernbert", modern});
  TransformerConfig colbert = base(false);
  colbert.head_dim = 12;
  out.push_back({"colbert", colbert});
  return out;
}

// Random parameters: matrices N(0, 0.1), vectors (biases, norm weights) 1 + N(0, 0.2) for norm weights and
// N(0, 0.2) otherwise, so every vector matters.
spread::Transformer random_model(const TransformerConfig& cfg) {
  spread::Transformer model(cfg);
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    auto& p = item.value();
    const bool norm_weight =
        p.dim() == 1 && item.key().size() > 7 && item.key().compare(item.key().size() - 7, 7, ".weight") == 0;
    p.copy_(torch::randn_like(p) * (p.dim() >= 2 ? 0.1 : 0.2) + (norm_weight ? 1.0 : 0.0));
  }
  return model;
}

spread::ParameterMap parameters(const spread::Transformer& model) {
  spread::ParameterMap out;
  for (const auto& item : model->named_parameters()) out[item.key()] = item.value();
  return out;
}

// Rows 0 and 2 whole, row 1 padded after 10 tokens, row 3 after 5: a quarter of the positions, enough for the
// forward pass to pack the padding out when asked.
torch::Tensor key_padding(int64_t T) {
  auto valid = torch::ones({4, T}, torch::kBool);
  valid[1].narrow(0, 10, T - 10).fill_(false);
  valid[3].narrow(0, 5, T - 5).fill_(false);
  return valid;
}

// max |a - b| over the valid positions of [B, T, ..] tensors, relative to max |b|.
double relative_error(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& valid) {
  const auto mask = valid.unsqueeze(-1).expand_as(b);
  const auto diff = (a - b).masked_select(mask).abs().max().item<double>();
  return diff / b.masked_select(mask).abs().max().item<double>();
}

class ReferenceModel : public ::testing::TestWithParam<Family> {};

TEST_P(ReferenceModel, InferenceEqualsTheReferenceWithAndWithoutPacking) {
  torch::manual_seed(1);
  const TransformerConfig& cfg = GetParam().cfg;
  auto model = random_model(cfg);
  model->eval();
  torch::NoGradGuard no_grad;
  const int64_t T = cfg.block_size;
  const auto idx = torch::randint(cfg.vocab_size, {4, T}, torch::kLong);
  const auto valid = key_padding(T);
  const auto ref = spread::reference_forward(cfg, parameters(model), idx, valid);
  for (bool pack : {false, true}) {
    SCOPED_TRACE(pack ? "padding packed out" : "padded");
    const auto out = model->forward(idx, /*want_hidden=*/true, /*want_logits=*/true, valid, pack);
    ASSERT_EQ(out.hidden.size(), ref.hidden.size());
    for (size_t i = 0; i < ref.hidden.size(); ++i)
      EXPECT_LT(relative_error(out.hidden[i], ref.hidden[i], valid), 2e-5) << "hidden state " << i;
    EXPECT_LT(relative_error(out.final_hidden, ref.final_hidden, valid), 2e-5);
    EXPECT_LT(relative_error(out.logits, ref.logits, valid), 2e-5);
    if (cfg.head_dim > 0)
      EXPECT_LT(relative_error(model->token_vectors(out.final_hidden),
                               spread::reference_token_vectors(parameters(model), ref.final_hidden), valid),
                2e-5);
  }
}

TEST_P(ReferenceModel, TrainingGradientsEqualAutogradThroughTheReference) {
  torch::manual_seed(2);
  const TransformerConfig& cfg = GetParam().cfg;
  auto model = random_model(cfg);
  model->train();  // dropout is 0: the training paths (fused and recomputing nodes, direct GEMMs), same values
  const int64_t T = cfg.block_size;
  const auto idx = torch::randint(cfg.vocab_size, {4, T}, torch::kLong);
  const auto valid = key_padding(T);
  const auto weights = torch::randn({4, T, cfg.vocab_size}) * valid.unsqueeze(-1);
  const auto vector_weights = torch::randn({4, T, std::max<int64_t>(cfg.head_dim, 1)}) * valid.unsqueeze(-1);
  // A scalar of the logits and, for a late-interaction model, of its token vectors.
  auto gradients = [&](const torch::Tensor& logits, const torch::Tensor& vectors) {
    model->zero_grad();
    auto loss = (logits * weights).sum();
    if (vectors.defined()) loss = loss + (vectors * vector_weights).sum();
    loss.backward();
    std::map<std::string, torch::Tensor> g;
    for (const auto& item : model->named_parameters()) g[item.key()] = item.value().grad().clone();
    return g;
  };
  const auto out = model->forward(idx, false, true, valid, /*pack_padding=*/true);
  const auto fast = gradients(out.logits, cfg.head_dim > 0 ? model->token_vectors(out.final_hidden) : torch::Tensor());
  const auto ref_out = spread::reference_forward(cfg, parameters(model), idx, valid);
  const auto ref = gradients(
      ref_out.logits,
      cfg.head_dim > 0 ? spread::reference_token_vectors(parameters(model), ref_out.final_hidden) : torch::Tensor());
  for (const auto& [name, g] : ref) {
    const double scale = g.abs().max().item<double>();
    ASSERT_GT(scale, 0) << name << " gets no gradient from the reference";
    EXPECT_LT((fast.at(name) - g).abs().max().item<double>() / scale, 1e-4) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ReferenceModel, ::testing::ValuesIn(families()),
                         [](const auto& info) { return info.param.name; });

// Each option changes the reference's output: a reference that ignored one would agree with a model that ignored it
// too. Against the default model's parameters where the option needs none of its own.
TEST(ReferenceModelOptions, EveryOptionChangesTheOutput) {
  torch::manual_seed(3);
  const TransformerConfig plain = base(true);
  auto model = random_model(plain);
  const auto params = parameters(model);
  const auto idx = torch::randint(plain.vocab_size, {2, plain.block_size}, torch::kLong);
  torch::NoGradGuard no_grad;
  const auto expected = spread::reference_forward(plain, params, idx).logits;
  std::vector<std::pair<std::string, TransformerConfig>> variants;
  auto variant = [&](const std::string& name, auto change) {
    TransformerConfig c = plain;
    change(c);
    variants.push_back({name, c});
  };
  variant("causal", [](auto& c) { c.causal = false; });
  variant("gelu_tanh", [](auto& c) { c.mlp.gelu_tanh = true; });
  variant("silu", [](auto& c) { c.mlp.silu = true; });
  variant("rms", [](auto& c) { c.norm.rms = true; });
  variant("eps", [](auto& c) { c.norm.eps = 0.5; });
  variant("rope", [](auto& c) { c.positions.rope = true; });
  variant("window", [](auto& c) { c.attention.window = 2; });
  for (const auto& [name, c] : variants)
    EXPECT_FALSE(torch::allclose(spread::reference_forward(c, params, idx).logits, expected, 1e-4, 1e-5)) << name;
}

TEST(ReferenceModelOptions, AMissingParameterIsNamed) {
  TransformerConfig cfg = base(true);
  auto model = random_model(cfg);
  auto params = parameters(model);
  params.erase("blocks.1.mlp.fc.weight");
  try {
    spread::reference_forward(cfg, params, torch::zeros({1, 4}, torch::kLong));
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("blocks.1.mlp.fc.weight"), std::string::npos) << e.what();
  }
}

// The reference shares no code with the fast paths: of spread it includes its own header and the config only, and
// the config includes nothing of spread.
TEST(ReferenceModelOptions, TheReferenceDependsOnNoFastPath) {
  const std::string root = std::string(SPREAD_TEST_DATA_DIR) + "/../..";
  auto includes = [&](const std::string& path) {
    std::ifstream in(root + "/" + path);
    EXPECT_TRUE(in.good()) << path;
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    std::set<std::string> out;
    static const std::regex include(R"re(#include "(spread/[^"]+)")re");
    for (std::sregex_iterator it(s.begin(), s.end(), include), end; it != end; ++it) out.insert((*it)[1]);
    return out;
  };
  EXPECT_EQ(includes("src/model/reference.cpp"), (std::set<std::string>{"spread/model/reference.h"}));
  EXPECT_EQ(includes("include/spread/model/reference.h"), (std::set<std::string>{"spread/model/config.h"}));
  EXPECT_TRUE(includes("include/spread/model/config.h").empty());
}

}  // namespace
