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
#include "pylate_reference.h"
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

// A sentence-transformers 6 late-interaction folder (MultiVectorEncoder: Transformer with fixed [MASK] query
// expansion and document_length, Dense, MultiVectorMask, Normalize; prompts "[Q] " and "[D] " that are tokens of its
// tokenizer), made by tests/oracles/st6_multivector_ref.py, read as spread's maxsim model: the ids the library feeds,
// the token vectors its encode_query / encode_document return and the MaxSim scores.
TEST(SentenceTransformers6, MultiVectorEncoderFolderEncodesAsTheLibrary) {
  std::string why;
  const std::string python = spread::testing::peers_python({"sentence_transformers", "transformers"}, &why);
  if (python.empty()) GTEST_SKIP() << why;
  SHARED_DATA_OR_SKIP(bert, "tokenizers/bert-base-uncased");
  const fs::path work = spread::testing::fresh_temp_dir("st6_multivector_encode");
  // Short and long texts, so that queries are expanded and truncated at 12 tokens, documents at 20, and punctuation
  // is skipped in documents only.
  std::ofstream(work / "queries.txt") << "hello world\nwhat is late interaction, really?\na\n"
                                         "The Quick brown fox jumps over the lazy dog, twice, and then once more\n";
  std::ofstream(work / "docs.txt") << "Late interaction scores every query token against every document token.\n"
                                      "hello, world!\nThe Quick brown fox jumps over the lazy dog, twice, and then "
                                      "once more for luck and a bit beyond\n";
  const std::string script = spread::testing::oracle_script("st6_multivector_ref.py");
  const fs::path dir = work / "mve";
  const std::string cmd = fmt::format(
      "'{0}' '{1}' make '{2}' --tokenizer '{3}' --query-length 12 --document-length 20 > '{4}' 2>&1 && "
      "'{0}' '{1}' encode '{2}' '{5}' '{6}' '{7}' >> '{4}' 2>&1",
      python, script, dir.string(), bert, (work / "python.log").string(), (work / "queries.txt").string(),
      (work / "docs.txt").string(), (work / "ref.json").string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << slurp(work / "python.log");
  EXPECT_NE(slurp(dir / "config_sentence_transformers.json").find("MultiVectorEncoder"), std::string::npos);

  spread::LoadedRun run = spread::load_run(dir.string());
  const auto& m = run.recipe.loss.maxsim;
  EXPECT_EQ(run.recipe.train.objective, spread::Objective::maxsim);
  EXPECT_EQ(m.query_length, 12);
  EXPECT_EQ(m.document_length, 20);
  EXPECT_TRUE(m.query_expansion);
  EXPECT_EQ(run.recipe.tokenizer.query_marker, "[Q] ");
  EXPECT_EQ(run.recipe.tokenizer.document_marker, "[D] ");
  spread::testing::expect_colbert_matches(run, json::parse(slurp(work / "ref.json")), 1e-5);
  fs::remove_all(work);
}

namespace {

// A MultiVectorEncoder folder's configuration files (no weights: each refusal comes before they are read).
fs::path multi_vector_configs(const std::string& name, const std::string& expansion,
                              const std::string& query_prompt) {
  const fs::path dir = spread::testing::fresh_temp_dir(name);
  std::ofstream(dir / "modules.json") << R"([
      {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.base.modules.transformer.Transformer"},
      {"idx": 1, "name": "1", "path": "1_Dense", "type": "sentence_transformers.base.modules.dense.Dense"},
      {"idx": 2, "name": "2", "path": "2_MultiVectorMask",
       "type": "sentence_transformers.multi_vector_encoder.modules.multi_vector_mask.MultiVectorMask"},
      {"idx": 3, "name": "3", "path": "3_Normalize",
       "type": "sentence_transformers.base.modules.normalize.Normalize"}])";
  std::ofstream(dir / "config_sentence_transformers.json")
      << R"({"model_type": "MultiVectorEncoder", "similarity_fn_name": "maxsim", "prompts": {"query": ")"
      << query_prompt << R"(", "document": "[D] "}})";
  std::ofstream(dir / "sentence_bert_config.json")
      << R"({"transformer_task": "feature-extraction", "document_length": 20, "query_expansion": )" << expansion
      << "}";
  std::ofstream(dir / "tokenizer.json") << R"({"added_tokens": [{"id": 1, "content": "[Q] ", "normalized": false},
      {"id": 2, "content": "[D] ", "normalized": false}], "model": {"vocab": {"query": 3, ":": 4}}})";
  return dir;
}

void expect_refused(const fs::path& dir, const std::vector<std::string>& named) {
  try {
    spread::read_hf_model_folder(dir.string(), false);
    ADD_FAILURE() << "read";
  } catch (const spread::UserError& e) {
    for (const auto& n : named) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << n << ": " << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace

// What spread does not compute is refused by file and key: expansion tokens attended to, other expansion
// strategies, modules other than its maxsim model's.
TEST(SentenceTransformers6, MultiVectorEncoderOptionsSpreadDoesNotModelAreRefusedByKey) {
  const std::string fixed = R"({"strategy": "fixed", "attend": false, "length": 12})";
  expect_refused(multi_vector_configs("st6_mv_attend", R"({"strategy": "fixed", "attend": true, "length": 12})",
                                      "[Q] "),
                 {"sentence_bert_config.json", "query_expansion.attend"});
  expect_refused(multi_vector_configs("st6_mv_min", R"({"strategy": "min", "attend": false, "length": 12})",
                                      "[Q] "),
                 {"sentence_bert_config.json", "query_expansion.strategy"});
  // A text prompt is prepended as text, several tokens before the query's: not spread's one marker id.
  expect_refused(multi_vector_configs("st6_mv_prompt", fixed, "query: "),
                 {"config_sentence_transformers.json", "prompts.query"});
  expect_refused(multi_vector_configs("st6_mv_none", "null", "[Q] "), {"sentence_bert_config.json", "query_expansion"});
  const fs::path only = spread::testing::fresh_temp_dir("st6_mv_modules");
  std::ofstream(only / "modules.json") << R"([{"idx": 0, "name": "0", "path": "",
      "type": "sentence_transformers.base.modules.transformer.Transformer"}])";
  std::ofstream(only / "config_sentence_transformers.json") << R"({"model_type": "MultiVectorEncoder"})";
  expect_refused(only, {"modules.json", "MultiVectorEncoder"});
}
