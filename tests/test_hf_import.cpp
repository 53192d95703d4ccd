// Models people have, read from their folders (interchange/hf_import.h) and judged by the libraries that made them:
// tiny random BertModel, BertForMaskedLM, GPT2LMHeadModel, sentence-transformers folders, saved by transformers /
// sentence-transformers with the real bert-base-uncased and GPT-2 vocabularies (tests/oracles/hf_model_ref.py, through
// the Python of tests/python_env.h; skipped with the reason when it or the vocabularies are absent). Compared on
// real sentences: every layer's hidden states, the MLM/LM logits, ST embeddings through `spread encode --model`,
// and GPT-2's greedy generation. The bad-folder cases need no Python.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <torch/torch.h>
#include <unistd.h>

#include "test_paths.h"

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_run.h"
#include "pylate_reference.h"
#include "python_env.h"
#include "shared_data.h"
#include "spread/config/recipe.h"
#include "spread/data/npy.h"
#include "spread/data/safetensors.h"
#include "spread/data/special_tokens.h"
#include "spread/encode/multi_vector.h"
#include "spread/interchange/hf_import.h"
#include "spread/interchange/loaded_run.h"
#include "spread/interchange/sentence_modules_record.h"
#include "spread/model/generate.h"
#include "spread/run/setup.h"
#include "spread/tasks/contrastive.h"
#include "spread/tasks/maxsim.h"
#include "spread/train/trainer.h"
#include "spread/util/error.h"

namespace fs = std::filesystem;
using nlohmann::json;
using spread::testing::fresh_temp_dir;
using spread::testing::expect_colbert_matches;
using spread::testing::matrix;
using spread::testing::max_abs;
using spread::testing::run_spread;

namespace {

constexpr double kTol = 1e-5;

// kTol, or 1e-6 of the reference's largest entry when that is above 10 (about 8 float32 ulps of it): hidden states
// of random weights reach 10-20 in ModernBERT's deeper layers, where float32 rounding alone passes 1e-5.
double tolerance_for(const torch::Tensor& reference) {
  return std::max(kTol, 1e-6 * reference.abs().max().item<double>());
}

// Real sentences: case, accents, digits, punctuation, a long word, and lengths that differ (padding in a batch).
const std::vector<std::string> kTexts = {
    "The quick brown fox jumps over the lazy dog.",
    "Caf\xc3\xa9 au lait costs 3.50 euros in Paris, doesn't it?",
    "Antidisestablishmentarianism",
    "A man is playing a guitar on the stage while people dance.",
    "Two dogs run through a field of tall green grass near 42 trees.",
    // Greek capitals: Python's str.lower() (do_lower_case) gives the final sigma where a lower-casing normalizer
    // gives the other one; ΟΔΟΣ'Σ: the apostrophe is case-ignorable.
    "\u039F \u039F\u0394\u03A5\u03A3\u03A3\u0395\u03A5\u03A3 \u0393\u03A5\u03A1\u0399\u03A3\u0395, "
    "\u039F\u0394\u039F\u03A3'\u03A3 \u03A3\u0391\u03A3."};

// Queries for the ColBERT folder: short, with punctuation (the skiplist) and one longer than its 12 tokens.
const std::vector<std::string> kQueries = {"who plays the guitar?", "dogs, grass & trees",
                                           "what does a cafe au lait cost in Paris on a rainy Sunday morning?"};
// Each query's positive and hard negative document, for PyLate's training loss.
const std::vector<std::string> kPositives = {kTexts[3], kTexts[4], kTexts[1]};
const std::vector<std::string> kNegatives = {kTexts[0], kTexts[2], "Tea costs 2 euros in Rome; coffee, 1.20!"};

std::string script() { return spread::testing::oracle_script("hf_model_ref.py"); }

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

void write_lines(const fs::path& p, const std::vector<std::string>& lines) {
  std::ofstream out(p, std::ios::binary);
  for (const auto& l : lines) out << l << "\n";
}

// The Python jobs that make every model of the suite and its reference outputs under `root`.
std::vector<std::string> reference_jobs(const fs::path& w, const std::string& bert, const std::string& gpt2) {
  std::vector<std::string> jobs;
  auto make = [&](const std::string& kind, const std::string& name, const std::string& tok, const std::string& opts) {
    jobs.push_back(fmt::format("make {} {} --tokenizer {} {}", kind, (w / name).string(), tok, opts));
  };
  // Shapes: odd head counts and MLP widths, both epsilons, both GELUs, 1-3 layers, real vocabularies.
  make("bert", "bert", bert, "--seed 1 --layers 2 --heads 3 --width 48 --intermediate 37 --eps 1e-12");
  make("bert", "bert_tanh", bert, "--seed 2 --layers 1 --heads 1 --width 32 --act gelu_new --eps 1e-5");
  make("bert-mlm", "bert_mlm", bert, "--seed 3 --layers 3 --heads 2 --width 32");
  make("bert", "bert_sharded_bf16", bert, "--seed 4 --layers 2 --heads 2 --width 32 --shards 3 --dtype bfloat16");
  make("megatron-bert", "megatron", bert, "--seed 14 --layers 2 --heads 2 --width 32 --intermediate 45 --eps 1e-5");
  make("distilbert", "distilbert", bert, "--seed 22 --layers 2 --heads 3 --width 48 --intermediate 37");
  make("distilbert-mlm", "distilbert_mlm", bert, "--seed 23 --layers 2 --heads 2 --width 32 --act gelu_new");
  make("roberta", "roberta", bert, "--seed 25 --layers 2 --heads 2 --width 32 --intermediate 50");
  make("roberta-mlm", "roberta_mlm", bert, "--seed 26 --layers 1 --heads 4 --width 32");
  make("gpt2", "gpt2", gpt2, "--seed 5 --layers 2 --heads 3 --width 48 --max-position 80");
  make("gpt2", "gpt2_exact", gpt2, "--seed 6 --layers 1 --heads 2 --width 32 --act gelu --intermediate 50");
  // Llama-style: grouped-query attention (4 query heads over 2 k/v heads), an untied head, another rotary base; and
  // one k/v head per query head with a tied head.
  make("llama", "llama_gqa", gpt2,
       "--seed 16 --layers 2 --heads 4 --kv-heads 2 --width 48 --intermediate 70 --max-position 96 --rope-theta 500000");
  make("llama", "llama_tied", gpt2, "--seed 17 --layers 1 --heads 2 --width 32 --tie --eps 1e-5");
  // ModernBERT: local attention of width 8 (4 keys either way, shorter than most texts) with global layers 0 and 3,
  // two rotary bases; and an MLM model with an odd window (7: 3 either way), a global layer every 2, biases
  // everywhere and the tanh GELU.
  make("modernbert", "modernbert", bert,
       "--seed 18 --layers 4 --heads 2 --width 32 --local-attention 8 --rope-theta 160000 --max-position 64");
  make("modernbert-mlm", "modernbert_mlm", bert, "--seed 19 --layers 3 --heads 4 --width 48 --intermediate 40 "
       "--local-attention 7 --global-every 2 --bias --act gelu_pytorch_tanh --rope-theta 80000 "
       "--local-rope-theta 5000 --max-position 64");
  make("st", "st_mean_norm", bert, "--seed 7 --layers 2 --heads 2 --width 32 --pooling mean --normalize");
  make("st", "st_cls", bert, "--seed 8 --layers 2 --heads 2 --width 32 --pooling cls");
  make("st", "st_max", bert, "--seed 9 --layers 2 --heads 2 --width 32 --pooling max");
  make("st", "st_last", bert, "--seed 10 --layers 2 --heads 2 --width 32 --pooling lasttoken --max-seq-length 12");
  make("st", "st_weighted", bert, "--seed 11 --layers 2 --heads 2 --width 32 --pooling weightedmean");
  make("st", "st_lower", bert,
       "--seed 15 --layers 2 --heads 2 --width 32 --pooling mean --normalize --lower-case --pad-vocab 6");
  make("st", "st_prompts", bert,
       "--seed 12 --layers 2 --heads 2 --width 32 --pooling mean --prompts --include-prompt 0 --normalize");
  make("pylate", "pylate", bert, "--seed 13 --layers 2 --heads 2 --width 32 --dim 16 --query-length 12 "
       "--document-length 20");
  // The same wrappers around ModernBERT encoders (as GTE-ModernColBERT and ModernBERT embedders are), with windows
  // shorter than the texts.
  make("st", "st_modernbert", bert, "--base modernbert --seed 20 --layers 4 --heads 2 --width 32 --local-attention 4 "
       "--max-position 64 --pooling mean --normalize");
  make("st", "st_distilbert", bert,
       "--base distilbert --seed 24 --layers 2 --heads 2 --width 32 --pooling mean --normalize");
  make("st", "st_roberta", bert,
       "--base roberta --seed 27 --layers 2 --heads 2 --width 32 --pooling mean --normalize");
  make("pylate", "pylate_modernbert", bert, "--base modernbert --seed 21 --layers 3 --heads 2 --width 32 "
       "--local-attention 6 --global-every 2 --max-position 64 --dim 16 --query-length 12 --document-length 20");
  const std::string texts = (w / "texts.txt").string();
  for (const std::string m : {"bert", "bert_tanh", "bert_mlm", "bert_sharded_bf16", "megatron", "distilbert",
                              "distilbert_mlm", "roberta", "roberta_mlm", "gpt2", "gpt2_exact", "llama_gqa",
                              "llama_tied", "modernbert", "modernbert_mlm"})
    jobs.push_back(fmt::format("hidden {} {} {}", (w / m).string(), texts, (w / (m + ".hidden.json")).string()));
  for (const std::string m : {"modernbert", "modernbert_mlm", "llama_gqa", "distilbert", "roberta"})  // one batch
    jobs.push_back(fmt::format("hidden {} {} {} --batch", (w / m).string(), texts, (w / (m + ".batch.json")).string()));
  for (const std::string m :
       {"st_mean_norm", "st_cls", "st_max", "st_last", "st_weighted", "st_lower", "st_modernbert", "st_distilbert",
        "st_roberta"})
    jobs.push_back(fmt::format("st-encode {} {} {}", (w / m).string(), texts, (w / (m + ".st.json")).string()));
  jobs.push_back(fmt::format("st-encode {} {} {} --prompt-name query", (w / "st_prompts").string(), texts,
                             (w / "st_prompts.st.json").string()));
  for (const std::string m : {"pylate", "pylate_modernbert"})
    jobs.push_back(fmt::format("pylate {} {} {} {}", (w / m).string(), (w / "queries.txt").string(), texts,
                               (w / (m + ".json")).string()));
  jobs.push_back(fmt::format("pylate-loss {} {} {} {} {}", (w / "pylate").string(), (w / "queries.txt").string(),
                             (w / "positives.txt").string(), (w / "negatives.txt").string(),
                             (w / "pylate.loss.json").string()));
  jobs.push_back(fmt::format("st-loss {} {} {} {} {}", (w / "st_mean_norm").string(), (w / "queries.txt").string(),
                             (w / "positives.txt").string(), (w / "negatives.txt").string(),
                             (w / "st_mean_norm.loss.json").string()));
  for (const std::string m : {"gpt2", "llama_gqa"})
    jobs.push_back(fmt::format("generate {} {} {} --max-new-tokens 32", (w / m).string(), (w / "prompts.txt").string(),
                               (w / (m + ".generate.json")).string()));
  return jobs;
}

std::string file_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The models and references, made once by one Python process (a torch import is seconds) and shared by the
// suite's tests, which ctest runs in processes of their own: a folder keyed by everything that decides its
// contents (jobs, texts, script, interpreter), made under a lock and marked complete last.
class HfImport : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string why;
    python_ = spread::testing::reference_python({"transformers", "sentence_transformers"}, &why);
    const std::string bert = spread::testing::shared_data_path("tokenizers/bert-base-uncased");
    const std::string gpt2 = spread::testing::shared_data_path("tokenizers/gpt2");
    if (python_.empty()) skip_ = why;
    else if (bert.empty() || gpt2.empty()) skip_ = spread::testing::shared_data_missing("tokenizers");
    if (!skip_.empty()) return;
    work_ = new fs::path(fresh_temp_dir("hf_import"));
    std::string key = python_ + file_text(script());
    for (const auto& j : reference_jobs("@", bert, gpt2)) key += j + "\n";
    for (const auto& t : kTexts) key += t + "\n";
    for (const auto& q : kQueries) key += q + "\n";
    for (const auto& d : kPositives) key += d + "\n";
    for (const auto& d : kNegatives) key += d + "\n";
    models_ = new fs::path(fs::temp_directory_path() /
                           fmt::format("spread_hf_models_{:016x}", std::hash<std::string>{}(key)));
    const fs::path w = *models_;
    const int lock = ::open((w.string() + ".lock").c_str(), O_CREAT | O_RDWR, 0644);
    ::flock(lock, LOCK_EX);
    if (!fs::exists(w / "complete")) make_models(w, bert, gpt2);
    ::flock(lock, LOCK_UN);
    ::close(lock);
  }

  static void make_models(const fs::path& w, const std::string& bert, const std::string& gpt2) {
    fs::remove_all(w);
    fs::create_directories(w);
    write_lines(w / "texts.txt", kTexts);
    write_lines(w / "prompts.txt", {"The meaning of life is", "Once upon a time"});
    write_lines(w / "queries.txt", kQueries);
    write_lines(w / "positives.txt", kPositives);
    write_lines(w / "negatives.txt", kNegatives);
    write_lines(w / "jobs.txt", reference_jobs(w, bert, gpt2));
    const std::string cmd = fmt::format("'{}' '{}' --jobs '{}' > '{}' 2>&1", python_, script(),
                                        (w / "jobs.txt").string(), (w / "python.log").string());
    if (std::system(cmd.c_str()) != 0) {
      failure_ = "the reference script failed: " + cmd + "\n" + file_text(w / "python.log");
      return;
    }
    std::ofstream(w / "complete") << "made by " << cmd << "\n";
  }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(failure_.empty()) << failure_;
  }

  static fs::path dir(const std::string& name) { return *models_ / name; }  // a model or reference (shared)
  void expect_fine_tuned_export(const std::string& folder_name, const std::string& architecture,
                                const std::string& layout);

  static std::string python_, skip_, failure_;
  static fs::path* work_;    // this process's outputs
  static fs::path* models_;  // the shared models and references
};
std::string HfImport::python_, HfImport::skip_, HfImport::failure_;
fs::path* HfImport::work_ = nullptr;
fs::path* HfImport::models_ = nullptr;

