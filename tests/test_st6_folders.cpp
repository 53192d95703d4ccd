// Folders saved by sentence-transformers 6 (the newest, in the peers environment: scripts/python_env.sh --peers),
// which names its modules anew (sentence_transformers.base.modules.*), writes one "pooling_mode" and keeps
// max_seq_length in the tokenizer's model_max_length: `spread encode --model` against SentenceTransformer.encode of
// the same folder, made by tests/oracles/hf_model_ref.py run with that environment.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "python_env.h"
#include "shared_data.h"
#include "spread/data/npy.h"
#include "spread/interchange/hf_import.h"
#include "spread/util/error.h"
#include "test_paths.h"

namespace fs = std::filesystem;
using nlohmann::json;
using spread::testing::run_spread;

namespace {

const std::vector<std::string> kTexts = {
    "hello world", "The Quick brown fox jumps over the lazy dog, twice, and then once more for luck",
    "a", "Late interaction scores every query token against every document token"};

// name -> hf_model_ref.py make options; the encode's --prompt-name where it has one.
const std::vector<std::tuple<std::string, std::string, std::string>> kFolders = {
    {"mean_norm", "--seed 31 --pooling mean --normalize", ""},
    {"cls", "--seed 32 --pooling cls", ""},
    {"last_short", "--seed 33 --pooling lasttoken --max-seq-length 9", ""},
    {"weighted_lower", "--seed 34 --pooling weightedmean --lower-case", ""},
    {"prompts", "--seed 35 --pooling mean --prompts --include-prompt 0 --normalize", "query"},
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST(SentenceTransformers6, EncodeOfItsFoldersMatchesTheLibrary) {
  std::string why;
  const std::string python = spread::testing::peers_python({"sentence_transformers", "transformers"}, &why);
  if (python.empty()) GTEST_SKIP() << why;
  SHARED_DATA_OR_SKIP(bert, "tokenizers/bert-base-uncased");
  const fs::path work = spread::testing::fresh_temp_dir("st6_folders");
  {
    std::ofstream texts(work / "texts.txt");
    for (const auto& t : kTexts) texts << t << "\n";
  }
  const std::string script = spread::testing::oracle_script("hf_model_ref.py");
  {
    std::ofstream jobs(work / "jobs.txt");
    for (const auto& [name, options, prompt] : kFolders) {
      jobs << fmt::format("make st {} --tokenizer {} --layers 2 --heads 2 --width 32 {}\n", (work / name).string(),
                          bert, options);
      jobs << fmt::format("st-encode {} {} {}{}\n", (work / name).string(), (work / "texts.txt").string(),
                          (work / (name + ".json")).string(), prompt.empty() ? "" : " --prompt-name " + prompt);
    }
  }
  const std::string cmd = fmt::format("'{}' '{}' --jobs '{}' > '{}' 2>&1", python, script,
                                      (work / "jobs.txt").string(), (work / "python.log").string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << slurp(work / "python.log");

  for (const auto& [name, options, prompt] : kFolders) {
    SCOPED_TRACE(name);
    const fs::path dir = work / name;
    // The folder is version 6's, not one spread could read before.
    EXPECT_NE(slurp(dir / "modules.json").find("sentence_transformers.base.modules"), std::string::npos);
    const json ref = json::parse(slurp(work / (name + ".json")));
    const fs::path out = work / (name + ".npy");
    auto r = run_spread(fmt::format("encode --model '{}' --in '{}' --out '{}'{}", dir.string(),
                                    (work / "texts.txt").string(), out.string(),
                                    prompt.empty() ? "" : " --prompt-name " + prompt));
    ASSERT_EQ(r.code, 0) << r.output;
    Eigen::MatrixXd mine = spread::read_npy_matrix(out.string());  // column-major
    const auto got = torch::from_blob(mine.data(), {mine.cols(), mine.rows()}, torch::kDouble).t().clone();
    std::vector<double> flat;
    for (const auto& row : ref.at("embeddings"))
      for (const auto& v : row) flat.push_back(v.get<double>());
    const auto want = torch::tensor(flat, torch::kDouble).view({int64_t(ref.at("embeddings").size()), -1});
    ASSERT_EQ(got.sizes(), want.sizes());
    const double d = (got - want).abs().max().item<double>();
    std::cout << name << ": largest difference " << d << "\n";
    EXPECT_LE(d, 1e-5);
  }
  // What the reader took from version 6's files: the pooling mode, the length from tokenizer_config.json.
  const auto last = spread::read_hf_model_folder((work / "last_short").string(), /*with_weights=*/false);
  ASSERT_TRUE(last.sentence.has_value());
  EXPECT_EQ(last.sentence->pooling, "last");
  EXPECT_EQ(last.sentence->max_seq_length, 9);
  EXPECT_EQ(spread::read_hf_model_folder((work / "prompts").string(), false).sentence->include_prompt, false);
  fs::remove_all(work);
}

// A sentence-transformers 6 multi-vector folder is named as such, not as an unknown module.
TEST(SentenceTransformers6, AMultiVectorEncoderFolderIsRefusedByName) {
  const fs::path dir = spread::testing::fresh_temp_dir("st6_multivector");
  std::ofstream(dir / "modules.json") << R"([{"idx": 0, "name": "0", "path": "",
      "type": "sentence_transformers.base.modules.transformer.Transformer"}])";
  std::ofstream(dir / "config_sentence_transformers.json") << R"({"model_type": "MultiVectorEncoder"})";
  try {
    spread::read_hf_model_folder(dir.string(), false);
    ADD_FAILURE() << "read";
  } catch (const spread::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("MultiVectorEncoder"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("config_sentence_transformers.json"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}
