// The spread binary as a user meets it: help on every subcommand, exit code 2 with a clear message for bad
// input, and a tiny train -> eval -> generate -> compare round.
#include <gtest/gtest.h>
#include "test_paths.h"
#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "spread/data/npy.h"
#include "spread/run/checkpoint.h"

namespace fs = std::filesystem;

namespace {

struct Result {
  int code;
  std::string output;
};

Result run(const std::string& args) {
  std::string cmd = std::string(SPREAD_BINARY) + " " + args + " 2>&1";
  Result r{-1, ""};
  FILE* pipe = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

fs::path temp_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("spread_cli_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST(Cli, EverySubcommandHasHelp) {
  for (const char* cmd : {"train", "eval", "encode", "generate", "compare", "diagnose", "report"}) {
    Result r = run(std::string(cmd) + " --help");
    EXPECT_EQ(r.code, 0) << cmd << ": " << r.output;
    EXPECT_NE(r.output.find("Usage"), std::string::npos) << cmd << ": " << r.output;
  }
  EXPECT_EQ(run("--help").code, 0);
  EXPECT_EQ(run("frobnicate").code, 2);
}

TEST(Cli, BadRecipeExitsWithCode2AndWritesNothing) {
  auto dir = temp_dir("bad");
  std::ofstream(dir / "r.toml") << "[run]\nout_dir = \"" << (dir / "out").string() << "\"\n[train]\nlr = \"fast\"\n";
  Result r = run("train " + (dir / "r.toml").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("r.toml:4"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("train.lr"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "out"));
  std::ofstream(dir / "ok.toml") << "[run]\nout_dir = \"" << (dir / "out").string() << "\"\n";
  Result o = run("train " + (dir / "ok.toml").string() + " --set train.lr=0.1 --set model.n_head=0");
  EXPECT_EQ(o.code, 2) << o.output;
  EXPECT_NE(o.output.find("model.n_head"), std::string::npos) << o.output;
  EXPECT_EQ(run("train /nonexistent/recipe.toml").code, 2);
  EXPECT_EQ(run("eval --run " + (dir / "nothing").string()).code, 2);
  fs::remove_all(dir);
}

TEST(Cli, TrainEvalGenerateCompare) {
  auto dir = temp_dir("e2e");
  {
    std::ofstream corpus(dir / "c.txt");
    for (int i = 0; i < 400; ++i) corpus << "to be or not to be, that is the question " << i % 7 << "\n";
  }
  std::string recipe = (dir / "r.toml").string();
  std::ofstream(recipe) << "[run]\nname = \"tiny\"\nout_dir = \"" << dir.string() << "\"\n"
                        << "[data]\nsource = \"text\"\npath = \"" << (dir / "c.txt").string() << "\"\n"
                        << "[tokenizer]\nkind = \"char\"\n[model]\nn_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 16\n"
                        << "[train]\nbatch_size = 4\nmax_steps = 30\nwarmup_steps = 2\neval_every = 10\nlog_every = 10\n"
                        << "ckpt_every = 10\n[diagnostics]\nevery = 15\n";
  Result t = run("train " + recipe);
  ASSERT_EQ(t.code, 0) << t.output;
  EXPECT_NE(t.output.find("tok/s"), std::string::npos) << t.output;
  EXPECT_NE(t.output.find("BLAS:"), std::string::npos) << t.output;
  std::string run_dir = (dir / "tiny").string();
  EXPECT_TRUE(fs::exists(run_dir + "/recipe.toml"));
  EXPECT_TRUE(fs::exists(run_dir + "/run.json"));
  Result e = run("eval --run " + run_dir + " --json");
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find("\"val_ppl\""), std::string::npos) << e.output;
  Result g1 = run("generate --run " + run_dir + " --prompt 'to be' --max-new-tokens 20 --seed 5");
  Result g2 = run("generate --run " + run_dir + " --prompt 'to be' --max-new-tokens 20 --seed 5");
  ASSERT_EQ(g1.code, 0) << g1.output;
  EXPECT_EQ(g1.output, g2.output);
  EXPECT_EQ(g1.output.rfind("to be", 0), 0u) << g1.output;
  Result bad_prompt = run("generate --run " + run_dir + " --prompt \"to $(printf '\\377')\" --max-new-tokens 2");
  EXPECT_EQ(bad_prompt.code, 2) << bad_prompt.output;
  EXPECT_NE(bad_prompt.output.find("--prompt: invalid UTF-8 at byte offset 3"), std::string::npos)
      << bad_prompt.output;
  Result c = run("compare " + run_dir + " " + run_dir);
  ASSERT_EQ(c.code, 0) << c.output;
  EXPECT_NE(c.output.find("mean_cos"), std::string::npos) << c.output;
  Result again = run("train " + recipe);
  EXPECT_EQ(again.code, 2) << again.output;
  EXPECT_NE(again.output.find("--resume"), std::string::npos) << again.output;
  fs::remove_all(dir);
}

// The shipped Llama-style recipe, shrunk: its block keys reach the model (no position table, 4 query heads over 2
// k/v heads, a gated MLP, bias-free RMSNorms), the run resumes, generates and exports as LlamaForCausalLM.
TEST(Cli, LlamaTinyRecipeTrainsResumesAndGenerates) {
  auto dir = temp_dir("llama");
  {
    std::ofstream corpus(dir / "c.txt");
    for (int i = 0; i < 300; ++i) corpus << "all that glitters is not gold " << i % 5 << "\n";
  }
  const std::string recipe = std::string(SPREAD_TEST_DATA_DIR) + "/../../recipes/llama_tiny.toml";
  const std::string sets = " --set run.out_dir=" + dir.string() + " --set data.source=text --set data.path=" +
                           (dir / "c.txt").string() + " --set tokenizer.kind=char --set model.n_layer=1 "
                           "--set model.n_embd=16 --set model.block_size=16 --set model.intermediate_size=24 "
                           "--set train.batch_size=4 --set train.warmup_steps=2 --set train.eval_every=5 "
                           "--set train.log_every=5 --set train.ckpt_every=5 --set diagnostics.every=5";
  Result t = run("train " + recipe + sets + " --set train.max_steps=5");
  ASSERT_EQ(t.code, 0) << t.output;
  const std::string run_dir = (dir / "llama_tiny").string();
  Result resumed = run("train --resume " + (dir / "llama_tiny").string() + " --set train.max_steps=10");
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  const auto ckpt = spread::read_checkpoint(run_dir + "/ckpt/step_00000010.ckpt");
  auto shape = [&](const std::string& key) {
    const auto it = ckpt.tensors.find("model." + key);
    return it == ckpt.tensors.end() ? std::vector<int64_t>{} : it->second.sizes().vec();
  };
  EXPECT_TRUE(shape("wpe.weight").empty());  // rotary positions: no table
  EXPECT_EQ(shape("blocks.0.attn.qkv.weight"), (std::vector<int64_t>{(4 + 2 * 2) * 4, 16}));
  EXPECT_EQ(shape("blocks.0.mlp.fc.weight"), (std::vector<int64_t>{2 * 24, 16}));  // [gate; up]
  EXPECT_EQ(shape("blocks.0.ln1.weight"), (std::vector<int64_t>{16}));
  EXPECT_TRUE(shape("blocks.0.ln1.bias").empty());
  EXPECT_TRUE(shape("blocks.0.attn.qkv.bias").empty());
  EXPECT_TRUE(shape("lm_head.weight").empty());  // tied
  Result g = run("generate --run " + run_dir + " --prompt 'all' --max-new-tokens 10 --seed 2");
  ASSERT_EQ(g.code, 0) << g.output;
  EXPECT_EQ(g.output.rfind("all", 0), 0u) << g.output;
  Result x = run("export --run " + run_dir + " --out " + (dir / "hf").string());
  ASSERT_EQ(x.code, 0) << x.output;
  std::ifstream config_file(dir / "hf" / "config.json");
  const auto config = nlohmann::json::parse(config_file);
  EXPECT_EQ(config["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(config["num_key_value_heads"], 2);
  EXPECT_EQ(config["tie_word_embeddings"], true);
  fs::remove_all(dir);
}

// The shipped ModernBERT-shaped recipe, shrunk: its block keys reach the model (no position table, no norm before
// block 0's attention, an embedding norm without bias, a gated MLP, no biases), it trains, it exports as
// ModernBertModel with its window, global layers and rotary bases, and it is the backbone of the ModernBERT-shaped
// maxsim recipe.
TEST(Cli, ModernBertMlmRecipeTrainsExportsAndBacksTheMaxsimRecipe) {
  auto dir = temp_dir("modernbert");
  {
    std::ofstream corpus(dir / "c.txt");
    for (int i = 0; i < 300; ++i) corpus << "all that glitters is not gold " << i % 5 << "\n";
  }
  const std::string recipe = std::string(SPREAD_TEST_DATA_DIR) + "/../../recipes/modernbert_mlm.toml";
  const std::string sets = " --set run.out_dir=" + dir.string() + " --set data.source=text --set data.path=" +
                           (dir / "c.txt").string() + " --set tokenizer.kind=char --set model.n_embd=16 "
                           "--set model.block_size=16 --set data.max_length=16 --set model.intermediate_size=24 "
                           "--set model.attention_window=6 --set train.batch_size=4 --set train.warmup_steps=2 "
                           "--set train.eval_every=5 --set train.log_every=5 --set train.ckpt_every=5 "
                           "--set diagnostics.every=5 --set eval.sts= --set train.max_steps=5";
  Result t = run("train " + recipe + sets);
  ASSERT_EQ(t.code, 0) << t.output;
  const std::string run_dir = (dir / "modernbert_mlm").string();
  const auto ckpt = spread::read_checkpoint(run_dir + "/ckpt/step_00000005.ckpt");
  auto shape = [&](const std::string& key) {
    const auto it = ckpt.tensors.find("model." + key);
    return it == ckpt.tensors.end() ? std::vector<int64_t>{} : it->second.sizes().vec();
  };
  EXPECT_TRUE(shape("wpe.weight").empty());
  EXPECT_TRUE(shape("blocks.0.ln1.weight").empty());
  EXPECT_EQ(shape("blocks.1.ln1.weight"), (std::vector<int64_t>{16}));
  EXPECT_EQ(shape("emb_norm.weight"), (std::vector<int64_t>{16}));
  EXPECT_TRUE(shape("emb_norm.bias").empty());
  EXPECT_EQ(shape("blocks.0.mlp.fc.weight"), (std::vector<int64_t>{2 * 24, 16}));
  EXPECT_TRUE(shape("blocks.0.attn.qkv.bias").empty());
  Result x = run("export --run " + run_dir + " --out " + (dir / "hf").string());
  ASSERT_EQ(x.code, 0) << x.output;
  std::ifstream config_file(dir / "hf" / "config.json");
  const auto config = nlohmann::json::parse(config_file);
  EXPECT_EQ(config["architectures"][0], "ModernBertModel");
  EXPECT_EQ(config["local_attention"], 6);
  EXPECT_EQ(config["global_attn_every_n_layers"], 3);
  EXPECT_DOUBLE_EQ(config["global_rope_theta"].get<double>(), 160000.0);
  EXPECT_DOUBLE_EQ(config["local_rope_theta"].get<double>(), 10000.0);
  // The run is the backbone of recipes/maxsim_modernbert_scifact.toml (longer documents than the backbone's 16
  // positions, the pooling-aware loss on): with a learning rate of 0 its blocks are the backbone's, and a head is
  // added.
  const std::string maxsim = std::string(SPREAD_TEST_DATA_DIR) + "/../../recipes/maxsim_modernbert_scifact.toml";
  Result m = run("train " + maxsim + " --set run.out_dir=" + dir.string() + " --set data.path=" + SPREAD_TEST_DATA_DIR +
                 "/beir_tiny --set train.init_from=" + run_dir + " --set model.n_embd=16 --set model.block_size=48 "
                 "--set model.intermediate_size=24 --set model.attention_window=6 --set model.head_dim=8 "
                 "--set loss.maxsim.query_length=16 --set loss.maxsim.document_length=48 --set train.batch_size=4 "
                 "--set train.max_steps=2 --set train.warmup_steps=1 --set train.lr=0 --set train.min_lr=0 "
                 "--set train.ckpt_every=2 --set loss.pooling_aware.enabled=true "
                 "--set loss.pooling_aware.pool_factor=2");
  ASSERT_EQ(m.code, 0) << m.output;
  EXPECT_NE(m.output.find("init_from: model weights of " + run_dir), std::string::npos) << m.output;
  const auto tuned = spread::read_checkpoint((dir / "maxsim_modernbert_scifact/ckpt/step_00000002.ckpt").string());
  for (const std::string key : {"blocks.1.attn.qkv.weight", "blocks.3.mlp.fc.weight", "emb_norm.weight", "wte.weight"})
    EXPECT_TRUE(torch::equal(tuned.tensors.at("model." + key), ckpt.tensors.at("model." + key))) << key;
  EXPECT_EQ(tuned.tensors.at("model.head.weight").sizes().vec(), (std::vector<int64_t>{8, 16}));
  fs::remove_all(dir);
}

// An embedding model as a user meets it: a contrastive run on a pairs file with a bad row, then encode and eval.

namespace {

// `spread eval --per-query`, judged by brute force: the tiny BEIR folder's corpus and queries encoded by `spread
// encode`, ranked by cosine, and each judged query's nDCG@10 computed from its relevant documents' ranks.
void expect_per_query_ndcg_from_embeddings(const std::string& run_dir, const fs::path& dir) {
  const std::string beir = std::string(SPREAD_TEST_DATA_DIR) + "/beir_tiny";
  const std::vector<std::string> doc_ids = {"d1", "d2", "d3", "d4", "d5", "d6"};
  std::ofstream(dir / "docs.txt") << "Cats a cat sleeps at home\nthe dog runs in the park\nBirds a bird sings on the "
                                     "hill\nthe fish swims in the sea\nHorses a horse eats by the river\nthe child "
                                     "reads at school\n";
  std::ofstream(dir / "queries.txt") << "where does the cat sleep\ndog in a park\nwhat swims in the sea\n";
  for (const char* name : {"docs", "queries"})
    ASSERT_EQ(run(std::string("encode --run ") + run_dir + " --in " + (dir / (std::string(name) + ".txt")).string() +
                  " --out " + (dir / (std::string(name) + ".npy")).string()).code, 0);
  const Eigen::MatrixXd docs = spread::read_npy_matrix((dir / "docs.npy").string());
  const Eigen::MatrixXd queries = spread::read_npy_matrix((dir / "queries.npy").string());
  const std::vector<std::set<std::string>> relevant = {{"d1"}, {"d2", "d6"}, {"d4"}};  // q1..q3; q4 has none
  Result v = run("eval --run " + run_dir + " --beir " + beir + " --per-query --json");
  ASSERT_EQ(v.code, 0) << v.output;
  const auto per_query = nlohmann::json::parse(v.output.substr(v.output.find('{')))["beir"]["per_query"];
  ASSERT_EQ(per_query.size(), 3u) << per_query.dump();
  for (int q = 0; q < 3; ++q) {
    const Eigen::VectorXd scores = docs * queries.row(q).transpose();  // rows are unit vectors: cosines
    double dcg = 0, idcg = 0;
    for (int d = 0; d < 6; ++d) {
      if (!relevant[size_t(q)].count(doc_ids[size_t(d)])) continue;
      int rank = 1;
      for (int o = 0; o < 6; ++o) rank += scores(o) > scores(d) || (scores(o) == scores(d) && o < d);
      dcg += 1 / std::log2(rank + 1.0);
    }
    for (size_t r = 1; r <= relevant[size_t(q)].size(); ++r) idcg += 1 / std::log2(r + 1.0);
    const std::string id = "q" + std::to_string(q + 1);
    ASSERT_TRUE(per_query.contains(id)) << per_query.dump();
    EXPECT_NEAR(per_query[id]["ndcg@10"].get<double>(), dcg / idcg, 1e-6) << id;
  }
  const Result lm_like = run("eval --run " + run_dir + " --sts " + std::string(SPREAD_TEST_DATA_DIR) +
                             "/sts_tiny.csv --per-query");
  EXPECT_EQ(lm_like.code, 2);  // --per-query without queries
  EXPECT_NE(lm_like.output.find("--per-query"), std::string::npos) << lm_like.output;
}

}  // namespace

TEST(Cli, ContrastiveTrainEncodeEval) {
  auto dir = temp_dir("embed");
  {
    std::ofstream pairs(dir / "p.tsv");
    pairs << "anchor\tpositive\n";
    const char* things[] = {"cat", "dog", "bird", "fish", "horse", "child", "man", "woman"};
    for (int i = 0; i < 80; ++i) pairs << "a " << things[i % 8] << " " << i << "\tthe " << things[i % 8] << " number " << i << "\n";
    pairs << "only one column\n";
  }
  std::string recipe = (dir / "r.toml").string();
  std::ofstream(recipe) << "[run]\nname = \"emb\"\nout_dir = \"" << dir.string() << "\"\n"
                        << "[data]\nsource = \"pairs\"\npath = \"" << (dir / "p.tsv").string() << "\"\n"
                        << "[tokenizer]\nkind = \"char\"\n[model]\nn_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 32\n"
                        << "causal = false\n[train]\nobjective = \"contrastive\"\nbatch_size = 8\nmax_steps = 6\n"
                        << "warmup_steps = 1\neval_every = 3\nlog_every = 3\nckpt_every = 3\n[eval]\nsts = \""
                        << SPREAD_TEST_DATA_DIR << "/sts_tiny.csv\"\n";
  Result t = run("train " + recipe);
  ASSERT_EQ(t.code, 0) << t.output;
  EXPECT_NE(t.output.find("pairs/s"), std::string::npos) << t.output;
  EXPECT_NE(t.output.find("p.tsv:82"), std::string::npos) << t.output;  // the bad row, reported and skipped
  EXPECT_NE(t.output.find("STS Spearman"), std::string::npos) << t.output;
  const std::string run_dir = (dir / "emb").string();
  std::ofstream(dir / "texts.txt") << "a cat 1\nthe dog number 2\n\nlast line\n";
  Result e = run("encode --run " + run_dir + " --in " + (dir / "texts.txt").string() + " --out " +
                 (dir / "e.npy").string());
  ASSERT_EQ(e.code, 0) << e.output;
  Eigen::MatrixXd m = spread::read_npy_matrix((dir / "e.npy").string());
  ASSERT_EQ(m.rows(), 4);  // one row per line, the empty one included
  ASSERT_EQ(m.cols(), 16);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(m.row(i).norm(), 1.0, 1e-5);
  Result v = run("eval --run " + run_dir + " --beir " + std::string(SPREAD_TEST_DATA_DIR) + "/beir_tiny --out " +
                 (dir / "eval.json").string());
  ASSERT_EQ(v.code, 0) << v.output;
  EXPECT_NE(v.output.find("ndcg@10"), std::string::npos) << v.output;
  EXPECT_NE(v.output.find("STS Spearman"), std::string::npos) << v.output;  // the run's [eval] sts by default
  EXPECT_TRUE(fs::exists(dir / "eval.json"));
  expect_per_query_ndcg_from_embeddings(run_dir, dir);
  Result bad_pooling = run("eval --run " + run_dir + " --pooling median");
  EXPECT_EQ(bad_pooling.code, 2);
  EXPECT_NE(bad_pooling.output.find("mean, cls, last, max, weightedmean"), std::string::npos) << bad_pooling.output;
  EXPECT_EQ(run("encode --run " + run_dir + " --in /nonexistent.txt --out x.npy").code, 2);
  fs::remove_all(dir);
}
