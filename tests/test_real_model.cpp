// The real all-MiniLM-L6-v2 (scripts/get_model.sh) end to end, judged by the libraries its users know:
// `spread eval --model` against sentence-transformers' encode + MTEB's metrics (tests/oracles/mteb_ref.py), and
// `spread mine` against sentence-transformers' mine_hard_negatives (tests/oracles/mine_ref.py), and the ColBERT
// recipe's model against the one pylate.models.ColBERT makes of it (tests/oracles/hf_model_ref.py).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "cli_run.h"
#include "pylate_reference.h"
#include "python_env.h"
#include "real_model.h"
#include "shared_data.h"
#include "spread/interchange/loaded_run.h"

namespace {
namespace fs = std::filesystem;
using spread::testing::run_spread;

constexpr double kScoreTolerance = 1e-4;  // the acceptance bar: |spread - reference| on the leaderboard's metrics

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const fs::path& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

// Runs an oracle of tests/oracles/ with the reference python; its output is the test's failure message on error.
void run_reference(const std::string& python, const std::string& oracle, const std::string& args) {
  const std::string cmd = "'" + python + "' " + spread::testing::oracle_script(oracle) + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string output;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) output.append(buf, n);
  ASSERT_EQ(pclose(pipe), 0) << cmd << "\n" << output;
}

std::string reference_or_skip(const std::vector<std::string>& modules, std::string* python) {
  std::string why;
  *python = spread::testing::reference_python(modules, &why);
  return why;
}

nlohmann::json spread_eval_json(const std::string& args) {
  const auto r = run_spread("eval " + args + " --json");
  EXPECT_EQ(r.code, 0) << r.output;
  // Progress lines go to stderr (merged here); the JSON object is the last line.
  const std::string last = r.output.substr(r.output.rfind("\n{") + 1);
  return nlohmann::json::parse(last);
}

TEST(RealModel, StsSpearmanEqualsMtebOnStsbDev) {
  REAL_MODEL_OR_SKIP(model);
  SHARED_DATA_OR_SKIP(sts, "stsb/stsb-en-dev.csv");
  std::string python;
  if (auto why = reference_or_skip({"sentence_transformers", "scipy"}, &python); !why.empty()) GTEST_SKIP() << why;
  const auto dir = spread::testing::fresh_temp_dir("real_sts");
  run_reference(python, "mteb_ref.py",
                "--model '" + model + "' --sts '" + sts + "' --out " + (dir / "ref.json").string());
  const auto ref = nlohmann::json::parse(slurp(dir / "ref.json"));
  const auto got = spread_eval_json("--model '" + model + "' --sts '" + sts + "'");
  EXPECT_EQ(got["sts"]["pairs"], ref["sts_pairs"]);
  EXPECT_NEAR(got["sts"]["spearman"].get<double>(), ref["sts_spearman"].get<double>(), kScoreTolerance);
  // The published score of this model on STS-B dev is about 0.87: a number far from it means a wrong pipeline on
  // both sides (a wrong pooling, no normalisation), which the equality above could not see.
  EXPECT_GT(got["sts"]["spearman"].get<double>(), 0.8);
}

TEST(RealModelLong, RetrievalEqualsMtebOnScifactTrain) {
  REAL_MODEL_OR_SKIP(model);
  SHARED_DATA_OR_SKIP(beir, "scifact-train");
  std::string python;
  if (auto why = reference_or_skip({"sentence_transformers", "pytrec_eval"}, &python); !why.empty())
    GTEST_SKIP() << why;
  const auto dir = spread::testing::fresh_temp_dir("real_beir");
  run_reference(python, "mteb_ref.py",
                "--model '" + model + "' --beir '" + beir + "' --out " + (dir / "ref.json").string());
  const auto ref = nlohmann::json::parse(slurp(dir / "ref.json"));
  const auto got = spread_eval_json("--model '" + model + "' --beir '" + beir + "'")["beir"];
  EXPECT_EQ(got["queries"], ref["queries"]);
  EXPECT_EQ(got["documents"], ref["documents"]);
  EXPECT_NEAR(got["ndcg@10"].get<double>(), ref["ndcg@10"].get<double>(), kScoreTolerance);
  EXPECT_NEAR(got["recall@100"].get<double>(), ref["recall@100"].get<double>(), kScoreTolerance);
  EXPECT_GT(got["ndcg@10"].get<double>(), 0.5);  // MTEB's SciFact test score of this model is 0.645
}

