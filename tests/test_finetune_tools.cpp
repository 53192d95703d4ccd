// The tools of a fine-tune around the trainer: hard-negative selection (eval/hard_negatives.h) on hand-made
// embeddings whose scores are known, the dev split of a BEIR folder (spread split), and the best checkpoint kept
// through pruning (train.keep_best, export --best).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "cli_run.h"
#include "spread/data/beir.h"
#include "spread/eval/hard_negatives.h"
#include "spread/run/checkpoint.h"
#include "spread/util/error.h"

namespace {
namespace fs = std::filesystem;
using spread::HardNegativeOptions;
using spread::testing::run_spread;

// One query (1, 0) and documents at the given cosines to it: unit vectors (c, sqrt(1 - c^2)).
struct Scene {
  torch::Tensor query, corpus;
};

Scene scene(const std::vector<double>& cosines) {
  auto corpus = torch::empty({int64_t(cosines.size()), 2});
  for (size_t i = 0; i < cosines.size(); ++i) {
    corpus[int64_t(i)][0] = cosines[i];
    corpus[int64_t(i)][1] = std::sqrt(1 - cosines[i] * cosines[i]);
  }
  return {torch::tensor({{1.0f, 0.0f}}), corpus};
}

// Documents 0..5 at cosines 0.95 (the positive), 0.99, 0.90, 0.80, 0.50, -0.20.
std::vector<int64_t> negatives(const HardNegativeOptions& o) {
  const Scene s = scene({0.95, 0.99, 0.90, 0.80, 0.50, -0.20});
  return spread::mine_hard_negatives(s.query, s.corpus, {{0}}, o).at(0).corpus_index;
}

TEST(HardNegatives, TheBestScoringNonPositivesByDefault) {
  HardNegativeOptions o;
  o.num_negatives = 2;  // range_max = 0 + 2 + 1 positive = 3: candidates are the top 4, the positive among them
  EXPECT_EQ(negatives(o), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(spread::default_range_max(o, 1), 3);
}

TEST(HardNegatives, MarginsAndScoreBoundsDisqualify) {
  HardNegativeOptions o;
  o.num_negatives = 2;
  o.range_max = 4;
  o.absolute_margin = 0.1;  // out: score + 0.1 > 0.95, i.e. 0.99 and 0.90
  EXPECT_EQ(negatives(o), (std::vector<int64_t>{3, 4}));
  o.absolute_margin.reset();
  o.relative_margin = 0.1;  // out: score > 0.95 * 0.9 = 0.855
  EXPECT_EQ(negatives(o), (std::vector<int64_t>{3, 4}));
  o.relative_margin.reset();
  o.max_score = 0.85;
  EXPECT_EQ(negatives(o), (std::vector<int64_t>{3, 4}));
  o.min_score = 0.6;  // 0.50 out too: one qualifies, two are asked for, so the query gets none
  EXPECT_TRUE(negatives(o).empty());
}

TEST(HardNegatives, RangeMinSkipsTheHardestQualified) {
  HardNegativeOptions o;
  o.num_negatives = 1;
  o.range_min = 1;
  o.range_max = 4;
  o.absolute_margin = 0.1;  // qualified in score order: 0.80 (doc 3), 0.50 (doc 4); the first is skipped
  EXPECT_EQ(negatives(o), (std::vector<int64_t>{4}));
}

TEST(HardNegatives, EveryPositiveOfTheQueryIsExcluded) {
  const Scene s = scene({0.95, 0.99, 0.90, 0.80, 0.50, -0.20});
  HardNegativeOptions o;
  o.num_negatives = 2;
  const auto mined = spread::mine_hard_negatives(s.query, s.corpus, {{0, 1}}, o).at(0);
  EXPECT_EQ(mined.corpus_index, (std::vector<int64_t>{2, 3}));
  EXPECT_NEAR(mined.score.at(0), 0.90, 1e-6);
}

TEST(HardNegatives, RandomSamplingDrawsAmongTheQualifiedInScoreOrder) {
  const Scene s = scene({0.95, 0.99, 0.90, 0.80, 0.50, -0.20});
  HardNegativeOptions o;
  o.num_negatives = 2;
  o.range_max = 5;
  o.sampling = "random";
  std::set<int64_t> seen;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    o.seed = seed;
    const auto got = spread::mine_hard_negatives(s.query, s.corpus, {{0}}, o).at(0);
    ASSERT_EQ(got.corpus_index.size(), 2u);
    EXPECT_GT(got.score[0], got.score[1]);
    for (int64_t d : got.corpus_index) {
      EXPECT_NE(d, 0);  // never the positive
      seen.insert(d);
    }
  }
  EXPECT_EQ(seen, (std::set<int64_t>{1, 2, 3, 4, 5}));  // the 5 qualified of the top range_max, each drawn
}

TEST(HardNegatives, AskingMoreThanTheCorpusHoldsNamesTheLargestThatFits) {
  const Scene s = scene({0.95, 0.99, 0.90, 0.80, 0.50, -0.20});
  HardNegativeOptions o;
  o.num_negatives = 5;  // needs the top 5 + 1 + 1 = 7 of 6 documents
  try {
    spread::mine_hard_negatives(s.query, s.corpus, {{0}}, o);
    FAIL() << "expected a UserError";
  } catch (const spread::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("the largest that fits is 4"), std::string::npos) << e.what();
  }
}