// The ids spread's tokenizer gives a text as the model folder frames it: [CLS] text [SEP] for an encoder, the
// text alone for GPT-2.
std::vector<int32_t> spread_ids(spread::LoadedRun& run, const std::string& text) {
  return run.recipe.is_encoder_objective()
             ? spread::encode_for_encoder(*run.tokenizer, text, run.recipe.data.max_length)
             : run.tokenizer->encode(text);
}

// Every layer's hidden states (and the logits, when the reference has them) of each text against the reference:
// transformers' hidden_states are the embedding output, then each block's, the last after GPT-2's final norm.
void expect_hidden_states_match(const fs::path& folder, const fs::path& reference) {
  SCOPED_TRACE(folder.string());
  spread::LoadedRun run = spread::load_run(folder.string());
  const json ref = read_json(reference);
  torch::NoGradGuard no_grad;
  double worst_hidden = 0, worst_logits = 0;
  for (const auto& t : ref.at("texts")) {
    const auto ids = t.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(spread_ids(run, t.at("text").get<std::string>()), ids) << t.at("text");
    auto input = torch::tensor(std::vector<int64_t>(ids.begin(), ids.end())).view({1, -1});
    auto out = run.model->forward(input, /*want_hidden=*/true, /*want_logits=*/true);
    const auto& layers = t.at("hidden");
    ASSERT_EQ(layers.size(), out.hidden.size()) << folder;
    for (size_t i = 0; i < layers.size(); ++i) {
      const auto& mine = i + 1 == layers.size() ? out.final_hidden : out.hidden[i];
      const auto want = matrix(layers[i]);
      const double d = max_abs(mine[0], want);
      worst_hidden = std::max(worst_hidden, d);
      EXPECT_LE(d, tolerance_for(want)) << folder << " layer " << i << " of " << t.at("text");
    }
    if (!t.contains("logits_head")) continue;
    auto logits = out.logits[0];
    auto head = matrix(t.at("logits_head"));
    worst_logits = std::max(worst_logits, max_abs(logits.narrow(1, 0, head.size(1)), head));
    EXPECT_LE(max_abs(logits.narrow(1, 0, head.size(1)), head), kTol) << folder;
    EXPECT_LE(max_abs(logits.logsumexp(1), torch::tensor(t.at("logsumexp").get<std::vector<float>>())), kTol);
    EXPECT_TRUE(torch::equal(logits.argmax(1), torch::tensor(t.at("argmax").get<std::vector<int64_t>>())));
  }
  std::cout << folder.filename().string() << ": largest difference " << worst_hidden << " (hidden states), "
            << worst_logits << " (logits)\n";
}

