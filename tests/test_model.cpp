// The transformer: causality, padding, gradients against finite differences, and the flat AdamW against
// LibTorch's own AdamW.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "spread/model/transformer.h"
#include "spread/train/optimizer.h"

using spread::Transformer;
using spread::TransformerConfig;

namespace {

TransformerConfig tiny(bool causal = true) {
  TransformerConfig c;
  c.vocab_size = 11;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  c.block_size = 12;
  c.causal = causal;
  return c;
}

}  // namespace

TEST(Transformer, ChangingAFutureTokenNeverChangesEarlierLogits) {
  torch::manual_seed(0);
  Transformer model(tiny());
  model->eval();
  auto x = torch::randint(0, 11, {2, 12}, torch::kLong);
  auto y = x.clone();
  y.index_put_({torch::indexing::Slice(), 7}, (x.index({torch::indexing::Slice(), 7}) + 1) % 11);
  auto lx = model->forward(x).logits, ly = model->forward(y).logits;
  EXPECT_TRUE(torch::equal(lx.narrow(1, 0, 7), ly.narrow(1, 0, 7)));
  EXPECT_FALSE(torch::allclose(lx.narrow(1, 7, 5), ly.narrow(1, 7, 5)));
}

TEST(Transformer, BidirectionalSeesTheFuture) {
  torch::manual_seed(0);
  Transformer model(tiny(/*causal=*/false));
  model->eval();
  auto x = torch::randint(0, 11, {1, 12}, torch::kLong);
  auto y = x.clone();
  y[0][11] = (x[0][11].item<int64_t>() + 1) % 11;
  EXPECT_FALSE(torch::allclose(model->forward(x).logits.narrow(1, 0, 1), model->forward(y).logits.narrow(1, 0, 1)));
}

TEST(Transformer, PaddedKeysDoNotAffectValidPositions) {
  torch::manual_seed(0);
  Transformer model(tiny(/*causal=*/false));
  model->eval();
  auto x = torch::randint(0, 11, {1, 12}, torch::kLong);
  auto mask = torch::ones({1, 12}, torch::kBool);
  mask.index_put_({0, torch::indexing::Slice(8, 12)}, false);
  auto y = x.clone();
  y.index_put_({0, torch::indexing::Slice(8, 12)}, 3);
  auto a = model->forward(x, false, true, mask).logits.narrow(1, 0, 8);
  auto b = model->forward(y, false, true, mask).logits.narrow(1, 0, 8);
  auto alone = model->forward(x.narrow(1, 0, 8)).logits;
  EXPECT_TRUE(torch::allclose(a, b, 1e-6, 1e-6));
  EXPECT_TRUE(torch::allclose(a, alone, 1e-5, 1e-5));
}

TEST(Transformer, HiddenStatesOnePerLayerPlusEmbeddings) {
  Transformer model(tiny());
  auto out = model->forward(torch::zeros({2, 5}, torch::kLong), /*want_hidden=*/true);
  ASSERT_EQ(out.hidden.size(), 3u);
  for (const auto& h : out.hidden) EXPECT_EQ(h.sizes(), (std::vector<int64_t>{2, 5, 8}));
}