// --- spread split ------------------------------------------------------------------------------------------------

std::vector<std::string> lines_of(const fs::path& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// A BEIR folder of 20 queries (q0..q19; q7 has two relevant documents and one judged irrelevant) over 25 documents.
fs::path make_beir(const fs::path& dir) {
  fs::create_directories(dir / "qrels");
  std::ofstream corpus(dir / "corpus.jsonl"), queries(dir / "queries.jsonl"), qrels(dir / "qrels" / "train.tsv");
  for (int d = 0; d < 25; ++d) corpus << R"({"_id": "d)" << d << R"(", "title": "T", "text": "document )" << d << "\"}\n";
  qrels << "query-id\tcorpus-id\tscore\n";
  for (int q = 0; q < 20; ++q) {
    queries << R"({"_id": "q)" << q << R"(", "text": "query )" << q << "\"}\n";
    qrels << "q" << q << "\td" << q << "\t1\n";
  }
  qrels << "q7\td21\t2\nq7\td22\t0\n";
  return dir;
}

TEST(SplitCli, DevQueriesAreASeededShareAndNoQueryIsInBoth) {
  const auto dir = spread::testing::fresh_temp_dir("split");
  const fs::path src = make_beir(dir / "src");
  const auto r = run_spread("split --beir " + src.string() + " --out " + (dir / "out").string() +
                            " --dev-fraction 0.25 --seed 7");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto train = spread::load_beir((dir / "out").string(), "train");
  const auto dev = spread::load_beir((dir / "out").string(), "dev");
  EXPECT_EQ(dev.query_ids.size(), 5u);  // round(0.25 x 20)
  EXPECT_EQ(train.query_ids.size(), 15u);
  std::set<std::string> all;
  for (const auto* ids : {&train.query_ids, &dev.query_ids})
    for (const auto& id : *ids) EXPECT_TRUE(all.insert(id).second) << id << " is in both";
  EXPECT_EQ(all.size(), 20u);
  // Every row of the source's qrels is in exactly one of the two files, as it was (grades and zeros kept).
  std::multiset<std::string> rows, written;
  for (const auto& line : lines_of(src / "qrels" / "train.tsv")) rows.insert(line);
  for (const char* name : {"train.tsv", "dev.tsv"})
    for (const auto& line : lines_of(dir / "out" / "qrels" / name)) written.insert(line);
  rows.insert("query-id\tcorpus-id\tscore");  // both files have the header
  EXPECT_EQ(written, rows);
  EXPECT_EQ(lines_of(dir / "out" / "corpus.jsonl"), lines_of(src / "corpus.jsonl"));
  // The same seed draws the same queries; another seed others.
  const auto again = run_spread("split --beir " + src.string() + " --out " + (dir / "again").string() +
                                " --dev-fraction 0.25 --seed 7");
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_EQ(spread::load_beir((dir / "again").string(), "dev").query_ids, dev.query_ids);
  const auto other = run_spread("split --beir " + src.string() + " --out " + (dir / "other").string() +
                                " --dev-fraction 0.25 --seed 8");
  ASSERT_EQ(other.code, 0) << other.output;
  EXPECT_NE(spread::load_beir((dir / "other").string(), "dev").query_ids, dev.query_ids);
  fs::remove_all(dir);
}

TEST(SplitCli, AFractionThatEmptiesASideIsRefused) {
  const auto dir = spread::testing::fresh_temp_dir("split_bad");
  const fs::path src = make_beir(dir / "src");
  const auto r = run_spread("split --beir " + src.string() + " --out " + (dir / "out").string() + " --dev-fraction 0.01");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("both need at least one"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "out" / "qrels" / "dev.tsv"));
  fs::remove_all(dir);
}