// The same comparison with all texts in one batch, padded on the right (key padding masked), valid rows compared.
void expect_batched_hidden_states_match(const fs::path& folder, const fs::path& reference) {
  SCOPED_TRACE(folder.string());
  spread::LoadedRun run = spread::load_run(folder.string());
  const json ref = read_json(reference);
  ASSERT_TRUE(ref.at("batch").get<bool>());
  const auto& texts = ref.at("texts");
  int64_t T = 0;
  for (const auto& t : texts) T = std::max<int64_t>(T, int64_t(t.at("ids").size()));
  const int64_t B = int64_t(texts.size());
  auto ids = torch::zeros({B, T}, torch::kLong);
  auto valid = torch::zeros({B, T}, torch::kBool);
  for (int64_t b = 0; b < B; ++b) {
    const auto row = texts[size_t(b)].at("ids").get<std::vector<int64_t>>();
    ids[b].narrow(0, 0, int64_t(row.size())).copy_(torch::tensor(row));
    valid[b].narrow(0, 0, int64_t(row.size())).fill_(true);
  }
  ASSERT_FALSE(valid.all().item<bool>()) << "the texts must differ in length for padding to matter";
  torch::NoGradGuard no_grad;
  auto out = run.model->forward(ids, /*want_hidden=*/true, /*want_logits=*/true, valid);
  double worst = 0;
  for (int64_t b = 0; b < B; ++b) {
    const auto& t = texts[size_t(b)];
    const int64_t n = int64_t(t.at("ids").size());
    const auto& layers = t.at("hidden");
    ASSERT_EQ(layers.size(), out.hidden.size());
    for (size_t i = 0; i < layers.size(); ++i) {
      const auto& mine = i + 1 == layers.size() ? out.final_hidden : out.hidden[i];
      const auto want = matrix(layers[i]);
      const double d = max_abs(mine[b].narrow(0, 0, n), want);
      worst = std::max(worst, d);
      EXPECT_LE(d, tolerance_for(want)) << "layer " << i << " of " << t.at("text");
    }
    if (t.contains("logits_head")) {
      auto head = matrix(t.at("logits_head"));
      EXPECT_LE(max_abs(out.logits[b].narrow(0, 0, n).narrow(1, 0, head.size(1)), head), kTol) << t.at("text");
    }
  }
  std::cout << folder.filename().string() << " in one padded batch: largest difference " << worst << "\n";
}

}  // namespace

TEST_F(HfImport, BertHiddenStatesOfEveryLayerMatchTransformers) {
  expect_hidden_states_match(dir("bert"), dir("bert.hidden.json"));
  expect_hidden_states_match(dir("bert_tanh"), dir("bert_tanh.hidden.json"));
}

// MegatronBertModel, the pre-LayerNorm BERT (norms before attention and MLP, one after the last layer, none after
// the embeddings): the layout spread's own encoders export to, so the same import reads them back.
TEST_F(HfImport, MegatronBertHiddenStatesOfEveryLayerMatchTransformers) {
  const auto folder = spread::read_hf_model_folder(dir("megatron").string(), /*with_weights=*/false);
  EXPECT_FALSE(folder.config.norm.post);
  EXPECT_EQ(folder.config.mlp.width, 45);
  expect_hidden_states_match(dir("megatron"), dir("megatron.hidden.json"));
}

TEST_F(HfImport, BertForMaskedLmLogitsMatchTransformers) {
  spread::LoadedRun run = spread::load_run(dir("bert_mlm").string());
  EXPECT_EQ(run.recipe.train.objective, spread::Objective::mlm);
  EXPECT_TRUE(run.model->config().compat.mlm_transform);
  expect_hidden_states_match(dir("bert_mlm"), dir("bert_mlm.hidden.json"));
}