namespace {

// Central differences in float64 against the analytic gradient, at three entries of every parameter.
void expect_gradient_matches_finite_differences(const TransformerConfig& cfg, const torch::Tensor& key_padding = {},
                                                bool pack_padding = false) {
  torch::manual_seed(1);
  Transformer model(cfg);
  model->to(torch::kDouble);
  auto x = torch::randint(0, cfg.vocab_size, {2, 6}, torch::kLong);
  auto t = torch::randint(0, cfg.vocab_size, {2, 6}, torch::kLong);
  auto loss_of = [&] {
    return spread::TransformerImpl::lm_loss(model->forward(x, false, true, key_padding, pack_padding).logits, t);
  };
  loss_of().backward();
  const double h = 1e-6;
  int checked = 0;
  for (auto& item : model->named_parameters()) {
    auto p = item.value();
    auto flat = p.data().view({-1});
    for (int64_t i : {int64_t(0), flat.numel() / 2, flat.numel() - 1}) {
      double analytic = p.grad().view({-1})[i].item<double>();
      double orig = flat[i].item<double>();
      torch::NoGradGuard ng;
      flat[i] = orig + h;
      double up = loss_of().item<double>();
      flat[i] = orig - h;
      double down = loss_of().item<double>();
      flat[i] = orig;
      double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(analytic, numeric, 1e-6 + 1e-5 * std::abs(numeric)) << item.key() << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 30);
}

// The Llama-style options: rotary positions, RMSNorm, SwiGLU, two query heads per k/v head, an untied output.
TransformerConfig tiny_llama() {
  TransformerConfig c = tiny();
  c.n_head = 4;
  c.attention.n_kv_head = 2;
  c.n_embd = 16;
  c.positions.rope = true;
  c.positions.rope_theta = 500.0;
  c.norm.rms = true;
  c.mlp.gated = true;
  c.mlp.silu = true;
  c.mlp.width = 20;
  c.bias = false;
  c.compat.tie_embeddings = false;
  return c;
}

}  // namespace

TEST(Transformer, GradientMatchesFiniteDifferences) { expect_gradient_matches_finite_differences(tiny()); }

TEST(Transformer, ModernBlocksGradientMatchesFiniteDifferences) {
  expect_gradient_matches_finite_differences(tiny_llama());
  TransformerConfig geglu = tiny_llama();  // a bidirectional GeGLU encoder with a bias-free LayerNorm, padded
  geglu.causal = false;
  geglu.norm.rms = false;
  geglu.norm.bias = false;
  geglu.mlp.silu = false;
  geglu.mlp.gelu_tanh = true;
  auto padding = torch::ones({2, 6}, torch::kBool);
  padding[1][5] = false;
  expect_gradient_matches_finite_differences(geglu, padding);
}

namespace {

// ModernBERT's block: local attention of width 2 (one key either way) on layers 1 and 2, global layers 0 and 3, two
// rotary bases, GeGLU, bias-free LayerNorms, an embedding norm and none before block 0.
TransformerConfig tiny_modernbert() {
  TransformerConfig c = tiny_llama();
  c.n_layer = 4;
  c.attention.n_kv_head = 0;
  c.causal = false;
  c.norm.rms = false;
  c.norm.bias = false;
  c.mlp.silu = false;
  c.compat.tie_embeddings = true;
  c.attention.window = 2;
  c.attention.global_every = 3;
  c.positions.local_rope_theta = 50.0;
  c.norm.embedding = true;
  c.norm.first_block = false;
  return c;
}

}  // namespace

// Gradients through local layers on a padded batch in float64 (the unfused path, whose window mask lets a padding
// query see itself), against central differences.
TEST(Transformer, LocalAttentionGradientMatchesFiniteDifferences) {
  auto padding = torch::ones({2, 6}, torch::kBool);
  padding[1].narrow(0, 3, 3).fill_(false);  // text 1's last query sees only padding within its window
  expect_gradient_matches_finite_differences(tiny_modernbert(), padding);
}

// The fused kernel (float32, window in its row blocks) and the unfused path (float64, a T x T band mask) give the
// same valid rows on a padded batch whose padding queries see no valid key within their window, and no NaN
// reaches a valid row through them.
TEST(Transformer, LocalAttentionFusedAndUnfusedAgreeOnAPaddedBatch) {
  torch::manual_seed(6);
  Transformer model(tiny_modernbert());
  model->eval();
  auto ids = torch::randint(0, 11, {2, 9}, torch::kLong);
  auto padding = torch::ones({2, 9}, torch::kBool);
  padding[1].narrow(0, 3, 6).fill_(false);
  torch::NoGradGuard ng;
  const auto fused = model->forward(ids, true, true, padding);
  model->to(torch::kDouble);
  const auto unfused = model->forward(ids, true, true, padding);
  EXPECT_TRUE(fused.logits.isfinite().all().item<bool>());
  EXPECT_TRUE(torch::allclose(fused.logits[0].to(torch::kDouble), unfused.logits[0], 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(fused.logits[1].narrow(0, 0, 3).to(torch::kDouble), unfused.logits[1].narrow(0, 0, 3),
                              1e-5, 1e-5));
  // The window reaches the layers: without it (every layer global) the outputs differ.
  TransformerConfig global = tiny_modernbert();
  global.attention.window = 0;
  global.attention.global_every = 0;
  torch::manual_seed(6);
  Transformer all_global(global);
  all_global->eval();
  EXPECT_FALSE(torch::allclose(all_global->forward(ids).logits, model->forward(ids).logits.to(torch::kFloat), 1e-4, 1e-4));
}

// Each option changes the model (a flag that is parsed but never reaches the forward would pass the gradient test).
TEST(Transformer, EachModernOptionChangesTheOutput) {
  auto logits_of = [](const TransformerConfig& c) {
    torch::manual_seed(3);
    Transformer model(c);
    model->eval();
    torch::NoGradGuard ng;
    // The same weights wherever the shapes agree, so only the option differs.
    torch::manual_seed(4);
    for (auto& p : model->parameters()) p.normal_(0.0, 0.3);
    return model->forward(torch::arange(6, torch::kLong).remainder(11).view({1, 6})).logits;
  };
  const auto base = logits_of(tiny_llama());
  auto differs = [&](void (*change)(TransformerConfig&), const char* what) {
    TransformerConfig c = tiny_llama();
    change(c);
    EXPECT_FALSE(torch::allclose(base, logits_of(c), 1e-4, 1e-4)) << what;
  };
  differs([](TransformerConfig& c) { c.positions.rope_theta = 10000.0; }, "rope_theta");
  differs([](TransformerConfig& c) { c.norm.rms = false, c.norm.bias = false; }, "rmsnorm");
  differs([](TransformerConfig& c) { c.mlp.silu = false; }, "swiglu vs geglu");
}

// A rotary model's memory does not grow with its context length (an imported Llama 3 config has 131,072
// positions: a cos/sin table of every position kept in every layer was 64 MiB a layer), and the context length
// does not change its outputs on a short input.
TEST(Transformer, RotaryModelsKeepNoTableOfEveryPosition) {
  auto model_with_block = [](int64_t block) {
    TransformerConfig c = tiny_llama();
    c.block_size = block;
    torch::manual_seed(3);
    return Transformer(c);
  };
  auto long_context = model_with_block(131072), short_context = model_with_block(16);
  int64_t buffered = 0;
  for (const auto& b : long_context->buffers()) buffered += b.numel();
  EXPECT_LT(buffered, 131072) << "a buffer scales with block_size";
  long_context->eval();
  short_context->eval();
  torch::NoGradGuard ng;
  auto ids = torch::arange(12, torch::kLong).remainder(11).view({1, 12});
  EXPECT_TRUE(torch::equal(long_context->forward(ids).logits, short_context->forward(ids).logits));
}

// A model made to be loaded (WeightInit::none, as spread encode/eval/generate make theirs) has the random model's
// parameters (names, shapes, dtypes) and, once they are copied in, its logits bit for bit. It draws no random
// numbers for its embeddings or the N(0, 0.02) initialisation: a model whose only matrices are embeddings leaves
// the generator where it was, which the randomly initialised one does not.
namespace {

// The encoders a padded batch reaches: BERT's post-norm block, spread's pre-norm one, and ModernBERT's (rotary,
// local windows, GeGLU) with grouped-query heads.
std::vector<std::pair<std::string, TransformerConfig>> padded_encoders() {
  TransformerConfig bert = tiny(/*causal=*/false);
  bert.norm.post = true;
  bert.compat.type_vocab_size = 2;
  bert.compat.mlm_transform = true;
  TransformerConfig modern = tiny_modernbert();
  modern.attention.n_kv_head = 2;
  return {{"bert", bert}, {"pre-norm", tiny(/*causal=*/false)}, {"modernbert", modern}};
}

// A weighted sum of the valid rows of every output, so that one backward pass reaches every parameter; weights:
// [T, C], of which the first T of the output are used.
torch::Tensor probe_loss(const spread::TransformerOutput& out, const torch::Tensor& valid, const torch::Tensor& weights) {
  auto w = weights.narrow(0, 0, out.final_hidden.size(1));
  auto rows = valid.unsqueeze(-1).to(out.final_hidden.scalar_type());
  auto loss = (out.final_hidden * w * rows).sum() + (out.logits * rows).pow(2).sum() * 1e-3;
  for (const auto& h : out.hidden) loss = loss + (h * rows).sum() * 1e-2;
  return loss;
}

}  // namespace

// A batch an eighth or more padding, when its caller reads no padding row (pack_padding), runs its blocks on the
// valid tokens only (PackedRows). The reference: each text alone, unpadded and unmasked. Every layer's hidden
// states, the logits and every parameter's gradient agree; the padding rows are exactly zero, which shows the
// packed path ran (without pack_padding the padding rows hold values).
TEST(Transformer, APackedBatchEqualsEachTextAlone) {
  const std::vector<int64_t> lengths = {12, 3, 7, 1};
  auto valid = torch::zeros({4, 12}, torch::kBool);
  for (int64_t b = 0; b < 4; ++b) valid[b].narrow(0, 0, lengths[b]).fill_(true);
  for (const auto& [name, cfg] : padded_encoders()) {
    SCOPED_TRACE(name);
    torch::manual_seed(4);
    Transformer model(cfg);
    model->eval();
    auto ids = torch::randint(0, cfg.vocab_size, {4, 12}, torch::kLong);
    auto weights = torch::randn({12, cfg.n_embd});
    auto batch = model->forward(ids, /*want_hidden=*/true, /*want_logits=*/true, valid, /*pack_padding=*/true);
    probe_loss(batch, valid, weights).backward();
    std::vector<torch::Tensor> batch_grads;
    for (const auto& p : model->parameters()) batch_grads.push_back(p.grad().clone());
    model->zero_grad();
    torch::Tensor loss_alone = torch::zeros({});
    for (int64_t b = 0; b < 4; ++b) {
      auto alone = model->forward(ids[b].narrow(0, 0, lengths[b]).unsqueeze(0), true, true);
      loss_alone = loss_alone + probe_loss(alone, torch::ones({1, lengths[b]}, torch::kBool), weights);
      for (size_t l = 0; l < alone.hidden.size(); ++l)
        EXPECT_TRUE(torch::allclose(batch.hidden[l][b].narrow(0, 0, lengths[b]), alone.hidden[l][0], 1e-5, 1e-5))
            << "text " << b << ", hidden state " << l;
      EXPECT_TRUE(torch::allclose(batch.logits[b].narrow(0, 0, lengths[b]), alone.logits[0], 1e-5, 1e-5)) << b;
    }
    loss_alone.backward();
    const auto params = model->named_parameters();
    for (size_t i = 0; i < params.size(); ++i)
      EXPECT_TRUE(torch::allclose(batch_grads[i], params[i].value().grad(), 1e-4, 1e-5)) << params[i].key();
    const auto unpacked = model->forward(ids, true, true, valid);
    const auto at_padding = valid.logical_not().unsqueeze(-1);
    for (size_t l = 1; l < batch.hidden.size(); ++l) {
      EXPECT_EQ(batch.hidden[l].masked_select(at_padding).abs().max().item<float>(), 0.0f) << "hidden state " << l;
      EXPECT_GT(unpacked.hidden[l].masked_select(at_padding).abs().max().item<float>(), 0.0f) << "hidden state " << l;
    }
  }
}

// Gradients of the packed path against central differences in float64, for ModernBERT's block (rotary positions
// and local windows around the padding) and BERT's. The loss is over every position; the padding's logits are
// constants of the packed path (the output bias of zero hidden states).
TEST(Transformer, PackedBatchGradientMatchesFiniteDifferences) {
  auto padding = torch::ones({2, 6}, torch::kBool);
  padding[0].narrow(0, 4, 2).fill_(false);
  padding[1].narrow(0, 2, 4).fill_(false);
  ASSERT_TRUE(bool(spread::PackedRows::of(padding)));
  expect_gradient_matches_finite_differences(tiny_modernbert(), padding, /*pack_padding=*/true);
  TransformerConfig bert = tiny(false);
  bert.norm.post = true;
  expect_gradient_matches_finite_differences(bert, padding, /*pack_padding=*/true);
}

// Which batches are packed, and the rows they keep: b * T + t of each valid token, in order.
TEST(Transformer, PackedRowsKeepTheValidTokensOfBatchesWorthPacking) {
  auto valid = torch::tensor({1, 1, 0, 0, 1, 0, 1, 1}, torch::kBool).view({2, 4});
  const auto packed = spread::PackedRows::of(valid);
  ASSERT_TRUE(bool(packed));
  EXPECT_TRUE(torch::equal(packed.index, torch::tensor({0, 1, 4, 6, 7}, torch::kLong)));
  auto x = torch::arange(24, torch::kFloat).view({2, 4, 3});
  auto rows = packed.unpad(x);
  EXPECT_TRUE(torch::equal(rows.select(1, 0), torch::tensor({0.f, 3.f, 12.f, 18.f, 21.f})));
  auto back = packed.pad(rows);
  EXPECT_TRUE(torch::equal(back, x * valid.unsqueeze(-1)));
  // One position in 16 is padding: below the share worth packing. No padding, or none given: not packed.
  auto mostly = torch::ones({2, 8}, torch::kBool);
  mostly[1][7] = false;
  EXPECT_FALSE(bool(spread::PackedRows::of(mostly)));
  mostly[0][7] = false;
  EXPECT_TRUE(bool(spread::PackedRows::of(mostly)));  // 2 in 16 = 0.125
  EXPECT_FALSE(bool(spread::PackedRows::of(torch::ones({2, 8}, torch::kBool))));
  EXPECT_FALSE(bool(spread::PackedRows::of({})));
}

TEST(Transformer, AModelMadeForLoadingSkipsTheRandomInitialisation) {
  TransformerConfig bert_like = tiny(false);
  bert_like.compat.type_vocab_size = 2;
  bert_like.norm.post = true;
  for (const TransformerConfig& c : {bert_like, tiny_llama()}) {
    torch::manual_seed(5);
    Transformer random(c), blank(c, spread::WeightInit::none);
    auto from = random->named_parameters(), to = blank->named_parameters();
    ASSERT_EQ(from.keys(), to.keys());
    torch::NoGradGuard ng;
    for (size_t i = 0; i < from.size(); ++i) {
      EXPECT_TRUE(from[i].value().sizes().equals(to[i].value().sizes())) << from[i].key();
      EXPECT_EQ(from[i].value().scalar_type(), to[i].value().scalar_type()) << from[i].key();
      EXPECT_TRUE(to[i].value().requires_grad()) << from[i].key();
      to[i].value().copy_(from[i].value());
    }
    random->eval();
    blank->eval();
    auto ids = torch::arange(12, torch::kLong).remainder(11).view({2, 6});
    EXPECT_TRUE(torch::equal(random->forward(ids).logits, blank->forward(ids).logits));
  }

  TransformerConfig embeddings_only = tiny();
  embeddings_only.n_layer = 0;
  torch::manual_seed(9);
  const auto untouched = torch::rand({4});
  torch::manual_seed(9);
  Transformer blank(embeddings_only, spread::WeightInit::none);
  EXPECT_TRUE(torch::equal(torch::rand({4}), untouched)) << "WeightInit::none drew random numbers";
  torch::manual_seed(9);
  Transformer random(embeddings_only);
  EXPECT_FALSE(torch::equal(torch::rand({4}), untouched)) << "the random model drew none: the check above proves nothing";
}

TEST(FlatOptimizer, MatchesLibTorchAdamWWithClipping) {
  torch::manual_seed(2);
  auto a = torch::randn({5, 3}), b = torch::randn({7});
  auto ra = a.clone().requires_grad_(true), rb = b.clone().requires_grad_(true);  // reference copies
  auto fa = a.clone().requires_grad_(true), fb = b.clone().requires_grad_(true);
  spread::FlatOptimizer flat;
  flat.add_group("decay", {fa}, {1e-2, 0.9, 0.95, 1e-8, 0.1});
  flat.add_group("no_decay", {fb}, {1e-2, 0.9, 0.95, 1e-8, 0.0});
  torch::optim::AdamW ref({torch::optim::OptimizerParamGroup({ra}, std::make_unique<torch::optim::AdamWOptions>(
                                                                      torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1))),
                           torch::optim::OptimizerParamGroup({rb}, std::make_unique<torch::optim::AdamWOptions>(
                                                                      torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.0)))});
  for (int step = 0; step < 5; ++step) {
    auto w = torch::randn({5, 3}), v = torch::randn({7});
    ref.zero_grad();
    ((ra * w).sum() * 3 + (rb * v).sum()).backward();
    double clip = 0.5;
    auto total = torch::cat({ra.grad().view(-1), rb.grad().view(-1)}).norm().item<double>();
    double scale = std::min(1.0, clip / (total + 1e-6));
    ra.mutable_grad().mul_(scale);
    rb.mutable_grad().mul_(scale);
    ref.step();

    flat.zero_grad();
    ((fa * w).sum() * 3 + (fb * v).sum()).backward();
    EXPECT_NEAR(flat.grad_norm(), total, 1e-5);
    flat.step(scale);
    EXPECT_TRUE(torch::allclose(fa, ra, 1e-6, 1e-6)) << "step " << step;
    EXPECT_TRUE(torch::allclose(fb, rb, 1e-6, 1e-6)) << "step " << step;
  }
}
