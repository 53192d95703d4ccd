// A late-interaction run as a user drives it from the command line: train (objective maxsim), `spread eval
// --pool-factors` (a table row per factor, fewer vectors per document as the factor grows, the unpooled row keeps
// 100%) and `spread calibrate` (a threshold whose achieved mean stays within the target, monotone in it), and one
// line with exit code 2 for bad input.
#include <gtest/gtest.h>
#include "test_paths.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "cli_run.h"

namespace fs = std::filesystem;
using spread::testing::run_spread;

namespace {

const std::string kBeir = std::string(SPREAD_TEST_DATA_DIR) + "/beir_tiny";

// Trains a tiny maxsim run on pairs made of the tiny BEIR folder's texts; returns its directory.
fs::path train_tiny_run(const fs::path& dir) {
  std::ofstream pairs(dir / "pairs.tsv");
  pairs << "anchor\tpositive\n";
  const char* words[] = {"cells", "protein", "gene", "virus", "blood", "brain", "drug", "cancer"};
  for (int i = 0; i < 60; ++i)
    pairs << "what does " << words[i % 8] << " " << i << " do\tthe " << words[i % 8] << " number " << i
          << " acts on " << words[(i * 3) % 8] << " in tissue\n";
  pairs.close();
  std::ofstream(dir / "r.toml") << "[run]\nname = \"late\"\nout_dir = \"" << dir.string() << "\"\nthreads = 1\n"
                                << "[data]\nsource = \"pairs\"\npath = \"" << (dir / "pairs.tsv").string() << "\"\n"
                                << "[tokenizer]\nkind = \"char\"\n"
                                << "[model]\nn_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 64\ncausal = false\n"
                                << "head_dim = 8\n"
                                << "[train]\nobjective = \"maxsim\"\nbatch_size = 4\nmax_steps = 3\neval_every = 0\n"
                                << "ckpt_every = 3\n"
                                << "[loss.maxsim]\nquery_length = 16\ndocument_length = 64\n";
  const auto r = run_spread("train " + (dir / "r.toml").string());
  EXPECT_EQ(r.code, 0) << r.output;
  return dir / "late";
}

void expect_one_line_error(const spread::testing::CliResult& r, const std::string& what) {
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(r.output.rfind("error: ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find(what), std::string::npos) << r.output;
}

}  // namespace

TEST(LateInteractionCli, EvalAtPoolFactorsAndCalibrate) {
  const auto dir = spread::testing::fresh_temp_dir("late_cli");
  const auto run = train_tiny_run(dir).string();

  auto r = run_spread("eval --run " + run + " --beir " + kBeir + " --pool-factors 1,2,4 --json");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  const auto& rows = j["beir"]["results"];
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["pool_factor"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(rows[0]["kept"].get<double>(), 1.0);
  EXPECT_GT(rows[0]["vectors_per_doc"].get<double>(), rows[1]["vectors_per_doc"].get<double>());
  EXPECT_GT(rows[1]["vectors_per_doc"].get<double>(), rows[2]["vectors_per_doc"].get<double>());
  EXPECT_EQ(j["beir"]["queries"].get<int64_t>(), 3);
  r = run_spread("eval --run " + run + " --beir " + kBeir + " --pool-factors 1,4 --per-query --json");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const auto& row : nlohmann::json::parse(r.output.substr(r.output.find('{')))["beir"]["results"]) {
    const auto& per_query = row["per_query"];  // the judged queries q1..q3 (q4 has no qrels), per pool factor
    ASSERT_EQ(per_query.size(), 3u) << row.dump();
    double sum = 0;
    for (const char* id : {"q1", "q2", "q3"}) sum += per_query.at(id)["ndcg@10"].get<double>();
    EXPECT_NEAR(sum / 3, row["ndcg@10"].get<double>(), 1e-12) << row.dump();
  }
  // --qrels picks the split: train.tsv (q1) by default, dev.tsv (q2, q3) when asked for.
  const fs::path split = dir / "beir_split";
  fs::create_directories(split / "qrels");
  for (const char* file : {"corpus.jsonl", "queries.jsonl"}) fs::copy_file(fs::path(kBeir) / file, split / file);
  std::ofstream(split / "qrels" / "train.tsv") << "query-id\tcorpus-id\tscore\nq1\td1\t1\n";
  std::ofstream(split / "qrels" / "dev.tsv") << "query-id\tcorpus-id\tscore\nq2\td2\t1\nq3\td3\t1\n";
  for (const auto& [qrels, file, queries] :
       {std::tuple{"", "train.tsv", 1}, std::tuple{" --qrels dev", "dev.tsv", 2}}) {
    r = run_spread("eval --run " + run + " --beir " + split.string() + qrels + " --pool-factors 1,2 --json");
    ASSERT_EQ(r.code, 0) << r.output;
    const auto b = nlohmann::json::parse(r.output.substr(r.output.find('{')))["beir"];
    EXPECT_NE(b["qrels"].get<std::string>().find(file), std::string::npos) << b.dump();
    EXPECT_EQ(b["queries"].get<int64_t>(), queries) << b.dump();
  }
  r = run_spread("eval --run " + run + " --beir " + kBeir + " --pool-factors 1,4");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("vectors/doc"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("100.0%"), std::string::npos) << r.output;

  std::vector<double> thresholds;
  for (int target : {4, 8, 16}) {
    r = run_spread("calibrate --run " + run + " --docs " + kBeir + " --target-tokens " + std::to_string(target) +
                   " --json");
    ASSERT_EQ(r.code, 0) << r.output;
    const auto c = nlohmann::json::parse(r.output.substr(r.output.find('{')));
    EXPECT_EQ(c["documents"].get<int64_t>(), 6);
    EXPECT_LE(c["achieved_mean"].get<double>(), target + 1e-9);
    EXPECT_GT(c["unpooled_mean"].get<double>(), 16);
    thresholds.push_back(c["threshold"].get<double>());
  }
  EXPECT_GE(thresholds[0], thresholds[1]);  // fewer vectors need a higher threshold
  EXPECT_GE(thresholds[1], thresholds[2]);

  expect_one_line_error(run_spread("eval --run " + run + " --beir " + kBeir + " --pool-factors 1,0.5"),
                        "--pool-factors");
  expect_one_line_error(run_spread("eval --run " + run + " --beir " + kBeir + " --pool-factors 2,"), "--pool-factors");
  expect_one_line_error(run_spread("calibrate --run " + run + " --docs " + (dir / "none.txt").string() +
                                   " --target-tokens 8"), "--docs");
  expect_one_line_error(run_spread("calibrate --run " + run + " --docs " + kBeir + " --target-tokens 0"),
                        "--target-tokens");
  expect_one_line_error(run_spread("calibrate --run " + run + " --docs " + kBeir), "--target-tokens");
  fs::remove_all(dir);
}