TEST_F(HfImport, ShardedBf16CheckpointLoadsAsFloat32) {
  ASSERT_TRUE(fs::exists(dir("bert_sharded_bf16") / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(dir("bert_sharded_bf16") / "model.safetensors"));
  expect_hidden_states_match(dir("bert_sharded_bf16"), dir("bert_sharded_bf16.hidden.json"));
}

TEST_F(HfImport, Gpt2HiddenStatesAndLogitsMatchTransformers) {
  spread::LoadedRun run = spread::load_run(dir("gpt2").string());
  EXPECT_EQ(run.recipe.train.objective, spread::Objective::lm);
  EXPECT_TRUE(run.model->config().mlp.gelu_tanh);
  EXPECT_EQ(run.model->config().block_size, 80);
  expect_hidden_states_match(dir("gpt2"), dir("gpt2.hidden.json"));
  expect_hidden_states_match(dir("gpt2_exact"), dir("gpt2_exact.hidden.json"));
}

namespace {

// 32 greedy tokens of spread::generate against transformers' generate (which stops early at <|endoftext|>).
void expect_greedy_generation_matches(const fs::path& folder, const fs::path& reference) {
  spread::LoadedRun run = spread::load_run(folder.string());
  const json ref = read_json(reference);
  spread::SampleOptions greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = 32;
  for (const auto& r : ref.at("results")) {
    const auto prompt = r.at("prompt_ids").get<std::vector<int32_t>>();
    EXPECT_EQ(run.tokenizer->encode(r.at("prompt").get<std::string>()), prompt);
    auto ids = spread::generate(run.model, prompt, greedy, torch::kCPU);
    std::vector<int32_t> fresh(ids.begin() + int64_t(prompt.size()), ids.end());
    const auto expected = r.at("new_ids").get<std::vector<int32_t>>();
    ASSERT_GE(fresh.size(), expected.size());
    fresh.resize(expected.size());
    EXPECT_EQ(fresh, expected) << folder << ": " << r.at("prompt");
  }
}

}  // namespace

TEST_F(HfImport, Gpt2GreedyGenerationEqualsTransformersGenerate) {
  expect_greedy_generation_matches(dir("gpt2"), dir("gpt2.generate.json"));
  // The command line reaches the same model: `generate --model` continues the prompt.
  auto cli = run_spread(fmt::format("generate --model '{}' --prompt 'Once upon a time' --max-new-tokens 8 "
                                    "--temperature 0",
                                    dir("gpt2").string()));
  EXPECT_EQ(cli.code, 0) << cli.output;
  EXPECT_EQ(cli.output.rfind("Once upon a time", 0), 0u) << cli.output;
}

// LlamaForCausalLM: RMSNorm, rotary positions, SwiGLU, grouped-query attention, untied or tied output.
TEST_F(HfImport, LlamaHiddenStatesAndLogitsMatchTransformers) {
  const auto folder = spread::read_hf_model_folder(dir("llama_gqa").string(), /*with_weights=*/false);
  EXPECT_EQ(folder.family, "llama");
  EXPECT_TRUE(folder.config.positions.rope && folder.config.norm.rms && folder.config.mlp.gated &&
              folder.config.mlp.silu);
  EXPECT_EQ(folder.config.attention.n_kv_head, 2);
  EXPECT_FALSE(folder.config.compat.tie_embeddings);
  EXPECT_EQ(folder.config.positions.rope_theta, 500000.0);
  EXPECT_EQ(folder.config.mlp.width, 70);
  EXPECT_TRUE(spread::read_hf_model_folder(dir("llama_tied").string(), false).config.compat.tie_embeddings);
  expect_hidden_states_match(dir("llama_gqa"), dir("llama_gqa.hidden.json"));
  expect_hidden_states_match(dir("llama_tied"), dir("llama_tied.hidden.json"));
  expect_batched_hidden_states_match(dir("llama_gqa"), dir("llama_gqa.batch.json"));
}

// ModernBertModel and ModernBertForMaskedLM: local attention (texts longer than the window), global layers, two
// rotary bases, gated GELU, bias-free or biased norms and projections, the MLM head; one text at a time and all
// texts in one padded batch.
TEST_F(HfImport, ModernBertHiddenStatesAndLogitsMatchTransformers) {
  const auto folder = spread::read_hf_model_folder(dir("modernbert").string(), /*with_weights=*/false);
  EXPECT_EQ(folder.family, "modernbert");
  const auto& c = folder.config;
  EXPECT_TRUE(c.positions.rope && c.mlp.gated && !c.mlp.silu && c.norm.embedding && !c.norm.first_block && !c.causal);
  EXPECT_FALSE(c.bias || c.norm.bias || c.compat.mlm_transform);
  EXPECT_EQ(c.attention.window, 8);
  EXPECT_EQ(c.attention.global_every, 3);
  EXPECT_EQ(c.positions.rope_theta, 160000.0);
  EXPECT_EQ(c.positions.local_rope_theta, 10000.0);
  const auto mlm = spread::read_hf_model_folder(dir("modernbert_mlm").string(), false).config;
  EXPECT_TRUE(mlm.compat.mlm_transform && mlm.bias && mlm.norm.bias && mlm.compat.mlm_dense_bias && mlm.mlp.gelu_tanh);
  EXPECT_EQ(mlm.attention.window, 7);
  EXPECT_EQ(mlm.attention.global_every, 2);
  EXPECT_EQ(mlm.positions.local_rope_theta, 5000.0);
  for (const std::string m : {"modernbert", "modernbert_mlm"}) {
    expect_hidden_states_match(dir(m), dir(m + ".hidden.json"));
    expect_batched_hidden_states_match(dir(m), dir(m + ".batch.json"));
  }
}

// DistilBertModel and DistilBertForMaskedLM: BERT's post-LayerNorm blocks without token types, under DistilBERT's
// names and config keys (odd head count and MLP width; the tanh GELU in the MLM model, its head included).
TEST_F(HfImport, DistilBertHiddenStatesAndLogitsMatchTransformers) {
  const auto folder = spread::read_hf_model_folder(dir("distilbert").string(), /*with_weights=*/false);
  EXPECT_EQ(folder.architecture, "DistilBertModel");
  EXPECT_EQ(folder.family, "bert");
  const auto& c = folder.config;
  EXPECT_TRUE(c.norm.post && c.bias && !c.causal && !c.compat.mlm_transform);
  EXPECT_EQ(c.compat.type_vocab_size, 0);
  EXPECT_EQ(c.n_head, 3);
  EXPECT_EQ(c.mlp.width, 37);
  EXPECT_EQ(c.norm.eps, 1e-12);
  const auto mlm = spread::read_hf_model_folder(dir("distilbert_mlm").string(), false).config;
  EXPECT_TRUE(mlm.compat.mlm_transform && mlm.mlp.gelu_tanh);
  expect_hidden_states_match(dir("distilbert"), dir("distilbert.hidden.json"));
  expect_batched_hidden_states_match(dir("distilbert"), dir("distilbert.batch.json"));
  expect_hidden_states_match(dir("distilbert_mlm"), dir("distilbert_mlm.hidden.json"));
}

// RobertaModel and RobertaForMaskedLM with pad_token_id 1 (positions from 2, as RoBERTa's): spread keeps the
// position rows from 2 on; one text at a time and in one padded batch; the MLM head.
TEST_F(HfImport, RobertaHiddenStatesAndLogitsMatchTransformers) {
  const auto folder = spread::read_hf_model_folder(dir("roberta").string(), /*with_weights=*/false);
  EXPECT_EQ(folder.architecture, "RobertaModel");
  EXPECT_EQ(folder.config.block_size, 64);  // max_position_embeddings 66 less the two rows before the text
  EXPECT_EQ(folder.config.compat.type_vocab_size, 1);
  EXPECT_TRUE(spread::read_hf_model_folder(dir("roberta_mlm").string(), false).config.compat.mlm_transform);
  expect_hidden_states_match(dir("roberta"), dir("roberta.hidden.json"));
  expect_batched_hidden_states_match(dir("roberta"), dir("roberta.batch.json"));
  expect_hidden_states_match(dir("roberta_mlm"), dir("roberta_mlm.hidden.json"));
}

TEST_F(HfImport, LlamaGreedyGenerationEqualsTransformersGenerate) {
  expect_greedy_generation_matches(dir("llama_gqa"), dir("llama_gqa.generate.json"));
}

// `spread encode --model` against SentenceTransformer(DIR).encode for each pooling mode, Normalize or not,
// max_seq_length, and a prompt left out of the pooling (include_prompt = false).
TEST_F(HfImport, SentenceTransformersEncodeMatchesTheLibrary) {
  for (const std::string m :
       {"st_mean_norm", "st_cls", "st_max", "st_last", "st_weighted", "st_prompts", "st_lower", "st_modernbert",
        "st_distilbert", "st_roberta"}) {
    const json ref = read_json(dir(m + ".st.json"));
    const fs::path out = *work_ / (m + ".npy");
    const std::string prompt = ref.value("prompt_name", json()).is_string() ? " --prompt-name query" : "";
    auto r = run_spread(fmt::format("encode --model '{}' --in '{}' --out '{}'{}", dir(m).string(),
                                    dir("texts.txt").string(), out.string(), prompt));
    ASSERT_EQ(r.code, 0) << m << ": " << r.output;
    Eigen::MatrixXd mine = spread::read_npy_matrix(out.string());  // column-major
    auto got = torch::from_blob(mine.data(), {mine.cols(), mine.rows()}, torch::kDouble).t().clone();
    const double d = max_abs(got, matrix(ref.at("embeddings")));
    std::cout << m << ": largest difference " << d << "\n";
    EXPECT_LE(d, kTol) << m;
  }
}

// do_lower_case = true is adopted as tokenizer.lowercase, and it changes the ids of the Greek text (the final
// sigma), so the encode comparison above holds only with the lower-casing done as Python does it.
TEST_F(HfImport, DoLowerCaseIsAdoptedAndChangesTheIds) {
  spread::LoadedRun lowered = spread::load_run(dir("st_lower").string());
  spread::LoadedRun plain = spread::load_run(dir("st_mean_norm").string());
  EXPECT_TRUE(lowered.recipe.tokenizer.lowercase);
  EXPECT_FALSE(plain.recipe.tokenizer.lowercase);
  const std::string& greek = kTexts.back();
  EXPECT_NE(lowered.tokenizer->encode(greek), plain.tokenizer->encode(greek));
  EXPECT_EQ(lowered.tokenizer->encode(kTexts[0]), plain.tokenizer->encode(kTexts[0]));  // already lower-cased
}

// A PyLate ColBERT folder read as one: its head, markers, lengths and skiplist, encoding as PyLate encodes.
TEST_F(HfImport, PyLateColbertFolderMatchesTheLibrary) {
  spread::LoadedRun run = spread::load_run(dir("pylate").string());
  ASSERT_EQ(run.recipe.train.objective, spread::Objective::maxsim);
  EXPECT_EQ(run.model->config().head_dim, 16);
  expect_colbert_matches(run, read_json(dir("pylate.json")));
  // The command line reaches it: late-interaction retrieval of a model folder.
  auto r = run_spread(fmt::format("eval --model '{}' --beir '{}/beir_tiny' --pool-factors 1,2", dir("pylate").string(),
                                  SPREAD_TEST_DATA_DIR));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("MaxSim"), std::string::npos) << r.output;
  spread::LoadedRun modern = spread::load_run(dir("pylate_modernbert").string());
  EXPECT_EQ(modern.model->config().attention.window, 6);
  expect_colbert_matches(modern, read_json(dir("pylate_modernbert.json")));
  EXPECT_NE(r.output.find("nDCG@10"), std::string::npos) << r.output;
}

// PyLate saves no model_type when the model it trained came from a sentence-transformers folder without one (as
// all-MiniLM-L6-v2's is), and loads such a folder as a ColBERT: so does spread, by its Dense modules.
TEST_F(HfImport, APyLateFolderWithoutModelTypeIsReadAsAColbert) {
  const fs::path copy = *work_ / "pylate_without_model_type";
  fs::remove_all(copy);
  fs::copy(dir("pylate"), copy, fs::copy_options::recursive);
  json config = read_json(copy / "config_sentence_transformers.json");
  config.erase("model_type");
  std::ofstream(copy / "config_sentence_transformers.json", std::ios::trunc) << config.dump(2);
  spread::LoadedRun run = spread::load_run(copy.string());
  ASSERT_EQ(run.recipe.train.objective, spread::Objective::maxsim);
  expect_colbert_matches(run, read_json(dir("pylate.json")));
}

// `eval --model` of an LM folder measures a text file (a folder has no validation split, and says so).
TEST_F(HfImport, EvalMeasuresAnLmFolderOnATextFile) {
  const fs::path text = *work_ / "eval_text.txt";
  {
    std::ofstream t(text);
    for (int i = 0; i < 30; ++i) t << kTexts[size_t(i) % kTexts.size()] << "\n";
  }
  auto r = run_spread(fmt::format("eval --model '{}' --text '{}' --json", dir("gpt2").string(), text.string()));
  ASSERT_EQ(r.code, 0) << r.output;
  const json j = json::parse(r.output.substr(r.output.find('{')));
  // A random model is about uniform over GPT-2's 50,257 ids: its loss lies near ln 50257 = 10.8.
  EXPECT_GT(j.at("val_loss").get<double>(), 5.0) << r.output;
  EXPECT_LT(j.at("val_loss").get<double>(), 20.0) << r.output;
  auto none = run_spread(fmt::format("eval --model '{}'", dir("gpt2").string()));
  EXPECT_EQ(none.code, 2) << none.output;
  EXPECT_NE(none.output.find("--text FILE"), std::string::npos) << none.output;
}

TEST_F(HfImport, DiagnoseMeasuresAModelFolder) {
  auto r = run_spread(fmt::format("diagnose --model '{}' --texts '{}' --layers all", dir("st_mean_norm").string(),
                                  dir("texts.txt").string()));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("model " + dir("st_mean_norm").string()), std::string::npos) << r.output;
}

