// The training tasks of the encoder objectives: special tokens, MLM corruption, padding-free pooling through the
// model, cached (GradCache) = uncached contrastive gradients, documents, init_from, bitwise resume per task, and
// which states `spread diagnose` reads from an encoder run.
#include <gtest/gtest.h>
#include "test_paths.h"
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <ATen/CPUGeneratorImpl.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "cli_run.h"
#include "spread/config/recipe.h"
#include "spread/data/corpus.h"
#include "spread/data/npy.h"
#include "spread/data/special_tokens.h"
#include "spread/encode/embed.h"
#include "spread/eval/encoder_eval.h"
#include "spread/eval/multi_vector_retrieval.h"
#include "spread/interchange/loaded_run.h"
#include "spread/log/metrics_log.h"
#include "spread/losses/mlm.h"
#include "spread/run/checkpoint.h"
#include "spread/run/setup.h"
#include "spread/tasks/contrastive.h"
#include "spread/tasks/maxsim.h"
#include "spread/train/trainer.h"
#include "spread/util/error.h"

namespace fs = std::filesystem;
using spread::testing::logged;

namespace {

fs::path temp_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("spread_tasks_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A small bidirectional encoder, seeded.
spread::Transformer tiny_encoder(int64_t vocab, int64_t layers, int64_t width, int64_t block, double dropout,
                                 uint64_t seed) {
  torch::manual_seed(seed);
  spread::TransformerConfig cfg;
  cfg.vocab_size = vocab;
  cfg.n_layer = layers;
  cfg.n_head = 2;
  cfg.n_embd = width;
  cfg.block_size = block;
  cfg.causal = false;
  cfg.dropout = dropout;
  return spread::Transformer(cfg);
}

// Short sentences built from a small vocabulary, one per line; pairs of two sentences about the same subject.
std::vector<std::string> sentences(int n, uint64_t seed) {
  const char* subjects[] = {"a cat", "the dog", "a bird", "the fish", "a horse", "the child", "a man", "the woman"};
  const char* verbs[] = {"runs", "sleeps", "eats", "jumps", "sings", "swims", "reads", "plays"};
  const char* places[] = {"at home", "in the park", "by the river", "on the hill", "at school", "in the sea"};
  std::vector<std::string> out;
  uint64_t s = seed;
  for (int i = 0; i < n; ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    out.push_back(std::string(subjects[(s >> 33) % 8]) + " " + verbs[(s >> 40) % 8] + " " + places[(s >> 50) % 6] +
                  " number " + std::to_string(i));
  }
  return out;
}

void write_lines(const fs::path& path, const std::vector<std::string>& lines) {
  std::ofstream out(path);
  for (const auto& l : lines) out << l << "\n";
}

fs::path write_pairs(const fs::path& dir) {
  auto path = dir / "pairs.tsv";
  std::ofstream out(path);
  out << "anchor\tpositive\n";
  auto a = sentences(120, 1), b = sentences(120, 1);
  for (size_t i = 0; i < a.size(); ++i) out << a[i] << "\twhat " << b[i] << " means\n";
  return path;
}

std::vector<std::string> encoder_overrides(const fs::path& dir, const std::string& name, int64_t steps) {
  return {"run.name=" + name, "run.out_dir=" + dir.string(), "tokenizer.kind=char", "model.n_layer=2",
          "model.n_head=2", "model.n_embd=16", "model.block_size=32", "model.causal=false", "model.dropout=0.1",
          "train.batch_size=6", "train.max_steps=" + std::to_string(steps), "train.warmup_steps=2",
          "train.log_every=1", "train.eval_every=5", "train.eval_batches=2", "train.ckpt_every=5",
          "train.keep_last=10", "diagnostics.every=5", "diagnostics.probe_texts=4", "diagnostics.socm=true"};
}

spread::Recipe mlm_recipe(const fs::path& dir, const std::string& name, int64_t steps,
                          std::vector<std::string> extra = {}) {
  auto corpus = dir / "docs.txt";
  if (!fs::exists(corpus)) write_lines(corpus, sentences(200, 3));
  auto o = encoder_overrides(dir, name, steps);
  o.insert(o.end(), {"train.objective=mlm", "data.source=text", "data.path=" + corpus.string()});
  o.insert(o.end(), extra.begin(), extra.end());
  return spread::parse_recipe("", "test.toml", o);
}

spread::Recipe contrastive_recipe(const fs::path& dir, const std::string& name, int64_t steps,
                                  std::vector<std::string> extra = {}) {
  auto pairs = dir / "pairs.tsv";
  if (!fs::exists(pairs)) write_pairs(dir);
  auto o = encoder_overrides(dir, name, steps);
  o.insert(o.end(), {"train.objective=contrastive", "data.source=pairs", "data.path=" + pairs.string()});
  o.insert(o.end(), extra.begin(), extra.end());
  return spread::parse_recipe("", "test.toml", o);
}

spread::Recipe maxsim_recipe(const fs::path& dir, const std::string& name, int64_t steps,
                             std::vector<std::string> extra = {}) {
  auto pairs = dir / "pairs.tsv";
  if (!fs::exists(pairs)) write_pairs(dir);
  auto o = encoder_overrides(dir, name, steps);
  o.insert(o.end(), {"train.objective=maxsim", "data.source=pairs", "data.path=" + pairs.string(), "model.head_dim=8",
                     "loss.maxsim.query_length=12", "loss.maxsim.document_length=32"});
  o.insert(o.end(), extra.begin(), extra.end());
  return spread::parse_recipe("", "test.toml", o);
}

// A crash after step 10's checkpoint, then resume: the losses after resuming are those of an uninterrupted run.
void expect_bitwise_resume(const std::function<spread::Recipe(const std::string&)>& recipe) {
  ASSERT_EQ(spread::train(recipe("straight"), spread::TrainStart::Fresh), 0);
  ASSERT_EQ(spread::train(recipe("broken"), spread::TrainStart::Fresh), 0);
  const auto broken = fs::path(recipe("broken").run_dir());
  for (const auto& path : spread::list_checkpoints(broken.string()))
    if (path.find("step_00000010") == std::string::npos) fs::remove(path);
  ASSERT_EQ(spread::train(spread::recipe_of_run(broken.string()), spread::TrainStart::Resume), 0);
  auto a = logged(recipe("straight").run_dir(), "loss"), b = logged(broken, "loss");
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(b.size(), 20u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "step " << i + 1;
}

}  // namespace

TEST(SpecialTokens, AppendedAfterTheBaseVocabularyAndRestoredFromTheRunDir) {
  auto dir = temp_dir("special");
  auto tokenizer = spread::with_special_tokens(spread::make_char_tokenizer("abc "));
  EXPECT_EQ(tokenizer->vocab_size(), 4 + 6);
  const auto s = tokenizer->special_ids();
  EXPECT_EQ(s.pad, 4);
  EXPECT_EQ(s.cls, 5);
  EXPECT_EQ(s.sep, 6);
  EXPECT_EQ(s.mask, 7);
  EXPECT_EQ(s.query, 8);
  EXPECT_EQ(s.document, 9);
  EXPECT_TRUE(s.is_special(9));
  // [CLS] a b [SEP], and the [SEP] survives truncation.
  EXPECT_EQ(spread::encode_for_encoder(*tokenizer, "ab", 10), (std::vector<int32_t>{5, 1, 2, 6}));
  EXPECT_EQ(spread::encode_for_encoder(*tokenizer, "abcab", 4), (std::vector<int32_t>{5, 1, 2, 6}));
  EXPECT_EQ(tokenizer->decode({5, 1, 7, 6}), "[CLS]a[MASK][SEP]");
  EXPECT_EQ(tokenizer->decode({5, 8, 1, 9}), "[CLS][Q]a[D]");
  EXPECT_EQ(spread::encode_for_encoder(*tokenizer, "abcab", 5, s.document), (std::vector<int32_t>{5, 9, 1, 2, 6}));
  tokenizer->save(dir.string());
  auto loaded = spread::load_tokenizer(dir.string());
  EXPECT_EQ(loaded->vocab_size(), 10);
  EXPECT_EQ(loaded->special_ids().document, 9);
  // A run made before [Q] and [D] existed lists four reserved ids, and loads with four.
  auto four = spread::with_special_tokens(spread::make_char_tokenizer("abc "), 4);
  auto old_dir = temp_dir("special_four");
  four->save(old_dir.string());
  auto old = spread::load_tokenizer(old_dir.string());
  EXPECT_EQ(old->vocab_size(), 8);
  EXPECT_EQ(old->special_ids().mask, 7);
  EXPECT_FALSE(old->special_ids().has_markers());
  EXPECT_EQ(old->decode({5, 7}), "[CLS][MASK]");
  fs::remove_all(old_dir);
  // Characters the char vocabulary lacks are left out, where the plain char tokenizer refuses the text.
  EXPECT_EQ(spread::encode_for_encoder(*tokenizer, "aXb\u00e9c", 10), (std::vector<int32_t>{5, 1, 2, 3, 6}));
  EXPECT_THROW(spread::make_char_tokenizer("abc ")->encode("aXb"), spread::UserError);
  // A plain tokenizer has none and encodes texts alone.
  auto plain = spread::make_char_tokenizer("abc ");
  EXPECT_FALSE(plain->special_ids().present());
  EXPECT_EQ(spread::encode_for_encoder(*plain, "abcab", 3), (std::vector<int32_t>{1, 2, 3}));
  fs::remove_all(dir);
}

TEST(Mlm, MaskingRatesMatchBertAndSpecialTokensAreNeverChosen) {
  // 200 rows of [CLS] 60 tokens [SEP] [PAD] x 3; base vocabulary 50, reserved ids 50..53.
  const spread::SpecialIds special{50, 51, 52, 53};
  const int64_t B = 200, T = 65;
  auto ids = torch::randint(0, 50, {B, T}, torch::kLong);
  auto valid = torch::ones({B, T}, torch::kBool);
  ids.select(1, 0).fill_(51);
  ids.select(1, 61).fill_(52);
  ids.narrow(1, 62, 3).fill_(50);
  valid.narrow(1, 62, 3).fill_(false);
  auto m = spread::mask_tokens(ids, valid, special, 0.15, 1234);
  auto chosen = m.targets.ge(0);
  // Never the special or padding positions.
  EXPECT_EQ(chosen.select(1, 0).sum().item<int64_t>(), 0);
  EXPECT_EQ(chosen.narrow(1, 61, 4).sum().item<int64_t>(), 0);
  // Targets are the original ids where chosen; unchosen inputs are unchanged.
  EXPECT_TRUE(torch::equal(m.targets.masked_select(chosen), ids.masked_select(chosen)));
  EXPECT_TRUE(torch::equal(m.inputs.masked_select(~chosen), ids.masked_select(~chosen)));
  // Rates over 12,000 maskable positions: 15% chosen (sd 0.33%), of those 80% [MASK], ~10% kept (plus 1/50 of the
  // random 10% that draw the same id), the rest random non-special ids.
  const double n_chosen = chosen.sum().item<double>();
  EXPECT_NEAR(n_chosen / (B * 60.0), 0.15, 0.012);
  auto inputs_at = m.inputs.masked_select(chosen), original_at = ids.masked_select(chosen);
  const double masked = inputs_at.eq(53).sum().item<double>() / n_chosen;
  const double kept = inputs_at.eq(original_at).sum().item<double>() / n_chosen;
  EXPECT_NEAR(masked, 0.8, 0.03);
  EXPECT_NEAR(kept, 0.1 + 0.1 / 50, 0.025);
  EXPECT_TRUE(inputs_at.lt(50).logical_or(inputs_at.eq(53)).all().item<bool>());
  // Deterministic in the seed.
  EXPECT_TRUE(torch::equal(spread::mask_tokens(ids, valid, special, 0.15, 1234).inputs, m.inputs));
  EXPECT_FALSE(torch::equal(spread::mask_tokens(ids, valid, special, 0.15, 1235).inputs, m.inputs));
}

TEST(Mlm, LossIsCrossEntropyOfTheTiedHeadAtChosenPositionsOnly) {
  auto h = torch::randn({2, 3, 4}, torch::kDouble);
  auto w = torch::randn({5, 4}, torch::kDouble);
  auto targets = torch::tensor({-1, 2, -1, 4, -1, 0}, torch::kLong).view({2, 3});
  double expected = 0;
  const int64_t positions[3][3] = {{0, 1, 2}, {1, 0, 4}, {1, 2, 0}};  // (row, column, target)
  for (const auto& p : positions) {
    auto logits = torch::matmul(w, h[p[0]][p[1]]);
    expected += -(logits[p[2]] - torch::logsumexp(logits, 0)).item<double>() / 3.0;
  }
  EXPECT_NEAR(spread::mlm_loss(h, w, targets).item<double>(), expected, 1e-6);
}

TEST(Pooling, PaddingNeverChangesATextsEmbeddingThroughTheModel) {
  auto model = tiny_encoder(20, 2, 16, 16, 0.0, 0);
  model->eval();
  torch::NoGradGuard no_grad;
  std::vector<int32_t> short_text = {1, 5, 7, 2}, long_text = {1, 3, 3, 9, 11, 4, 8, 2};
  for (auto pooling : {spread::Pooling::Mean, spread::Pooling::Cls, spread::Pooling::LastToken}) {
    auto alone = spread::embed_batch(model, spread::pad_batch({&short_text}, 0, torch::kCPU), pooling);
    auto padded = spread::embed_batch(model, spread::pad_batch({&short_text, &long_text}, 0, torch::kCPU), pooling);
    EXPECT_TRUE(torch::allclose(alone[0], padded[0], 1e-5, 1e-6)) << int(pooling);
  }
}

TEST(Documents, JsonlTextFieldsAndBlankLineParagraphs) {
  auto dir = temp_dir("docs");
  std::ofstream(dir / "c.jsonl") << "{\"_id\": \"1\", \"title\": \"T1\", \"text\": \"body one\"}\n\n"
                                 << "{\"text\": \"body two\"}\n{\"text\": \"body three\"}\n";
  std::ofstream(dir / "p.txt") << "first line\nof para one\n\n\npara two\n";
  spread::DataConfig data;
  data.source = "text";
  data.path = {(dir / "c.jsonl").string(), (dir / "p.txt").string()};
  data.val_fraction = 0.2;
  auto docs = spread::load_documents(data, "r.toml");
  EXPECT_EQ(docs.train, (std::vector<std::string>{"T1 body one", "body two", "body three", "first line\nof para one"}));
  EXPECT_EQ(docs.val, (std::vector<std::string>{"para two"}));
  std::ofstream(dir / "bad.jsonl") << "{\"text\": \"ok\"}\n{\"title\": 3}\n";
  data.path = {(dir / "bad.jsonl").string()};
  try {
    spread::load_documents(data, "r.toml");
    FAIL() << "a JSON line without text was accepted";
  } catch (const spread::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:2"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

namespace {

// A batch of 4 anchors and 4 positives + 4 hard negatives of varied lengths, with one duplicate positive text.
struct SmallBatch {
  std::vector<std::vector<int32_t>> texts;
  spread::ContrastiveBatch batch;
  SmallBatch() {
    uint64_t s = 11;
    for (int i = 0; i < 12; ++i) {
      std::vector<int32_t> t = {1};
      for (int j = 0; j < 3 + i % 5; ++j) t.push_back(int32_t(4 + (s = s * 2862933555777941757ULL + 3037000493ULL) % 30));
      t.push_back(2);
      texts.push_back(t);
    }
    texts[6] = texts[5];  // positive of anchor 1 (candidate 5 - 4 = 1) duplicated as positive of anchor 2
    for (int i = 0; i < 4; ++i) batch.anchors.push_back(&texts[size_t(i)]);
    for (int i = 4; i < 12; ++i) batch.candidates.push_back(&texts[size_t(i)]);
    batch.anchor_text_ids = torch::tensor({0, 1, 2, 3}, torch::kLong);
    batch.candidate_text_ids = torch::tensor({4, 5, 5, 7, 8, 9, 10, 11}, torch::kLong);
  }
};

spread::Transformer training_encoder(double dropout) {
  auto model = tiny_encoder(40, 2, 16, 16, dropout, 3);
  model->train();
  return model;
}

std::vector<torch::Tensor> gradients(spread::Transformer& model) {
  std::vector<torch::Tensor> out;
  for (auto& p : model->parameters()) out.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  for (auto& p : model->parameters())
    if (p.grad().defined()) p.mutable_grad().zero_();
  return out;
}

void expect_same_gradients(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(torch::allclose(a[i], b[i], 1e-4, 1e-6)) << "parameter " << i << ": max diff "
                                                          << (a[i] - b[i]).abs().max().item<double>();
}

}  // namespace

TEST(CachedContrastive, EqualsTheUncachedBatchWithoutDropout) {
  SmallBatch small;
  spread::ContrastiveStepOptions opt;
  opt.loss.symmetric = true;
  auto model = training_encoder(0.0);
  const double uncached = spread::contrastive_backward(model, small.batch, opt);
  auto g_uncached = gradients(model);
  opt.mini_batch = 3;  // chunks that straddle anchors and candidates
  const double cached = spread::contrastive_backward(model, small.batch, opt);
  auto g_cached = gradients(model);
  EXPECT_NEAR(cached, uncached, 1e-5);
  expect_same_gradients(g_cached, g_uncached);
}

TEST(CachedContrastive, ReplaysDropoutSoTheGradientIsThatOfOneGraphOverTheSameChunks) {
  SmallBatch small;
  spread::ContrastiveStepOptions opt;
  opt.mini_batch = 5;
  auto model = training_encoder(0.2);
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  const auto start = generator.get_state();
  const double cached = spread::contrastive_backward(model, small.batch, opt);
  auto g_cached = gradients(model);
  // Reference: the same chunks embedded with one graph from the same generator state, InfoNCE, backward.
  generator.set_state(start);
  std::vector<const std::vector<int32_t>*> all = small.batch.anchors;
  all.insert(all.end(), small.batch.candidates.begin(), small.batch.candidates.end());
  std::vector<torch::Tensor> chunks;
  for (size_t first = 0; first < all.size(); first += 5) {
    std::vector<const std::vector<int32_t>*> part(all.begin() + first, all.begin() + std::min(all.size(), first + 5));
    chunks.push_back(spread::embed_batch(model, spread::pad_batch(part, 0, torch::kCPU), spread::Pooling::Mean));
  }
  auto e = torch::cat(chunks);
  auto loss = spread::info_nce(e.narrow(0, 0, 4), e.narrow(0, 4, 8), opt.loss, small.batch.anchor_text_ids,
                               small.batch.candidate_text_ids);
  loss.backward();
  EXPECT_NEAR(cached, loss.item<double>(), 1e-5);
  expect_same_gradients(g_cached, gradients(model));
  // And dropout really is on: another generator state gives another loss.
  EXPECT_NE(spread::contrastive_backward(model, small.batch, opt), cached);
}

TEST(Resume, MlmLossesAfterResumingAreBitwiseThoseOfAnUninterruptedRun) {
  auto dir = temp_dir("resume_mlm");
  expect_bitwise_resume([&](const std::string& name) { return mlm_recipe(dir, name, 20); });
  // The task's own keys reach the log: masked-LM validation loss and the encoder probe.
  EXPECT_FALSE(logged(dir / "straight", "val_loss").empty());
  EXPECT_FALSE(logged(dir / "straight", "mean_cos_final").empty());
  EXPECT_FALSE(logged(dir / "straight", "socm").empty());
  // The two numbers that tell a global collapse from SOCM's: cross-text mean cosine and the median of d_mu.
  EXPECT_FALSE(logged(dir / "straight", "batch_mean_cos_final").empty());
  const auto medians = logged(dir / "straight", "socm_d_mu_median");
  ASSERT_FALSE(medians.empty());
  for (double m : medians) EXPECT_TRUE(m >= 0 && m <= 1) << m;
  fs::remove_all(dir);
}

TEST(Resume, ContrastiveLossesAfterResumingAreBitwiseThoseOfAnUninterruptedRun) {
  auto dir = temp_dir("resume_contrastive");
  expect_bitwise_resume([&](const std::string& name) {
    return contrastive_recipe(dir, name, 20, {"loss.contrastive.mini_batch=4", "loss.contrastive.symmetric=true"});
  });
  EXPECT_FALSE(logged(dir / "straight", "align").empty());
  EXPECT_FALSE(logged(dir / "straight", "uniform").empty());
  EXPECT_FALSE(logged(dir / "straight", "pairs_per_s").empty());
  fs::remove_all(dir);
}

TEST(Resume, PoolingAwareMaxSimLossesAfterResumingAreBitwiseThoseOfAnUninterruptedRun) {
  auto dir = temp_dir("resume_maxsim");
  const std::string beir = std::string(SPREAD_TEST_DATA_DIR) + "/beir_tiny";
  expect_bitwise_resume([&](const std::string& name) {
    return maxsim_recipe(dir, name, 20, {"loss.pooling_aware.enabled=true", "loss.pooling_aware.pool_factor=2",
                                         "loss.maxsim.skiplist=true", "eval.beir=" + beir});
  });
  // Both terms, the evaluation at both pool factors and the probe reach the log.
  EXPECT_FALSE(logged(dir / "straight", "loss_maxsim").empty());
  EXPECT_FALSE(logged(dir / "straight", "loss_maxsim_pooled").empty());
  EXPECT_FALSE(logged(dir / "straight", "val_loss_pooled").empty());
  EXPECT_FALSE(logged(dir / "straight", "ndcg@10_pooled").empty());
  const auto pooled = logged(dir / "straight", "vectors_per_doc_pooled"), full = logged(dir / "straight", "vectors_per_doc");
  ASSERT_FALSE(pooled.empty());
  EXPECT_LT(pooled.back(), full.back());
  EXPECT_FALSE(logged(dir / "straight", "mean_cos_final").empty());
  EXPECT_FALSE(logged(dir / "straight", "queries_per_s").empty());
  // The checkpoint holds the multi-vector head.
  auto ckpt = spread::load_latest_checkpoint((dir / "straight").string(), nullptr);
  ASSERT_TRUE(ckpt);
  EXPECT_EQ(ckpt->tensors.at("model.head.weight").sizes(), (std::vector<int64_t>{8, 16}));
  fs::remove_all(dir);
}

TEST(InitFrom, AMaxSimRunStartsFromAnMlmBackboneWithAFreshHead) {
  auto dir = temp_dir("init_maxsim");
  ASSERT_EQ(spread::train(mlm_recipe(dir, "backbone", 3), spread::TrainStart::Fresh), 0);
  const auto backbone = fs::path(mlm_recipe(dir, "backbone", 3).run_dir());
  ASSERT_EQ(spread::train(maxsim_recipe(dir, "late", 1, {"train.init_from=" + backbone.string(), "train.lr=0",
                                                          "train.min_lr=0"}),
                          spread::TrainStart::Fresh),
            0);
  auto a = spread::load_latest_checkpoint(backbone.string(), nullptr);
  auto b = spread::load_latest_checkpoint((dir / "late").string(), nullptr);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->tensors.count("model.head.weight"), 0u);
  EXPECT_TRUE(torch::equal(a->tensors.at("model.blocks.1.mlp.fc.weight"), b->tensors.at("model.blocks.1.mlp.fc.weight")));
  EXPECT_EQ(b->tensors.at("model.head.weight").size(0), 8);
  // Resuming the maxsim run itself still requires the head.
  auto without_head = b->tensors;
  without_head.erase("model.head.weight");
  spread::Transformer model(spread::model_config(maxsim_recipe(dir, "late", 1), 40));
  EXPECT_THROW(spread::load_model_weights(model, without_head, "x"), spread::UserError);
  fs::remove_all(dir);
}

TEST(InitFrom, StartsFromAnotherRunsWeightsAndTokenizer) {
  auto dir = temp_dir("init_from");
  ASSERT_EQ(spread::train(mlm_recipe(dir, "backbone", 5), spread::TrainStart::Fresh), 0);
  const auto backbone = fs::path(mlm_recipe(dir, "backbone", 5).run_dir());
  // A one-step run at learning rate 0 (no update, no decay) keeps the weights it started from.
  ASSERT_EQ(spread::train(contrastive_recipe(dir, "tuned", 1, {"train.init_from=" + backbone.string(), "train.lr=0",
                                                               "train.min_lr=0"}),
                          spread::TrainStart::Fresh),
            0);
  auto a = spread::load_latest_checkpoint(backbone.string(), nullptr);
  auto b = spread::load_latest_checkpoint((dir / "tuned").string(), nullptr);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(torch::equal(a->tensors.at("model.wte.weight"), b->tensors.at("model.wte.weight")));
  EXPECT_TRUE(torch::equal(a->tensors.at("model.ln_f.weight"), b->tensors.at("model.ln_f.weight")));
  EXPECT_EQ(spread::load_tokenizer((dir / "tuned").string())->vocab_size(),
            spread::load_tokenizer(backbone.string())->vocab_size());
  fs::remove_all(dir);
}

TEST(InitFrom, AMismatchedShapeNamesTheKey) {
  auto dir = temp_dir("init_mismatch");
  ASSERT_EQ(spread::train(mlm_recipe(dir, "backbone", 2), spread::TrainStart::Fresh), 0);
  const auto backbone = mlm_recipe(dir, "backbone", 2).run_dir();
  try {
    spread::train(contrastive_recipe(dir, "wide", 2, {"train.init_from=" + backbone, "model.n_embd=32"}),
                  spread::TrainStart::Fresh);
    FAIL() << "a model of another width started from the backbone";
  } catch (const spread::UserError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("train.init_from"), std::string::npos) << m;
    EXPECT_NE(m.find("shape"), std::string::npos) << m;
  }
  fs::remove_all(dir);
}

TEST(Recipe, ObjectivesCheckTheirDataAndModel) {
  auto expect_key = [](std::vector<std::string> o, const std::string& key) {
    try {
      spread::parse_recipe("", "r.toml", o);
      FAIL() << "accepted: " << key;
    } catch (const spread::UserError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  expect_key({"train.objective=contrastive", "data.source=wordnet"}, "data.source");
  expect_key({"train.objective=lm", "data.source=stsb", "data.path=x.csv"}, "data.source");
  expect_key({"train.objective=mlm", "model.causal=true"}, "model.causal");
  expect_key({"train.objective=contrastive", "data.source=pairs"}, "data.path");
  expect_key({"data.max_length=100", "model.block_size=64"}, "data.max_length");
  expect_key({"train.objective=contrastive", "data.source=wordnet_pairs", "model.causal=false",
              "loss.contrastive.matryoshka_dims=[64, 256]", "model.n_embd=128"},
             "loss.contrastive.matryoshka_dims");
  expect_key({"loss.contrastive.pooling=median"}, "loss.contrastive.pooling");
  expect_key({"train.objective=maxsim", "data.source=text", "data.path=x.txt"}, "data.source");
  expect_key({"train.objective=maxsim", "data.source=wordnet_pairs", "model.causal=true", "model.block_size=256"},
             "model.causal");
  expect_key({"train.objective=maxsim", "data.source=wordnet_pairs", "model.causal=false", "model.block_size=64",
              "loss.maxsim.document_length=180"}, "loss.maxsim.document_length");
  expect_key({"train.objective=maxsim", "data.source=wordnet_pairs", "model.causal=false", "model.block_size=64",
              "loss.maxsim.document_length=64", "loss.maxsim.query_length=100"}, "loss.maxsim.query_length");
  expect_key({"loss.pooling_aware.ste=straight"}, "loss.pooling_aware.ste");
  expect_key({"loss.pooling_aware.pool_factor=0.5"}, "loss.pooling_aware.pool_factor");
  // The head exists for maxsim runs only, so other objectives' checkpoints are unchanged.
  auto lm = spread::parse_recipe("", "r.toml");
  EXPECT_EQ(spread::model_config(lm, 50).head_dim, 0);
  auto late = spread::parse_recipe("", "r.toml", {"train.objective=maxsim", "data.source=wordnet_pairs",
                                                  "model.causal=false", "model.block_size=256"});
  EXPECT_EQ(spread::model_config(late, 50).head_dim, 128);
  // Existing recipes (no objective key) are LM recipes, as before.
  EXPECT_EQ(spread::parse_recipe("", "r.toml").train.objective, spread::Objective::lm);
}

// The registry against a table written from what each objective is (a hand-written expectation, not the code's),
// and each trait against what the recipe, the memory estimate and the task factory do with it.
TEST(ObjectiveRegistry, EveryObjectiveHasEveryTrait) {
  using spread::Attention;
  using spread::Head;
  using spread::Inputs;
  using spread::Objective;
  struct Expected {
    Objective objective;
    const char* name;
    Inputs inputs;
    Attention attention;
    Head head;
  };
  const std::vector<Expected> table{
      {Objective::lm, "lm", Inputs::text, Attention::causal, Head::next_token},
      {Objective::mlm, "mlm", Inputs::text, Attention::bidirectional, Head::masked_token},
      {Objective::contrastive, "contrastive", Inputs::pairs, Attention::either, Head::none},
      {Objective::maxsim, "maxsim", Inputs::pairs, Attention::bidirectional, Head::token_vectors},
  };
  ASSERT_EQ(spread::objectives().size(), table.size()) << "a new objective needs a row here";
  for (size_t i = 0; i < table.size(); ++i) {
    const auto& want = table[i];
    const spread::ObjectiveTraits& t = *spread::objectives()[i];
    SCOPED_TRACE(want.name);
    EXPECT_EQ(t.objective, want.objective);
    EXPECT_EQ(&spread::traits_of(want.objective), &t);
    EXPECT_STREQ(t.name, want.name);
    EXPECT_EQ(spread::objective_named(want.name), want.objective);
    EXPECT_GT(std::string(t.summary).size(), 20u);
    EXPECT_EQ(t.inputs, want.inputs);
    EXPECT_EQ(t.attention, want.attention);
    EXPECT_EQ(t.head, want.head);
    ASSERT_NE(t.activations, nullptr);
    ASSERT_NE(t.make_task, nullptr);
    // The recipe spells it by name both ways, and asks for the data its inputs say.
    const std::string source = want.inputs == Inputs::pairs ? "wordnet_pairs" : "wordnet";
    auto r = spread::parse_recipe("", "r.toml", {std::string("train.objective=") + want.name, "data.source=" + source,
                                                 "model.causal=" + std::string(want.attention == Attention::causal ? "true" : "false"),
                                                 "model.block_size=256"});
    EXPECT_NE(spread::recipe_to_toml(r).find(std::string("objective = '") + want.name + "'"), std::string::npos);
    const std::string other = want.inputs == Inputs::pairs ? "wordnet" : "wordnet_pairs";
    EXPECT_THROW(spread::parse_recipe("", "r.toml", {std::string("train.objective=") + want.name, "data.source=" + other,
                                                     "model.causal=false", "model.block_size=256"}),
                 spread::UserError);
    // A bidirectional objective refuses the causal mask; the others take it.
    const std::vector<std::string> causal{std::string("train.objective=") + want.name, "data.source=" + source,
                                          "model.causal=true", "model.block_size=256"};
    if (want.attention == Attention::bidirectional) EXPECT_THROW(spread::parse_recipe("", "r.toml", causal), spread::UserError);
    else EXPECT_NO_THROW(spread::parse_recipe("", "r.toml", causal));
    EXPECT_EQ(r.is_encoder_objective(), want.head != Head::next_token);
    // The memory estimate's view: tokens of one micro-step, and logits exactly for the vocabulary heads.
    const spread::MicroStepSizes sizes{4, 0, 1, 64, 1000};
    const auto shape = t.activations(r, sizes);
    EXPECT_GT(shape.tokens, 0);
    EXPECT_FALSE(shape.length_keys.empty());
    EXPECT_EQ(shape.logit_floats > 0, want.head == Head::next_token || want.head == Head::masked_token);
  }
  EXPECT_EQ(spread::objective_named("dpo"), std::nullopt);
  try {
    spread::parse_recipe("", "r.toml", {"train.objective=dpo"});
    FAIL() << "accepted objective dpo";
  } catch (const spread::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("\"lm\", \"mlm\", \"contrastive\" or \"maxsim\""), std::string::npos) << e.what();
  }
}

// The recipe reference is generated from the schema: every key has a meaning, the defaults are the structs' (a few
// checked by hand against recipe.h), and docs/recipe_reference.md is the generator's output, so that the page can
// never drift from the parser. Regenerate it with `build/spread recipe --keys --markdown > docs/recipe_reference.md`.
TEST(RecipeReference, EveryKeyIsDescribedAndTheDocsAreCurrent) {
  std::string page;
  ASSERT_NO_THROW(page = spread::recipe_reference(/*markdown=*/true));
  EXPECT_NE(page.find("| `batch_size` | integer | `12` | 1 .. 1048576 |"), std::string::npos);
  EXPECT_NE(page.find("| `objective` | string | `'lm'` | lm, mlm, contrastive, maxsim |"), std::string::npos);
  EXPECT_NE(page.find("| `lr` | number | `0.001` |"), std::string::npos);
  EXPECT_NE(page.find("## [loss.pooling_aware]"), std::string::npos);
  // One row per key of the resolved recipe (a "leaf = value" line of its TOML).
  auto count_lines = [](const std::string& text, const std::function<bool(const std::string&)>& keep) {
    std::istringstream lines(text);
    int n = 0;
    for (std::string line; std::getline(lines, line);) n += keep(line) ? 1 : 0;
    return n;
  };
  const int rows = count_lines(page, [](const std::string& l) { return l.rfind("| `", 0) == 0; });
  const int keys = count_lines(spread::recipe_to_toml(spread::parse_recipe("", "r.toml")), [](const std::string& l) {
    return !l.empty() && l[0] != '#' && l[0] != '[' && l.find(" = ") != std::string::npos;
  });
  EXPECT_EQ(rows, keys);
  EXPECT_GT(rows, 100);
  const fs::path docs = fs::path(SPREAD_TEST_DATA_DIR) / ".." / ".." / "docs" / "recipe_reference.md";
  std::ifstream in(docs);
  ASSERT_TRUE(in.good()) << docs;
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(written, page) << docs << " is not the schema's reference: regenerate it with "
                           << "`build/spread recipe --keys --markdown > docs/recipe_reference.md`";
  const std::string text = spread::recipe_reference(/*markdown=*/false);
  EXPECT_NE(text.find("train.batch_size  (integer, default 12; 1 .. 1048576)"), std::string::npos) << text.substr(0, 400);
}

namespace {

// nDCG@10 of one query by brute force: documents sorted by score then id, DCG over the first 10.
double ndcg_of_scores(const std::vector<double>& scores, const std::vector<std::string>& ids,
                      const std::set<std::string>& relevant) {
  std::vector<std::pair<double, std::string>> scored;
  for (size_t i = 0; i < scores.size(); ++i) scored.push_back({scores[i], ids[i]});
  std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  double dcg = 0, idcg = 0;
  for (size_t r = 0; r < std::min<size_t>(10, scored.size()); ++r)
    if (relevant.count(scored[r].second)) dcg += 1.0 / std::log2(double(r) + 2.0);
  for (size_t r = 0; r < std::min<size_t>(10, relevant.size()); ++r) idcg += 1.0 / std::log2(double(r) + 2.0);
  return dcg / idcg;
}

// The same with every document scored by the cosine of its embedding.
double brute_force_ndcg(const torch::Tensor& query, const torch::Tensor& corpus, const std::vector<std::string>& ids,
                        const std::set<std::string>& relevant) {
  std::vector<double> scores;
  for (int64_t i = 0; i < corpus.size(0); ++i)
    scores.push_back(torch::cosine_similarity(query.unsqueeze(0).to(torch::kDouble),
                                              corpus[i].unsqueeze(0).to(torch::kDouble)).item<double>());
  return ndcg_of_scores(scores, ids, relevant);
}

// Token vectors of one text encoded alone (no padding), and the rows that score.
torch::Tensor vectors_alone(spread::Transformer& model, const std::vector<int32_t>& seq, bool query, int64_t length,
                            int32_t mask_id) {
  std::vector<int64_t> ids(seq.begin(), seq.end());
  const auto real = int64_t(ids.size());
  if (query) ids.resize(size_t(length), mask_id);  // expansion: [MASK]s that score but are not attended to
  auto idx = torch::tensor(ids, torch::kLong).view({1, -1});
  auto attend = torch::arange(int64_t(ids.size())).lt(real).view({1, -1});
  return model->token_vectors(model->forward(idx, false, false, attend).final_hidden)[0];
}

}  // namespace

TEST(LateInteractionEval, RetrievalIsMaxSimOverEachTextEncodedAloneAndPoolingCutsTheVectors) {
  auto data = spread::load_beir(std::string(SPREAD_TEST_DATA_DIR) + "/beir_tiny");
  std::string all_text;
  for (const auto& t : data.corpus_texts) all_text += t;
  for (const auto& t : data.query_texts) all_text += t;
  auto tokenizer = spread::with_special_tokens(spread::make_char_tokenizer(all_text));
  torch::manual_seed(9);
  spread::TransformerConfig cfg;
  cfg.vocab_size = tokenizer->vocab_size();
  cfg.n_layer = 1;
  cfg.n_head = 2;
  cfg.n_embd = 8;
  cfg.block_size = 64;
  cfg.causal = false;
  cfg.head_dim = 4;
  spread::Transformer model(cfg);
  model->eval();
  spread::MultiVectorSpec spec;
  spec.query_length = 16;
  spec.document_length = 64;
  spec.batch_size = 2;  // several batches, sorted by length
  auto results = spread::evaluate_multi_vector_retrieval(model, *tokenizer, data, spec, {1, 2});
  ASSERT_EQ(results.size(), 2u);
  torch::NoGradGuard no_grad;
  const int32_t mask_id = tokenizer->special_ids().mask;
  double ndcg = 0, tokens = 0;
  for (size_t q = 0; q < data.query_ids.size(); ++q) {
    auto qv = vectors_alone(model, spread::query_tokens(*tokenizer, data.query_texts[q], spec), true, 16, mask_id);
    std::vector<double> scores;
    for (const auto& text : data.corpus_texts) {
      auto seq = spread::document_tokens(*tokenizer, text, spec);
      if (q == 0) tokens += double(seq.size());
      auto dv = vectors_alone(model, seq, false, 0, mask_id);
      scores.push_back(torch::matmul(qv.to(torch::kDouble), dv.to(torch::kDouble).t()).amax(1).sum().item<double>());
    }
    ndcg += ndcg_of_scores(scores, data.corpus_ids, data.qrels.at(data.query_ids[q])) / double(data.query_ids.size());
  }
  EXPECT_NEAR(results[0].metrics.ndcg_at_10, ndcg, 1e-6);
  EXPECT_NEAR(results[0].mean_vectors, tokens / double(data.corpus_texts.size()), 1e-12);
  // Pool factor 2: one protected token plus floor(m / 2) clusters of the other m.
  double pooled = 0;
  for (const auto& text : data.corpus_texts) {
    const double m = double(spread::document_tokens(*tokenizer, text, spec).size()) - 1;
    pooled += 1 + std::max(1.0, std::floor(m / 2));
  }
  EXPECT_NEAR(results[1].mean_vectors, pooled / double(data.corpus_texts.size()), 1e-12);
}

TEST(EncoderEval, RetrievalAndStsMatchABruteForceComputationOnTheSameEmbeddings) {
  const std::string data_dir = std::string(SPREAD_TEST_DATA_DIR);
  auto data = spread::load_beir(data_dir + "/beir_tiny");
  ASSERT_EQ(data.query_ids.size(), 3u);  // q4 has no judgement
  std::string all_text;
  for (const auto& t : data.corpus_texts) all_text += t;
  for (const auto& t : data.query_texts) all_text += t;
  auto sts = spread::load_sts_csv(data_dir + "/sts_tiny.csv");
  for (const auto& p : sts) all_text += p.a + p.b;
  auto tokenizer = spread::with_special_tokens(spread::make_char_tokenizer(all_text));
  auto model = tiny_encoder(tokenizer->vocab_size(), 1, 8, 64, 0.0, 5);
  spread::EncoderSpec spec;
  spec.max_length = 64;
  spec.batch_size = 2;  // several batches, sorted by length: the rows must come back in input order
  auto m = spread::evaluate_retrieval(model, *tokenizer, data, spec);
  auto corpus = spread::embed_texts(model, *tokenizer, data.corpus_texts, 64, spread::Pooling::Mean, 64, torch::kCPU);
  auto queries = spread::embed_texts(model, *tokenizer, data.query_texts, 64, spread::Pooling::Mean, 64, torch::kCPU);
  double ndcg = 0;
  for (size_t q = 0; q < data.query_ids.size(); ++q)
    ndcg += brute_force_ndcg(queries[int64_t(q)], corpus, data.corpus_ids, data.qrels.at(data.query_ids[q])) / 3.0;
  EXPECT_EQ(m.queries, 3);
  EXPECT_NEAR(m.ndcg_at_10, ndcg, 1e-6);
  EXPECT_NEAR(m.recall_at_100, 1.0, 1e-12);  // 6 documents: all retrieved
  // STS: Spearman of the cosines of each pair, ranked by hand.
  auto s = spread::evaluate_sts(model, *tokenizer, sts, spec);
  std::vector<double> cos;
  for (const auto& p : sts) {
    auto e = spread::embed_texts(model, *tokenizer, {p.a, p.b}, 64, spread::Pooling::Mean, 2, torch::kCPU);
    cos.push_back(torch::cosine_similarity(e[0].unsqueeze(0), e[1].unsqueeze(0)).item<double>());
  }
  std::vector<double> gold;
  for (const auto& p : sts) gold.push_back(p.score);
  auto rank = [](const std::vector<double>& v) {  // no ties in these five values
    std::vector<double> r(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      for (size_t j = 0; j < v.size(); ++j) r[i] += v[j] < v[i] ? 1.0 : 0.0;
    return r;
  };
  auto rc = rank(cos), rg = rank(gold);
  double d2 = 0;
  for (size_t i = 0; i < rc.size(); ++i) d2 += (rc[i] - rg[i]) * (rc[i] - rg[i]);
  EXPECT_NEAR(s.spearman, 1.0 - 6.0 * d2 / (5.0 * (25.0 - 1.0)), 1e-9);
}

// `spread diagnose --layers last,final` reads the right tensors: "last" is the last block's output, "final" the
// final norm's output, i.e. the token vectors whose mean is the embedding that training and evaluation pool.
// Reference: the same states recomputed here from the model's modules, written as .npy token lists and diagnosed
// with --token-lists.
TEST(Diagnose, FinalIsTheNormedStateWhoseMeanIsThePooledEmbeddingAndLastIsTheLastBlock) {
  auto dir = temp_dir("diagnose_final");
  auto recipe = contrastive_recipe(dir, "enc", 5);
  ASSERT_EQ(spread::train(recipe, spread::TrainStart::Fresh), 0);
  const auto texts = sentences(6, 9);
  write_lines(dir / "texts.txt", texts);

  auto run = spread::load_run(recipe.run_dir());
  run.model->eval();
  torch::NoGradGuard no_grad;
  fs::create_directories(dir / "last");
  fs::create_directories(dir / "final");
  const int64_t length = recipe.model.block_size;  // data.max_length is 0 here: texts are cut at the block
  auto pooled = spread::embed_texts(run.model, *run.tokenizer, texts, length, spread::Pooling::Mean, 4, torch::kCPU);
  for (size_t i = 0; i < texts.size(); ++i) {
    auto ids = spread::encode_for_encoder(*run.tokenizer, texts[i], length);
    ASSERT_GT(ids.size(), 10u);
    auto idx = torch::tensor(std::vector<int64_t>(ids.begin(), ids.end()), torch::kLong).view({1, -1});
    auto out = run.model->forward(idx, /*want_hidden=*/true, /*want_logits=*/false);
    auto last = out.hidden.back()[0].contiguous();
    auto final_state = run.model->ln_f->forward(out.hidden.back())[0].contiguous();
    EXPECT_TRUE(torch::allclose(final_state.mean(0), pooled[int64_t(i)], 1e-5, 1e-5)) << "text " << i;
    const auto name = std::to_string(i) + ".npy";
    spread::write_npy_float32((dir / "last" / name).string(), last.data_ptr<float>(), last.size(0), last.size(1));
    spread::write_npy_float32((dir / "final" / name).string(), final_state.data_ptr<float>(), final_state.size(0),
                              final_state.size(1));
  }

  auto diagnose = [&](const std::string& args, const std::string& json) {
    auto r = spread::testing::run_spread("diagnose " + args + " --out " + (dir / json).string());
    EXPECT_EQ(r.code, 0) << r.output;
    return nlohmann::json::parse(std::ifstream(dir / json));
  };
  auto by_run = diagnose("--run " + recipe.run_dir() + " --texts " + (dir / "texts.txt").string() +
                             " --layers last,final",
                         "run.json")["layers"];
  auto last = diagnose("--token-lists " + (dir / "last").string(), "last.json")["layers"][0];
  auto final_state = diagnose("--token-lists " + (dir / "final").string(), "final.json")["layers"][0];
  ASSERT_EQ(by_run.size(), 2u);
  const int64_t blocks = recipe.model.n_layer;
  EXPECT_EQ(by_run[0]["layer"], blocks);
  EXPECT_EQ(by_run[0]["after_final_norm"], false);
  EXPECT_EQ(by_run[1]["layer"], blocks + 1);
  EXPECT_EQ(by_run[1]["after_final_norm"], true);
  // The spread binary may run another BLAS kernel than this process (it picks the OpenBLAS core itself), so the
  // float32 states agree to rounding, not bitwise: a relative 1e-6, far below the gap between the two states.
  auto expect_close = [](const nlohmann::json& a, const nlohmann::json& b, const std::string& what) {
    const double x = a.get<double>(), y = b.get<double>();
    EXPECT_NEAR(x, y, 1e-6 * std::max(1.0, std::abs(y))) << what;
  };
  for (const char* key : {"mean_cos_excl", "concentration"}) {
    expect_close(by_run[0][key], last[key], std::string("last ") + key);
    expect_close(by_run[1][key], final_state[key], std::string("final ") + key);
  }
  expect_close(by_run[0]["socm"]["mean"], last["socm"]["mean"], "last socm");
  expect_close(by_run[1]["socm"]["mean"], final_state["socm"]["mean"], "final socm");
  // The two states differ, so the comparison above tells them apart.
  EXPECT_GT(std::abs(last["concentration"].get<double>() - final_state["concentration"].get<double>()), 1e-3);

  auto all = diagnose("--run " + recipe.run_dir() + " --texts " + (dir / "texts.txt").string(), "all.json")["layers"];
  ASSERT_EQ(all.size(), size_t(blocks + 2));  // embeddings, each block, the final norm
  EXPECT_EQ(all.back()["after_final_norm"], true);
  auto bad = spread::testing::run_spread("diagnose --run " + recipe.run_dir() + " --texts " +
                                         (dir / "texts.txt").string() + " --layers finale");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.output.find("--layers"), std::string::npos) << bad.output;
}

// Validation batches of the contrastive task: 4 topics of 10 consecutive examples in file order, examples 0 and 1
// sharing their positive. File-order batches of 8 would be one topic each and hold that repeated text.
TEST(ContrastiveValidation, BatchesMixTopicsRepeatNoTextAndAreTheSameEveryTime) {
  std::vector<spread::PairExample> val;
  for (int topic = 0; topic < 4; ++topic)
    for (int i = 0; i < 10; ++i)
      val.push_back({fmt::format("t{} anchor {}", topic, i), fmt::format("t{} positive {}", topic, i), {}});
  val[1].positive = val[0].positive;
  const auto batches = spread::validation_batches(val, 8, 100);
  ASSERT_EQ(batches.size(), 5u);  // the set fills 40 / 8 batches once
  std::set<int64_t> seen;
  bool some_batch_mixes_topics = false;
  for (const auto& batch : batches) {
    EXPECT_EQ(batch.size(), 8u);
    std::set<std::string> texts;
    std::set<int64_t> topics;
    for (int64_t i : batch) {
      seen.insert(i);
      EXPECT_TRUE(texts.insert(val[size_t(i)].anchor).second);
      EXPECT_TRUE(texts.insert(val[size_t(i)].positive).second) << "a text twice in one batch";
      topics.insert(i / 10);
    }
    some_batch_mixes_topics |= topics.size() > 1;
  }
  EXPECT_TRUE(some_batch_mixes_topics);
  // One walk of a permutation: an example skipped for its repeated text may come back in the next batch.
  EXPECT_GE(seen.size(), 36u);
  EXPECT_EQ(spread::validation_batches(val, 8, 100), batches);
  EXPECT_EQ(spread::validation_batches(val, 8, 2).size(), 2u);  // eval_batches caps them
  EXPECT_TRUE(spread::validation_batches({val[0]}, 8, 100).empty());
}