// A small BEIR folder cut from SciFact train: its first `queries` queries with their qrels, and a corpus of the
// first `documents` documents plus every document those queries cite.
fs::path small_scifact(const std::string& beir, size_t queries, size_t documents, const fs::path& dir) {
  fs::create_directories(dir / "qrels");
  std::set<std::string> kept_queries, cited;
  std::ofstream query_out(dir / "queries.jsonl");
  for (const auto& line : lines_of(fs::path(beir) / "queries.jsonl")) {
    if (kept_queries.size() == queries) break;
    kept_queries.insert(nlohmann::json::parse(line)["_id"].get<std::string>());
    query_out << line << "\n";
  }
  std::ofstream qrels_out(dir / "qrels" / "train.tsv");
  qrels_out << "query-id\tcorpus-id\tscore\n";
  const auto qrels = lines_of(fs::path(beir) / "qrels" / "train.tsv");
  for (size_t i = 1; i < qrels.size(); ++i) {
    std::istringstream row(qrels[i]);
    std::string query, doc;
    row >> query >> doc;
    if (!kept_queries.count(query)) continue;
    cited.insert(doc);
    qrels_out << qrels[i] << "\n";
  }
  std::ofstream corpus_out(dir / "corpus.jsonl");
  size_t n = 0;
  for (const auto& line : lines_of(fs::path(beir) / "corpus.jsonl"))
    if (n++ < documents || cited.count(nlohmann::json::parse(line)["_id"].get<std::string>()))
      corpus_out << line << "\n";
  return dir;
}

TEST(RealModel, MinedNegativesEqualSentenceTransformers) {
  REAL_MODEL_OR_SKIP(model);
  SHARED_DATA_OR_SKIP(scifact, "scifact-train");
  std::string python;
  if (auto why = reference_or_skip({"sentence_transformers", "datasets"}, &python); !why.empty()) GTEST_SKIP() << why;
  const auto dir = spread::testing::fresh_temp_dir("real_mine");
  const fs::path beir = small_scifact(scifact, 40, 160, dir / "beir");
  // The library's defaults; margins with a range skipped; a relative margin under a score ceiling.
  const std::vector<std::string> settings = {
      "--num-negatives 3",
      "--num-negatives 2 --range-min 2 --absolute-margin 0.05",
      "--num-negatives 4 --relative-margin 0.05 --max-score 0.8 --min-score 0.1 --range-max 60",
  };
  for (size_t i = 0; i < settings.size(); ++i) {
    SCOPED_TRACE(settings[i]);
    const auto ref = dir / ("ref" + std::to_string(i) + ".jsonl");
    const auto got = dir / ("got" + std::to_string(i) + ".jsonl");
    run_reference(python, "mine_ref.py",
                  "--model '" + model + "' --beir " + beir.string() + " --out " + ref.string() + " " + settings[i]);
    const auto r = run_spread("mine --model '" + model + "' --beir " + beir.string() + " --out " + got.string() +
                              " " + settings[i]);
    ASSERT_EQ(r.code, 0) << r.output;
    const auto want = lines_of(ref), have = lines_of(got);
    ASSERT_GT(want.size(), 20u);
    ASSERT_EQ(have.size(), want.size()) << r.output;
    for (size_t row = 0; row < want.size(); ++row)
      EXPECT_EQ(nlohmann::json::parse(have[row]), nlohmann::json::parse(want[row])) << "row " << row;
  }
}

TEST(RealModel, MiningRefusesANumberOfNegativesTheCorpusCannotHold) {
  REAL_MODEL_OR_SKIP(model);
  SHARED_DATA_OR_SKIP(scifact, "scifact-train");
  const auto dir = spread::testing::fresh_temp_dir("real_mine_k");
  const fs::path beir = small_scifact(scifact, 5, 10, dir / "beir");
  const auto r = run_spread("mine --model '" + model + "' --beir " + beir.string() + " --num-negatives 50 --out " +
                            (dir / "out.jsonl").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("the largest that fits is"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "out.jsonl"));
}

TEST(RealModel, MiningNamesTheFirstQrelsIdMissingFromTheCorpus) {
  REAL_MODEL_OR_SKIP(model);
  SHARED_DATA_OR_SKIP(scifact, "scifact-train");
  const auto dir = spread::testing::fresh_temp_dir("real_mine_id");
  const fs::path beir = small_scifact(scifact, 5, 10, dir / "beir");
  std::ofstream(beir / "qrels" / "train.tsv", std::ios::app) << "0\tno-such-document\t1\n";
  const auto r = run_spread("mine --model '" + model + "' --beir " + beir.string() + " --out " +
                            (dir / "out.jsonl").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("'no-such-document' is not in corpus.jsonl"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("train.tsv"), std::string::npos) << r.output;
}

}  // namespace