namespace {

// A few steps of `objective` from a model folder (train.init_from), on the suite's texts.
std::string train_from(const fs::path& work, const fs::path& folder, const std::string& name,
                       std::vector<std::string> extra) {
  const fs::path pairs = work / (name + ".tsv"), text = work / (name + ".txt");
  {
    std::ofstream p(pairs), t(text);
    p << "anchor\tpositive\n";
    for (int i = 0; i < 200; ++i) {
      const std::string& a = kTexts[size_t(i) % kTexts.size()];
      p << a << " " << i << "\t" << kTexts[size_t(i + 1) % kTexts.size()] << " (variant " << i << ")\n";
      t << a << " number " << i << "\n";
    }
  }
  std::vector<std::string> o = {"run.name=" + name, "run.out_dir=" + work.string(),
                                "train.init_from=" + folder.string(), "train.batch_size=4", "train.warmup_steps=1",
                                "train.eval_every=100", "train.ckpt_every=100", "train.log_every=1",
                                "data.path=" + (extra.front() == "train.objective=lm" || extra.front() ==
                                                "train.objective=mlm" ? text : pairs).string()};
  o.insert(o.end(), extra.begin(), extra.end());
  auto recipe = spread::parse_recipe("", "test.toml", o);
  EXPECT_EQ(spread::train(recipe, spread::TrainStart::Fresh), 0);
  return recipe.run_dir();
}

}  // namespace

// train.init_from of a GPT-2 folder: the run takes the folder's shape and tokenizer (recipe.toml says so) and
// starts from its weights exactly; with a learning rate of 0 the run's checkpoint is the folder's model.
TEST_F(HfImport, InitFromGpt2FolderStartsFromItsWeightsAndShape) {
  const auto run = train_from(*work_, dir("gpt2"), "lm_from_gpt2",
                              {"train.objective=lm", "data.source=text", "train.max_steps=1", "train.lr=0",
                               "train.min_lr=0", "loss.dispersion.enabled=true", "loss.dispersion.lambda=0.1"});
  const auto recipe = spread::recipe_of_run(run);
  EXPECT_EQ(recipe.model.n_embd, 48);
  EXPECT_EQ(recipe.model.n_head, 3);
  EXPECT_EQ(recipe.model.block_size, 80);
  EXPECT_EQ(recipe.model.activation, "gelu_tanh");
  EXPECT_EQ(recipe.tokenizer.kind, "hf");
  expect_hidden_states_match(run, dir("gpt2.hidden.json"));
  // An objective the folder's attention does not fit: an LM from a BERT folder would see the tokens it predicts.
  try {
    train_from(*work_, dir("bert"), "lm_from_bert", {"train.objective=lm", "data.source=text"});
    ADD_FAILURE() << "an LM from a bidirectional folder was accepted";
  } catch (const spread::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("train.objective"), std::string::npos) << e.what();
  }
  // A recipe key that contradicts the folder is refused, naming both values.
  try {
    train_from(*work_, dir("gpt2"), "lm_contradiction", {"train.objective=lm", "data.source=text", "model.n_embd=64"});
    ADD_FAILURE() << "a contradicting model.n_embd was accepted";
  } catch (const spread::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("model.n_embd"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("64"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("48"), std::string::npos) << e.what();
  }
}

// train.init_from of a Llama folder: the block options travel through the run's recipe.toml (positions, norm,
// mlp, n_kv_head, tie_embeddings) and, at a learning rate of 0, the run is the folder's model.
TEST_F(HfImport, InitFromLlamaFolderKeepsItsBlocks) {
  const auto run = train_from(*work_, dir("llama_gqa"), "lm_from_llama",
                              {"train.objective=lm", "data.source=text", "train.max_steps=1", "train.lr=0",
                               "train.min_lr=0"});
  const auto recipe = spread::recipe_of_run(run);
  EXPECT_EQ(recipe.model.positions, "rope");
  EXPECT_EQ(recipe.model.norm, "rmsnorm");
  EXPECT_EQ(recipe.model.mlp, "swiglu");
  EXPECT_EQ(recipe.model.n_kv_head, 2);
  EXPECT_FALSE(recipe.model.tie_embeddings);
  EXPECT_EQ(recipe.model.rope_theta, 500000.0);
  expect_hidden_states_match(run, dir("llama_gqa.hidden.json"));
  try {
    train_from(*work_, dir("llama_gqa"), "llama_contradiction",
               {"train.objective=lm", "data.source=text", "model.n_kv_head=4"});
    ADD_FAILURE() << "a contradicting model.n_kv_head was accepted";
  } catch (const spread::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("model.n_kv_head"), std::string::npos) << e.what();
  }
}

// train.init_from of a ModernBertForMaskedLM folder for objective mlm: its window, global layers, rotary bases,
// norms and head travel through the run's recipe.toml, and at a learning rate of 0 the run is the folder's model.
TEST_F(HfImport, InitFromModernBertKeepsItsBlocksAndHead) {
  const auto run = train_from(*work_, dir("modernbert_mlm"), "mlm_from_modernbert",
                              {"train.objective=mlm", "data.source=text", "train.max_steps=1", "train.lr=0",
                               "train.min_lr=0", "data.max_length=32"});
  const auto recipe = spread::recipe_of_run(run);
  EXPECT_EQ(recipe.model.attention_window, 7);
  EXPECT_EQ(recipe.model.global_every, 2);
  EXPECT_EQ(recipe.model.local_rope_theta, 5000.0);
  EXPECT_TRUE(recipe.model.embedding_norm);
  EXPECT_FALSE(recipe.model.first_block_norm);
  EXPECT_TRUE(recipe.model.mlm_transform);
  expect_hidden_states_match(run, dir("modernbert_mlm.hidden.json"));
  try {
    train_from(*work_, dir("modernbert_mlm"), "modernbert_contradiction",
               {"train.objective=mlm", "data.source=text", "model.attention_window=128"});
    ADD_FAILURE() << "a contradicting model.attention_window was accepted";
  } catch (const spread::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("model.attention_window"), std::string::npos) << e.what();
  }
}

// train.init_from of a BertForMaskedLM folder for objective mlm keeps BERT's prediction head (transform and decoder
// bias): with a learning rate of 0 the run's hidden states and MLM logits are the folder's.
TEST_F(HfImport, InitFromBertForMaskedLmKeepsItsPredictionHead) {
  const auto run = train_from(*work_, dir("bert_mlm"), "mlm_from_bert",
                              {"train.objective=mlm", "data.source=text", "train.max_steps=1", "train.lr=0",
                               "train.min_lr=0", "data.max_length=32"});
  const auto recipe = spread::recipe_of_run(run);
  EXPECT_TRUE(recipe.model.mlm_transform);
  EXPECT_EQ(recipe.model.norm_position, "post");
  EXPECT_FALSE(recipe.model.causal);
  EXPECT_EQ(recipe.model.type_vocab_size, 2);
  expect_hidden_states_match(run, dir("bert_mlm.hidden.json"));
}

// spread's contrastive step on an imported sentence-transformers model gives the library's own losses on one batch:
// MultipleNegativesRankingLoss (scale 20 = temperature 0.05) and CachedMultipleNegativesRankingLoss against
// loss.contrastive.mini_batch, in-batch and with a hard negative each (candidates: positives, then negatives).
TEST_F(HfImport, ContrastiveStepGivesSentenceTransformersLosses) {
  spread::LoadedRun run = spread::load_run(dir("st_mean_norm").string());
  const json ref = read_json(dir("st_mean_norm.loss.json"));
  std::vector<std::vector<int32_t>> texts;
  for (const auto* list : {&kQueries, &kPositives, &kNegatives})
    for (const auto& t : *list) texts.push_back(spread::encode_for_encoder(*run.tokenizer, t, run.recipe.data.max_length));
  const size_t n = kQueries.size();
  spread::ContrastiveStepOptions opt;
  opt.loss.temperature = 0.05;
  opt.pooling = spread::parse_pooling(run.recipe.loss.contrastive.pooling);
  opt.pad_id = run.tokenizer->special_ids().pad;
  const auto loss_of = [&](bool negatives, int64_t mini_batch) {
    spread::ContrastiveBatch batch;
    for (size_t i = 0; i < n; ++i) batch.anchors.push_back(&texts[i]);
    for (size_t i = n; i < (negatives ? 3 : 2) * n; ++i) batch.candidates.push_back(&texts[i]);
    opt.mini_batch = mini_batch;
    return spread::contrastive_backward(run.model, batch, opt);
  };
  EXPECT_NEAR(loss_of(false, 0), ref.at("mnrl").get<double>(), kTol);
  EXPECT_NEAR(loss_of(true, 0), ref.at("mnrl_negatives").get<double>(), kTol);
  EXPECT_NEAR(loss_of(false, 2), ref.at("cached").get<double>(), kTol);
  EXPECT_NEAR(loss_of(true, 2), ref.at("cached_negatives").get<double>(), kTol);
  std::cout << "MNRL " << ref.at("mnrl") << " / " << ref.at("mnrl_negatives") << ", spread " << loss_of(false, 0)
            << " / " << loss_of(true, 0) << "\n";
}