// --- train.keep_best ------------------------------------------------------------------------------------------------

std::string contrastive_recipe(const fs::path& dir, const std::string& extra) {
  {
    std::ofstream pairs(dir / "p.tsv");
    pairs << "anchor\tpositive\n";
    const char* things[] = {"cat", "dog", "bird", "fish", "horse", "child", "man", "woman"};
    for (int i = 0; i < 80; ++i) pairs << "a " << things[i % 8] << " " << i << "\tthe " << things[i % 8] << " no " << i << "\n";
  }
  const std::string recipe = (dir / "r.toml").string();
  std::ofstream(recipe) << "[run]\nname = \"emb\"\nout_dir = \"" << dir.string() << "\"\n"
                        << "[data]\nsource = \"pairs\"\npath = \"" << (dir / "p.tsv").string() << "\"\n"
                        << "val_fraction = 0.3\n[tokenizer]\nkind = \"char\"\n"
                        << "[model]\nn_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 32\ncausal = false\n"
                        << "[train]\nobjective = \"contrastive\"\nbatch_size = 8\nmax_steps = 10\nwarmup_steps = 1\n"
                        << "lr = 0.3\neval_every = 2\nckpt_every = 2\nkeep_last = 1\nlog_every = 2\n"
                        << extra;
  return recipe;
}

TEST(KeepBest, TheBestEvaluationsCheckpointOutlivesPruningAndExports) {
  const auto dir = spread::testing::fresh_temp_dir("keep_best");
  const auto t = run_spread("train " + contrastive_recipe(dir, "keep_best = \"val_loss\"\n"));
  ASSERT_EQ(t.code, 0) << t.output;
  const fs::path run_dir = dir / "emb";
  // The best step by the log: the lowest val_loss of the evaluations (the first such step on a tie).
  const auto losses = spread::testing::logged(run_dir, "val_loss");
  ASSERT_EQ(losses.size(), 5u);
  const size_t best = size_t(std::min_element(losses.begin(), losses.end()) - losses.begin());
  const int64_t best_step = 2 * int64_t(best + 1);
  // At this learning rate the val loss is lowest early (step 2 here): pruning has an older checkpoint to spare.
  ASSERT_LT(best_step, 10) << "the best evaluation is the last one: this run would not test the pruning";
  std::ifstream in(run_dir / "best.json");
  const auto record = nlohmann::json::parse(in);
  EXPECT_EQ(record["step"].get<int64_t>(), best_step);
  EXPECT_EQ(record["metric"], "val_loss");
  EXPECT_DOUBLE_EQ(record["value"].get<double>(), losses[best]);
  // keep_last = 1 keeps the newest (step 10) and the best one only.
  std::set<std::string> kept;
  for (const auto& f : spread::list_checkpoints(run_dir.string())) kept.insert(fs::path(f).filename().string());
  std::set<std::string> want = {"step_00000010.ckpt", fmt::format("step_{:08d}.ckpt", best_step)};
  EXPECT_EQ(kept, want);
  const auto e = run_spread("export --run " + run_dir.string() + " --best --out " + (dir / "best").string());
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find("exported step " + std::to_string(best_step)), std::string::npos) << e.output;
  fs::remove_all(dir);
}

TEST(KeepBest, AMetricTheEvaluationsDoNotHaveIsNamedWithTheOnesTheyHave) {
  const auto dir = spread::testing::fresh_temp_dir("keep_best_bad");
  const auto t = run_spread("train " + contrastive_recipe(dir, "keep_best = \"ndcg@10\"\n"));
  EXPECT_EQ(t.code, 2) << t.output;
  EXPECT_NE(t.output.find("train.keep_best"), std::string::npos) << t.output;
  EXPECT_NE(t.output.find("val_loss"), std::string::npos) << t.output;
  const auto r = run_spread("train " + contrastive_recipe(dir, "keep_best = \"val_loss\"\n") +
                            " --set train.ckpt_every=3 --set run.name=other");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("not a multiple of train.ckpt_every"), std::string::npos) << r.output;
  const auto no_best = run_spread("export --run " + (dir / "emb").string() + " --best --out " + (dir / "x").string());
  EXPECT_EQ(no_best.code, 2) << no_best.output;
  fs::remove_all(dir);
}

}  // namespace
