// The wiring of the dispersion term (docs/design.md §3.4): which of the model's states each `layers` setting penalises,
// checked against states recomputed here from the model's own modules, and that lambda > 0 reaches the parameters with
// exactly the gradient of lambda * L_disp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "spread/config/recipe.h"
#include "spread/losses/dispersion.h"
#include "spread/losses/dispersion_term.h"
#include "spread/losses/weighted_loss.h"
#include "spread/model/transformer.h"

namespace {

constexpr int64_t kLayers = 3;

spread::Transformer tiny_model() {
  spread::TransformerConfig cfg;
  cfg.vocab_size = 17;
  cfg.n_layer = kLayers;
  cfg.n_head = 2;
  cfg.n_embd = 16;
  cfg.block_size = 8;
  torch::manual_seed(4);
  spread::Transformer model(cfg);
  model->eval();
  return model;
}

torch::Tensor token_ids() {
  torch::manual_seed(5);
  return torch::randint(0, 17, {2, 8}, torch::kLong);
}

// [embedding output, block 1 output, ..., block n output], by running the model's modules one at a time.
std::vector<torch::Tensor> block_outputs(spread::Transformer& model, const torch::Tensor& ids) {
  const int64_t T = ids.size(1);
  std::vector<torch::Tensor> states{model->wte->forward(ids) + model->wpe->forward(torch::arange(T))};
  auto mask = model->blocks[0]->as<spread::Block>()->attn->attention_mask({}, T);
  for (const auto& block : *model->blocks) states.push_back(block->as<spread::Block>()->forward(states.back(), mask));
  return states;
}

spread::DispersionConfig layers(const std::string& mode, bool after_norm, std::vector<int64_t> list = {}) {
  spread::DispersionConfig d;
  d.enabled = true;
  d.layers_mode = mode;
  d.after_norm = after_norm;
  d.layers = std::move(list);
  return d;
}

void expect_same(const std::vector<torch::Tensor>& got, const std::vector<torch::Tensor>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(torch::allclose(got[i], expected[i], 1e-5, 1e-6)) << "state " << i;
}

class DispersionTermLayers : public ::testing::Test {
 protected:
  torch::NoGradGuard no_grad;
  spread::Transformer model = tiny_model();
  torch::Tensor ids = token_ids();
  spread::TransformerOutput out = model->forward(ids, /*want_hidden=*/true, /*want_logits=*/false);
  std::vector<torch::Tensor> blocks = block_outputs(model, ids);
  torch::Tensor normed_last = model->ln_f->forward(blocks.back());
};

TEST_F(DispersionTermLayers, LastIsTheFinalNormOutputByDefault) {
  spread::DispersionConfig defaults;
  EXPECT_TRUE(defaults.after_norm);
  EXPECT_EQ(defaults.layers_mode, "last");
  defaults.enabled = true;
  expect_same(spread::DispersionTerm(defaults, kLayers).states(out), {normed_last});
  // The norm matters: the state before it is a different tensor.
  EXPECT_FALSE(torch::allclose(normed_last, blocks.back(), 1e-2, 1e-2));
}

TEST_F(DispersionTermLayers, LastBeforeTheNormWhenAsked) {
  expect_same(spread::DispersionTerm(layers("last", false), kLayers).states(out), {blocks.back()});
}

TEST_F(DispersionTermLayers, AllIsEveryBlockWithoutTheEmbeddingOutput) {
  const std::vector<torch::Tensor> every_block(blocks.begin() + 1, blocks.end());
  std::vector<torch::Tensor> expected(every_block.begin(), every_block.end() - 1);
  expected.push_back(normed_last);
  expect_same(spread::DispersionTerm(layers("all", true), kLayers).states(out), expected);
  expect_same(spread::DispersionTerm(layers("all", false), kLayers).states(out), every_block);
  // A list still names the embedding output as 0.
  expect_same(spread::DispersionTerm(layers("list", false, {0}), kLayers).states(out), {blocks[0]});
}

TEST_F(DispersionTermLayers, ListPicksTheGivenLayers) {
  expect_same(spread::DispersionTerm(layers("list", true, {0, 2}), kLayers).states(out), {blocks[0], blocks[2]});
  expect_same(spread::DispersionTerm(layers("list", true, {3, 1}), kLayers).states(out), {normed_last, blocks[1]});
}

TEST_F(DispersionTermLayers, ValueIsTheMeanOverTheChosenStates) {
  spread::Batch batch{ids, ids};
  auto term = spread::DispersionTerm(layers("list", true, {0, 3}), kLayers);
  spread::DispersionOptions opt;  // the term's config defaults are the loss's defaults (tau 0.5, t 1e-4)
  double expected = (spread::dispersion_loss(blocks[0], {}, opt, 0).item<double>() +
                     spread::dispersion_loss(normed_last, {}, opt, 0).item<double>()) /
                    2;
  EXPECT_NEAR(term.compute({out, batch, 9}).item<double>(), expected, 1e-5);
}

std::vector<torch::Tensor> gradients(spread::Transformer& model, const torch::Tensor& loss) {
  model->zero_grad();
  loss.backward();
  std::vector<torch::Tensor> g;
  for (const auto& p : model->parameters()) g.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  return g;
}

TEST(DispersionTerm, LambdaAddsExactlyItsGradientToTheObjective) {
  spread::Transformer model = tiny_model();
  torch::Tensor ids = token_ids();
  spread::Batch batch{ids.narrow(1, 0, 7), ids.narrow(1, 1, 7)};
  spread::Recipe recipe;
  recipe.model.n_layer = kLayers;
  recipe.loss.dispersion.enabled = true;
  auto objective_grad = [&](double lambda) {
    recipe.loss.dispersion.lambda = lambda;
    auto objective = spread::make_lm_loss(recipe);
    auto out = model->forward(batch.x, objective.needs_hidden(), objective.needs_logits());
    return gradients(model, objective.compute({out, batch, 3}).total);
  };
  auto with = objective_grad(2.0), without = objective_grad(0.0);
  // The penalty alone, on the state it must use (the last block after the final norm), times lambda.
  auto disp = gradients(model, 2.0 * spread::dispersion_loss(model->forward(batch.x, true, false).final_hidden, {},
                                                              spread::DispersionOptions(), 0));
  double moved = 0;
  for (size_t i = 0; i < with.size(); ++i) {
    EXPECT_TRUE(torch::allclose(with[i] - without[i], disp[i], 1e-4, 1e-6)) << "parameter " << i;
    moved += (with[i] - without[i]).abs().sum().item<double>();
  }
  EXPECT_GT(moved, 1e-3);
}

}  // namespace