// Fine-tune an imported sentence-transformers model (one with do_lower_case, a Normalize module and an embedding
// table padded past its tokenizer) contrastively, export it, load the export with the library: its encode (unit
// vectors, as the folder's) equals `spread encode` of the run, and the export is a BertModel again with
// do_lower_case, the Normalize module and the padded rows kept.
TEST_F(HfImport, FineTunedSentenceTransformerExportsBackAndTheLibraryAgrees) {
  const auto run = train_from(*work_, dir("st_lower"), "st_finetune",
                              {"train.objective=contrastive", "data.source=pairs", "train.max_steps=3",
                               "train.lr=1e-3"});
  EXPECT_EQ(spread::recipe_of_run(run).model.norm_position, "post");
  const fs::path out = *work_ / "st_finetune_export";
  auto e = run_spread(fmt::format("export --run '{}' --out '{}'", run, out.string()));
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_EQ(read_json(out / "config.json").at("architectures")[0], "BertModel");
  EXPECT_EQ(read_json(out / "sentence_bert_config.json").at("do_lower_case"), true);
  EXPECT_EQ(read_json(out / "config.json").at("vocab_size"), 30522 + 6);  // the folder's padded embedding table
  EXPECT_EQ(read_json(out / "modules.json").back().at("type"), "sentence_transformers.models.Normalize");
  const fs::path ref = *work_ / "st_finetune.st.json", npy = *work_ / "st_finetune.npy";
  const std::string cmd = fmt::format("'{}' '{}' st-encode '{}' '{}' '{}' > /dev/null 2>&1", python_, script(),
                                      out.string(), dir("texts.txt").string(), ref.string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto r = run_spread(fmt::format("encode --run '{}' --in '{}' --out '{}'", run, dir("texts.txt").string(),
                                  npy.string()));
  ASSERT_EQ(r.code, 0) << r.output;
  Eigen::MatrixXd mine = spread::read_npy_matrix(npy.string());
  auto got = torch::from_blob(mine.data(), {mine.cols(), mine.rows()}, torch::kDouble).t().clone();
  const torch::Tensor library = matrix(read_json(ref).at("embeddings"));
  EXPECT_LE(max_abs(got, library), kTol);
  EXPECT_LE(max_abs(library.norm(2, 1), torch::ones({library.size(0)}, torch::kDouble)), 1e-6);
  // Training moved the weights: the fine-tuned embeddings are not the imported model's.
  const json before = read_json(dir("st_lower.st.json"));
  EXPECT_GT(max_abs(got, matrix(before.at("embeddings"))), 1e-4);
}

// A sentence-transformers folder of `folder_name` fine-tuned by spread and exported: the export's architecture, and
// the library's encoding of the export against spread's of the run (and against the folder's: it trained).
void HfImport::expect_fine_tuned_export(const std::string& folder_name, const std::string& architecture,
                                        const std::string& layout) {
  SCOPED_TRACE(folder_name);
  const auto run = train_from(*work_, dir(folder_name), folder_name + "_finetune",
                              {"train.objective=contrastive", "data.source=pairs", "train.max_steps=2",
                               "train.lr=1e-3"});
  const fs::path out = *work_ / (folder_name + "_export");
  auto e = run_spread(fmt::format("export --run '{}' --out '{}'", run, out.string()));
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_EQ(read_json(out / "config.json").at("architectures")[0], architecture);
  EXPECT_EQ(read_json(out / "spread_export.json").at("layout"), layout);
  const fs::path ref = *work_ / (folder_name + "_finetune.st.json"), npy = *work_ / (folder_name + "_finetune.npy");
  const std::string cmd = fmt::format("'{}' '{}' st-encode '{}' '{}' '{}' > /dev/null 2>&1", python_, script(),
                                      out.string(), dir("texts.txt").string(), ref.string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto r = run_spread(fmt::format("encode --run '{}' --in '{}' --out '{}'", run, dir("texts.txt").string(),
                                  npy.string()));
  ASSERT_EQ(r.code, 0) << r.output;
  Eigen::MatrixXd mine = spread::read_npy_matrix(npy.string());
  auto got = torch::from_blob(mine.data(), {mine.cols(), mine.rows()}, torch::kDouble).t().clone();
  EXPECT_LE(max_abs(got, matrix(read_json(ref).at("embeddings"))), kTol);
  EXPECT_GT(max_abs(got, matrix(read_json(dir(folder_name + ".st.json")).at("embeddings"))), 1e-4);
}

// DistilBERT goes back as DistilBertModel; RoBERTa, which spread reads only, as the BertModel it computes (positions
// from 0), and the library agrees with both.
TEST_F(HfImport, FineTunedDistilBertAndRobertaExportBack) {
  expect_fine_tuned_export("st_distilbert", "DistilBertModel", "distilbert");
  expect_fine_tuned_export("st_roberta", "BertModel", "bert");
}

// The wrapper of the folder a run started from goes into its export: prompts, the default prompt's name,
// include_prompt, Normalize, as the folder's own files give them.
TEST_F(HfImport, ExportKeepsTheStartingFoldersPromptsAndNormalize) {
  const auto run = train_from(*work_, dir("st_prompts"), "st_prompts_finetune",
                              {"train.objective=contrastive", "data.source=pairs", "train.max_steps=1"});
  const fs::path out = *work_ / "st_prompts_export";
  auto e = run_spread(fmt::format("export --run '{}' --out '{}'", run, out.string()));
  ASSERT_EQ(e.code, 0) << e.output;
  const json folder = read_json(dir("st_prompts") / "config_sentence_transformers.json");
  const json exported = read_json(out / "config_sentence_transformers.json");
  ASSERT_FALSE(folder.at("prompts").empty());
  EXPECT_EQ(exported.at("prompts"), folder.at("prompts"));
  EXPECT_EQ(exported.at("default_prompt_name"), folder.at("default_prompt_name"));
  EXPECT_EQ(read_json(out / "1_Pooling" / "config.json").at("include_prompt"),
            read_json(dir("st_prompts") / "1_Pooling" / "config.json").at("include_prompt"));
  EXPECT_EQ(read_json(out / "modules.json").back().at("type"), "sentence_transformers.models.Normalize");
}

// train.init_from of a PyLate folder for objective maxsim: the run takes the folder's head, markers ("[Q] ", added
// tokens), lengths and skiplist_words, and with a learning rate of 0 its model scores a batch exactly as
// pylate.losses.Contrastive does (in-batch negatives, and with a hard negative each), with the same gradient.
TEST_F(HfImport, MaxsimFromPyLateFolderGivesPyLatesContrastiveLoss) {
  const auto run_dir = train_from(*work_, dir("pylate"), "maxsim_from_pylate",
                                  {"train.objective=maxsim", "data.source=pairs", "train.max_steps=1", "train.lr=0",
                                   "train.min_lr=0"});
  const auto recipe = spread::recipe_of_run(run_dir);
  EXPECT_EQ(recipe.tokenizer.kind, "hf");
  EXPECT_EQ(recipe.tokenizer.query_marker, "[Q] ");
  EXPECT_EQ(recipe.tokenizer.document_marker, "[D] ");
  EXPECT_EQ(recipe.model.head_dim, 16);
  EXPECT_EQ(recipe.loss.maxsim.query_length, 12);
  EXPECT_EQ(recipe.loss.maxsim.document_length, 20);
  EXPECT_TRUE(recipe.loss.maxsim.skiplist);
  EXPECT_EQ(recipe.loss.maxsim.skiplist_words.size(), 32u);  // PyLate's default: string.punctuation
  spread::LoadedRun run = spread::load_run(run_dir);
  const json ref = read_json(dir("pylate.loss.json"));
  const spread::MultiVectorSpec spec = spread::multi_vector_spec(run.recipe, *run.tokenizer, torch::kCPU);
  std::vector<std::vector<int32_t>> queries, positives, interleaved;
  for (size_t i = 0; i < kQueries.size(); ++i) {
    queries.push_back(spread::query_tokens(*run.tokenizer, kQueries[i], spec));
    positives.push_back(spread::document_tokens(*run.tokenizer, kPositives[i], spec));
    interleaved.push_back(positives.back());  // query i's positive at 2i, its negative at 2i + 1
    interleaved.push_back(spread::document_tokens(*run.tokenizer, kNegatives[i], spec));
  }
  const auto pointers = [](const std::vector<std::vector<int32_t>>& seqs) {
    std::vector<const std::vector<int32_t>*> out;
    for (const auto& s : seqs) out.push_back(&s);
    return out;
  };
  const auto special = run.tokenizer->special_ids();
  spread::MaxSimStepOptions opt = spread::maxsim_step_options(run.recipe);
  run.model->eval();  // PyLate's reference has no dropout either
  run.model->zero_grad();
  const auto loss_of = [&](const std::vector<std::vector<int32_t>>& docs, double grad_scale) {
    const spread::MaxSimBatch batch{spread::query_batch(pointers(queries), special, spec),
                                    spread::document_batch(pointers(docs), special, spec)};
    opt.grad_scale = grad_scale;
    return spread::maxsim_step(run.model, batch, opt).full.item<double>();
  };
  const double in_batch = loss_of(positives, 0), with_negatives = loss_of(interleaved, 1);
  std::cout << "PyLate Contrastive " << ref.at("in_batch") << " / " << ref.at("with_negatives") << ", spread "
            << in_batch << " / " << with_negatives << "\n";
  EXPECT_NEAR(in_batch, ref.at("in_batch").get<double>(), kTol);
  EXPECT_NEAR(with_negatives, ref.at("with_negatives").get<double>(), kTol);
  // The step's gradient is PyLate's loss.backward(): the head's entry by entry, the word embeddings' and the whole
  // model's norms (spread fuses q, k and v into one matrix; norms do not see how parameters are cut).
  double squares = 0;
  for (const auto& p : run.model->parameters())
    if (p.grad().defined()) squares += p.grad().pow(2).sum().item<double>();
  const double grad_norm = ref.at("grad_norm").get<double>();
  ASSERT_GT(grad_norm, 1e-3);
  EXPECT_NEAR(std::sqrt(squares), grad_norm, 1e-4 * grad_norm);
  EXPECT_NEAR(run.model->wte->weight.grad().norm().item<double>(), ref.at("embedding_grad_norm").get<double>(),
              1e-4 * grad_norm);
  EXPECT_LE(max_abs(run.model->head->weight.grad(), matrix(ref.at("head_grad"))), 1e-5 * grad_norm);
}

// A BERT folder is no ColBERT folder: maxsim from it makes one as pylate.models.ColBERT(folder) does. "[Q] " and
// "[D] " are added to its tokenizer (the next ids) and get embedding rows at the mean of the folder's; the head is
// fresh. With the run's head put into PyLate's model (the run trains at learning rate 0, so its encoder is the one
// it started from), both feed the same ids and give the same token vectors and scores, and PyLate loads the export
// with the same tokens, adding none.
TEST_F(HfImport, MaxsimFromBertFolderAddsPyLatesMarkers) {
  std::string skiplist;  // PyLate's default skiplist (string.punctuation), as a TOML array
  for (const auto& word : spread::ColbertModules{}.skiplist_words) skiplist += json(word).dump() + ",";
  const auto run_dir = train_from(*work_, dir("bert"), "maxsim_from_bert",
                                  {"train.objective=maxsim", "data.source=pairs", "train.max_steps=1", "train.lr=0",
                                   "train.min_lr=0", "loss.maxsim.query_length=16", "loss.maxsim.document_length=24",
                                   "model.head_dim=8", "loss.maxsim.skiplist=true",
                                   "loss.maxsim.skiplist_words=[" + skiplist + "]"});
  const fs::path out = *work_ / "maxsim_from_bert_export";
  auto e = run_spread(fmt::format("export --run '{}' --out '{}'", run_dir, out.string()));
  ASSERT_EQ(e.code, 0) << e.output;
  auto pylate = [&](const fs::path& model, const std::string& options, const std::string& name) {
    const fs::path ref = *work_ / name;
    const std::string cmd = fmt::format("'{}' '{}' pylate '{}' '{}' '{}' '{}' {} > /dev/null 2>&1", python_, script(),
                                        model.string(), dir("queries.txt").string(), dir("texts.txt").string(),
                                        ref.string(), options);
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return read_json(ref);
  };
  const json made = pylate(dir("bert"), fmt::format("--head-from '{}' --query-length 16 --document-length 24",
                                                    out.string()), "maxsim_from_bert.pylate.json");
  spread::LoadedRun run = spread::load_run(run_dir);
  EXPECT_EQ(run.recipe.tokenizer.query_marker, "[Q] ");
  EXPECT_EQ(run.recipe.tokenizer.document_marker, "[D] ");
  const auto special = run.tokenizer->special_ids();
  EXPECT_EQ(run.tokenizer->vocab_size(), made.at("vocab").get<int64_t>());
  EXPECT_EQ(run.model->config().vocab_size, made.at("vocab").get<int64_t>());
  EXPECT_EQ(special.query, made.at("prefix_ids")[0].get<int32_t>());
  EXPECT_EQ(special.document, made.at("prefix_ids")[1].get<int32_t>());
  // PyLate's rows are drawn around the mean with 1e-9 of the rows' covariance: within a few 1e-6 of it here.
  const torch::Tensor added = matrix(made.at("added_rows"));
  ASSERT_EQ(added.size(0), 2);
  const torch::Tensor wte = run.model->wte->weight.detach();
  EXPECT_LE(max_abs(wte.narrow(0, wte.size(0) - 2, 2), added), 5e-5);
  EXPECT_GT(wte.narrow(0, wte.size(0) - 2, 2).abs().max().item<double>(), 1e-3);  // not left at zero
  // The fresh head is drawn as PyLate's Dense draws it (torch.nn.Linear's default, U(-b, b) with b = 1/sqrt(width)),
  // not as spread's own models start (N(0, 0.02)): AdamW moves each weight by about lr a step, so the head's starting
  // scale sets how fast it turns.
  const torch::Tensor head = run.model->head->weight.detach();
  const double bound = 1.0 / std::sqrt(double(head.size(1)));
  EXPECT_LE(head.abs().max().item<double>(), bound);
  EXPECT_NEAR(head.std().item<double>(), bound / std::sqrt(3.0), 0.1 * bound / std::sqrt(3.0));
  EXPECT_NEAR(head.mean().item<double>(), 0.0, 0.2 * bound);
  expect_colbert_matches(run, made);
  const json exported = pylate(out, "", "maxsim_from_bert.export.json");
  EXPECT_EQ(exported.at("vocab"), made.at("vocab"));
  EXPECT_EQ(exported.at("prefix_ids"), made.at("prefix_ids"));
  EXPECT_EQ(exported.at("added_rows").size(), 0u);
  expect_colbert_matches(run, exported);
}

// Markers the recipe names that the vocabulary has (ColBERT's [unused0] and [unused1]) keep their ids: nothing is
// added, and queries are fed as "[CLS] [unused0] ..".
TEST_F(HfImport, MaxsimFromBertFolderTakesTheEntriesARecipeNamesAsMarkers) {
  const auto run_dir = train_from(*work_, dir("bert"), "maxsim_from_bert_unused",
                                  {"train.objective=maxsim", "data.source=pairs", "train.max_steps=2",
                                   "loss.maxsim.query_length=16", "loss.maxsim.document_length=32", "model.head_dim=8",
                                   "tokenizer.query_marker=[unused0]", "tokenizer.document_marker=[unused1]"});
  spread::LoadedRun run = spread::load_run(run_dir);
  EXPECT_EQ(run.model->config().head_dim, 8);
  EXPECT_EQ(run.model->config().vocab_size, 30522);  // bert-base-uncased's: no rows added
  const auto special = run.tokenizer->special_ids();
  EXPECT_EQ(special.query, 1);  // bert-base-uncased: [PAD] 0, [unused0] 1, [unused1] 2
  EXPECT_EQ(special.document, 2);
  const spread::MultiVectorSpec spec = spread::multi_vector_spec(run.recipe, *run.tokenizer, torch::kCPU);
  const auto ids = spread::query_tokens(*run.tokenizer, kQueries[0], spec);
  const auto fed = spread::query_batch({&ids}, special, spec).ids[0];
  EXPECT_EQ(fed[0].item<int64_t>(), special.cls);
  EXPECT_EQ(fed[1].item<int64_t>(), 1);
}

// Fine-tune an imported PyLate model, export it, load the export with PyLate: its token vectors and MaxSim scores
// equal the run's in spread, they moved from the imported model's, and the markers and skiplist went back as read.
TEST_F(HfImport, FineTunedPyLateModelExportsBackAndTheLibraryAgrees) {
  const auto run_dir = train_from(*work_, dir("pylate"), "maxsim_finetune",
                                  {"train.objective=maxsim", "data.source=pairs", "train.max_steps=3",
                                   "train.lr=1e-3"});
  const fs::path out = *work_ / "maxsim_finetune_export";
  auto e = run_spread(fmt::format("export --run '{}' --out '{}'", run_dir, out.string()));
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_EQ(read_json(out / "config.json").at("architectures")[0], "BertModel");
  const json config = read_json(out / "config_sentence_transformers.json");
  const json imported = read_json(dir("pylate") / "config_sentence_transformers.json");
  for (const char* key : {"query_prefix", "document_prefix", "skiplist_words", "query_length", "document_length"})
    EXPECT_EQ(config.at(key), imported.at(key)) << key;
  const fs::path ref = *work_ / "maxsim_finetune.pylate.json";
  const std::string cmd = fmt::format("'{}' '{}' pylate '{}' '{}' '{}' '{}' > /dev/null 2>&1", python_, script(),
                                      out.string(), dir("queries.txt").string(), dir("texts.txt").string(),
                                      ref.string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  spread::LoadedRun run = spread::load_run(run_dir);
  EXPECT_EQ(read_json(ref).at("vocab"), run.tokenizer->vocab_size());  // PyLate added no tokens to the export's
  const auto scores = expect_colbert_matches(run, read_json(ref));
  const json before = read_json(dir("pylate.json")).at("scores");
  double moved = 0;
  for (size_t i = 0; i < scores.size(); ++i)
    for (size_t j = 0; j < scores[i].size(); ++j) moved = std::max(moved, std::abs(scores[i][j] - before[i][j].get<double>()));
  EXPECT_GT(moved, 1e-4) << "training did not change the scores";
}

// The recipes for folders leave the shape and the tokenizer to the folder: each adopts a folder of its objective.
TEST_F(HfImport, TheRecipesForFoldersAdoptTheirFolders) {
  const fs::path recipes = fs::path(SPREAD_TEST_DATA_DIR) / "../../recipes";
  for (const auto& [file, folder] : std::vector<std::pair<std::string, std::string>>{
           {"finetune_st_wordnet.toml", "st_mean_norm"},
           {"finetune_colbert_scifact.toml", "pylate"},
           {"continue_gpt2_dispersion.toml", "gpt2"}}) {
    SCOPED_TRACE(file);
    const auto recipe = spread::load_recipe((recipes / file).string(),
                                            {"train.init_from=" + dir(folder).string(),
                                             "data.root=" + spread::testing::shared_data_dir()});
    const auto adopted = spread::adopt_model_folder(recipe);
    EXPECT_EQ(adopted.tokenizer.kind, "hf");
    EXPECT_EQ(adopted.model.n_embd, 32 + 16 * (folder == "gpt2"));
  }
}

// --- bad folders: one line, exit 2, naming the file and the fix (no Python needed) -----------------------------

namespace {

fs::path bad_folder(const std::string& name, const std::string& config) {
  const fs::path d = fresh_temp_dir("hf_bad_" + name);
  if (!config.empty()) std::ofstream(d / "config.json") << config;
  return d;
}

std::string load_error(const fs::path& d) {
  try {
    spread::load_run(d.string());
  } catch (const spread::UserError& e) {
    return e.what();
  }
  return "(no error)";
}

const char* const kBertConfig =
    R"({"architectures": ["BertModel"], "vocab_size": 8, "num_hidden_layers": 1, "num_attention_heads": 1,
        "hidden_size": 4, "intermediate_size": 8, "max_position_embeddings": 8})";

}  // namespace

// A tied MLM decoder that a folder saves anyway must be the embedding it is tied to: an exact copy loads, a changed
// one is refused naming the tensor and the fix (BertForMaskedLM; ModernBertForMaskedLM, whose config ties them).
TEST_F(HfImport, ASavedTiedDecoderMustBeTheEmbedding) {
  struct Case {
    std::string folder, embedding, decoder, fix;
  };
  for (const Case& c : {Case{"bert_mlm", "bert.embeddings.word_embeddings.weight", "cls.predictions.decoder.weight",
                             "only tied models load"},
                        Case{"modernbert_mlm", "model.embeddings.tok_embeddings.weight", "decoder.weight",
                             "tie_word_embeddings = false"}}) {
    SCOPED_TRACE(c.folder);
    const fs::path copy = *work_ / (c.folder + "_saved_decoder");
    fs::remove_all(copy);
    fs::copy(dir(c.folder), copy, fs::copy_options::recursive);
    const std::string weights = (copy / "model.safetensors").string();
    auto tensors = spread::read_safetensors(weights);
    ASSERT_EQ(tensors.count(c.decoder), 0u) << "the library saved the tied decoder itself";
    tensors[c.decoder] = tensors.at(c.embedding).clone();
    spread::write_safetensors(weights, tensors);
    EXPECT_EQ(load_error(copy), "(no error)");
    tensors[c.decoder] = tensors.at(c.embedding) * 1.001;
    spread::write_safetensors(weights, tensors);
    const std::string e = load_error(copy);
    EXPECT_NE(e.find(c.decoder), std::string::npos) << e;
    EXPECT_NE(e.find(c.fix), std::string::npos) << e;
  }
}

// The record a run keeps of its starting folder's wrapper: written and read back whole; a damaged one is a
// UserError naming the file and key, and a run without one has none.
TEST(SentenceModulesRecord, RoundTripsAndNamesADamagedKey) {
  const fs::path dir = fs::temp_directory_path() / ("spread_st_record_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  EXPECT_FALSE(spread::recorded_sentence_modules(dir.string()).has_value());
  spread::SentenceTransformersModules m;
  m.normalize = true;
  m.include_prompt = false;
  m.prompts = {{"query", "query: "}, {"passage", "passage: "}};
  m.default_prompt_name = "query";
  spread::record_sentence_modules(dir.string(), m);
  const auto back = spread::recorded_sentence_modules(dir.string());
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(back->normalize);
  EXPECT_FALSE(back->include_prompt);
  EXPECT_EQ(back->prompts, m.prompts);
  EXPECT_EQ(back->default_prompt_name, "query");
  std::ofstream(dir / spread::kSentenceModulesRecord)
      << R"({"normalize": "yes", "include_prompt": true, "prompts": {}, "default_prompt_name": ""})";
  try {
    spread::recorded_sentence_modules(dir.string());
    ADD_FAILURE() << "a damaged record was read";
  } catch (const spread::UserError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(spread::kSentenceModulesRecord), std::string::npos) << what;
    EXPECT_NE(what.find("normalize"), std::string::npos) << what;
  }
  fs::remove_all(dir);
}

TEST(HfImportBadFolder, EachProblemIsNamedWithItsFix) {
  auto lfs = bad_folder("lfs", kBertConfig);
  std::ofstream(lfs / "model.safetensors") << "version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 9\n";
  EXPECT_NE(load_error(lfs).find("Git LFS pointer"), std::string::npos) << load_error(lfs);

  auto pickle = bad_folder("pickle", kBertConfig);
  std::ofstream(pickle / "pytorch_model.bin") << "PK";
  EXPECT_NE(load_error(pickle).find("safe_serialization=True"), std::string::npos) << load_error(pickle);

  auto none = bad_folder("none", kBertConfig);
  EXPECT_NE(load_error(none).find("model.safetensors: is missing"), std::string::npos) << load_error(none);

  auto arch = bad_folder("arch", R"({"architectures": ["T5ForConditionalGeneration"]})");
  const std::string a = load_error(arch);
  EXPECT_NE(a.find("T5ForConditionalGeneration"), std::string::npos) << a;
  EXPECT_NE(a.find("BertModel, BertForMaskedLM"), std::string::npos) << a;

  auto relative = bad_folder("relative", R"({"architectures": ["BertModel"], "position_embedding_type": "relative_key"})");
  EXPECT_NE(load_error(relative).find("position_embedding_type"), std::string::npos) << load_error(relative);

  // A key of another JSON type is named (nlohmann's value() would abort the process instead).
  auto typed = bad_folder("typed", R"({"architectures": ["BertModel"], "is_decoder": "no"})");
  EXPECT_NE(load_error(typed).find("is_decoder"), std::string::npos) << load_error(typed);

  auto missing_tensor = bad_folder("tensor", kBertConfig);
  spread::write_safetensors((missing_tensor / "model.safetensors").string(),
                            {{"embeddings.word_embeddings.weight", torch::zeros({8, 4})}});
  EXPECT_NE(load_error(missing_tensor).find("embeddings.position_embeddings.weight"), std::string::npos)
      << load_error(missing_tensor);
}

TEST(HfImportBadFolder, TheCommandLineExitsTwoWithOneLine) {
  auto arch = bad_folder("cli", R"({"architectures": ["T5ForConditionalGeneration"]})");
  auto r = run_spread(fmt::format("diagnose --model '{}' --texts x.txt", arch.string()));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  auto not_folder = run_spread("encode --model /nonexistent --in a.txt --out b.npy");
  EXPECT_EQ(not_folder.code, 2) << not_folder.output;
  EXPECT_NE(not_folder.output.find("not a model folder"), std::string::npos) << not_folder.output;
}