// recipes/colbert_minilm_scifact.toml makes all-MiniLM-L6-v2 a ColBERT as pylate.models.ColBERT(folder) makes one:
// "[Q] " and "[D] " added to the tokenizer with rows at the mean of the others, 32-token queries with [MASK]
// expansion, documents cut at 180 tokens, the punctuation skiplist. A step at learning rate 0 leaves the encoder as
// it came; with the run's fresh head put into PyLate's model, both feed the same ids and give the same token vectors
// and MaxSim scores on SciFact claims and abstracts. PyLate loads the export with the same tokens, adding none.
TEST(RealModel, ColbertRecipeMakesMiniLmAColbertAsPyLateDoes) {
  REAL_MODEL_OR_SKIP(model);
  SHARED_DATA_OR_SKIP(scifact, "scifact-train");
  std::string python;
  if (auto why = reference_or_skip({"pylate"}, &python); !why.empty()) GTEST_SKIP() << why;
  const auto dir = spread::testing::fresh_temp_dir("real_colbert");
  const fs::path beir = small_scifact(scifact, 8, 8, dir / "beir");
  {
    std::ofstream queries(dir / "queries.txt"), docs(dir / "docs.txt");
    for (const auto& line : lines_of(beir / "queries.jsonl")) queries << nlohmann::json::parse(line)["text"].get<std::string>() << "\n";
    const auto corpus = lines_of(beir / "corpus.jsonl");
    for (size_t i = 0; i < 4; ++i) docs << nlohmann::json::parse(corpus[i])["text"].get<std::string>() << "\n";
  }
  const std::string recipe = std::string(SPREAD_TEST_DATA_DIR) + "/../../recipes/colbert_minilm_scifact.toml";
  const auto t = run_spread("train " + recipe + " --set train.init_from=" + model + " --set data.source=beir" +
                            " --set data.path=" + beir.string() + " --set data.qrels=train --set run.out_dir=" +
                            dir.string() + " --set train.max_steps=1 --set train.lr=0 --set train.warmup_steps=0" +
                            " --set train.batch_size=4 --set train.eval_every=0 --set train.keep_best= --set eval.beir=" +
                            " --set data.val_fraction=0.2");
  ASSERT_EQ(t.code, 0) << t.output;
  const fs::path run_dir = dir / "colbert_minilm_scifact", out = dir / "export";
  const auto e = run_spread("export --run " + run_dir.string() + " --out " + out.string());
  ASSERT_EQ(e.code, 0) << e.output;
  const auto pylate = [&](const std::string& folder, const std::string& options, const std::string& name) {
    run_reference(python, "hf_model_ref.py", "pylate '" + folder + "' " + (dir / "queries.txt").string() + " " +
                                                 (dir / "docs.txt").string() + " " + (dir / name).string() + options);
    return nlohmann::json::parse(slurp(dir / name));
  };
  const auto made = pylate(model, " --head-from " + out.string() + " --query-length 32 --document-length 180",
                           "made.json");
  spread::LoadedRun run = spread::load_run(run_dir.string());
  EXPECT_EQ(run.tokenizer->vocab_size(), made.at("vocab").get<int64_t>());
  EXPECT_EQ(run.model->config().vocab_size, 30524);
  EXPECT_EQ(run.tokenizer->special_ids().query, made.at("prefix_ids")[0].get<int32_t>());
  EXPECT_EQ(run.tokenizer->special_ids().document, made.at("prefix_ids")[1].get<int32_t>());
  const torch::Tensor wte = run.model->wte->weight.detach();
  EXPECT_LE(spread::testing::max_abs(wte.narrow(0, 30522, 2), spread::testing::matrix(made.at("added_rows"))), 5e-5);
  spread::testing::expect_colbert_matches(run, made, 1e-4);
  const auto exported = pylate(out.string(), "", "exported.json");
  EXPECT_EQ(exported.at("vocab"), made.at("vocab"));
  EXPECT_EQ(exported.at("prefix_ids"), made.at("prefix_ids"));
  EXPECT_EQ(exported.at("added_rows").size(), 0u);
  spread::testing::expect_colbert_matches(run, exported, 1e-4);
}
