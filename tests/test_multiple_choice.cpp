// Zero-shot multiple choice (eval/multiple_choice.h) against lm-evaluation-harness's computation done directly with
// transformers (tests/oracles/hf_model_ref.py choices) on a GPT-2 and a Llama model that transformers made; the
// reader's refusals; and `spread eval --choices`.
#include <gtest/gtest.h>
#include "test_paths.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cli_run.h"
#include "python_env.h"
#include "shared_data.h"
#include "spread/eval/multiple_choice.h"
#include "spread/interchange/loaded_run.h"
#include "spread/run/setup.h"
#include "spread/util/error.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("spread_choices_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Items that exercise the harness's rules: a context ending in a space (moved into the ending), endings whose
// first token merges with the context's last characters, a context longer than the model's 32 positions (cut from
// the left), non-ASCII text (lengths in characters, not bytes), three and four endings.
std::string choices_jsonl() {
  std::string long_context;
  for (int i = 0; i < 12; ++i) long_context += "the quick brown fox jumps over the lazy dog, ";
  const json items[] = {
      {{"context", "The cat sat on the "}, {"endings", {"mat.", "moon.", "quantum chromodynamics"}}, {"label", 0}},
      {{"context", "She poured the coffee into a"}, {"endings", {" cup", "n elephant", " cloud of rain"}}, {"label", 0}},
      {{"context", long_context + "and then"}, {"endings", {" it slept.", " it ran away quickly.", " no"}},
       {"label", 1}},
      {{"context", "Caf\u00e9 au lait co\u00fbte"}, {"endings", {" deux euros", " \u00e9norm\u00e9ment", " 3\u20ac",
                                                              " rien du tout"}}, {"label", 2}},
      {{"context", "1 + 1 ="}, {"endings", {" 2", " 3"}}, {"label", 0}, {"source", "ignored"}}};
  std::string out;
  for (const auto& item : items) out += item.dump() + "\n";
  return out;
}

std::string error_of(const std::string& path) {
  try {
    spread::read_choices(path);
  } catch (const spread::UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(MultipleChoice, BadFilesAreRefusedNamingLineAndKey) {
  const fs::path dir = scratch("bad");
  const std::pair<std::string, std::string> cases[] = {
      {"{\"context\": \"a\", \"endings\": [\"b\", \"c\"], \"label\": 0}\n[1, 2]\n", ":2: not a JSON object"},
      {"{\"context\": \"\", \"endings\": [\"b\", \"c\"], \"label\": 0}\n", ":1: key 'context'"},
      {"{\"context\": \"a\", \"endings\": [\"b\"], \"label\": 0}\n", ":1: key 'endings'"},
      {"{\"context\": \"a\", \"endings\": [\"b\", \"\"], \"label\": 0}\n", ":1: key 'endings'"},
      {"{\"context\": \"a\", \"endings\": [\"b\", \"c\"], \"label\": 2}\n", ":1: key 'label'"},
      {"{\"context\": \"a\", \"endings\": [\"b\", \"c\"], \"label\": \"0\"}\n", ":1: key 'label'"},
      {"\n\n", "holds no items"},
      {std::string(200, '[') + std::string(200, ']') + "\n", ":1: JSON nested more than 128 levels"},
      {"{\"context\": \"a\xff\", \"endings\": [\"b\", \"c\"], \"label\": 0}\n", "invalid UTF-8"}};
  for (const auto& [text, expected] : cases) {
    const fs::path file = dir / "items.jsonl";
    std::ofstream(file, std::ios::binary) << text;
    const std::string e = error_of(file.string());
    EXPECT_NE(e.find(expected), std::string::npos) << "for " << text << "\ngot: " << e;
    EXPECT_NE(e.find(file.string()), std::string::npos) << e;
  }
  EXPECT_NE(error_of((dir / "absent.jsonl").string()).find("absent.jsonl"), std::string::npos);
  fs::remove_all(dir);
}

TEST(MultipleChoice, ScoresEqualTransformersForGpt2AndLlama) {
  std::string why;
  const std::string python = spread::testing::reference_python({"transformers"}, &why);
  if (python.empty()) GTEST_SKIP() << why;
  SHARED_DATA_OR_SKIP(gpt2_vocab, "tokenizers/gpt2");
  const fs::path dir = scratch("models");
  std::ofstream(dir / "items.jsonl", std::ios::binary) << choices_jsonl();
  const std::string script = spread::testing::oracle_script("hf_model_ref.py");
  std::ofstream jobs(dir / "jobs.txt");
  jobs << fmt::format("make gpt2 {} --tokenizer {} --seed 31 --layers 2 --heads 2 --width 32 --max-position 32\n",
                      (dir / "gpt2").string(), gpt2_vocab)
       << fmt::format("make llama {} --tokenizer {} --seed 32 --layers 2 --heads 4 --kv-heads 2 --width 32 "
                      "--max-position 32\n", (dir / "llama").string(), gpt2_vocab);
  for (const char* m : {"gpt2", "llama"})
    jobs << fmt::format("choices {} {} {}\n", (dir / m).string(), (dir / "items.jsonl").string(),
                        (dir / (std::string(m) + ".json")).string());
  jobs.close();
  const std::string cmd = fmt::format("'{}' '{}' --jobs '{}' > '{}' 2>&1", python, script, (dir / "jobs.txt").string(),
                                      (dir / "python.log").string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto items = spread::read_choices((dir / "items.jsonl").string());
  ASSERT_EQ(items.size(), 5u);
  for (const std::string m : {"gpt2", "llama"}) {
    std::ifstream in(dir / (m + ".json"));
    const json ref = json::parse(in);
    spread::LoadedRun run = spread::load_run((dir / m).string());
    ASSERT_EQ(run.model->config().block_size, 32) << m;
    const auto r = spread::evaluate_choices(run.model, *run.tokenizer, items, 3, spread::recipe_device(run.recipe));
    for (size_t i = 0; i < items.size(); ++i)
      for (size_t e = 0; e < items[i].endings.size(); ++e) {
        const double want = ref["items"][i]["loglik"][e].get<double>();
        EXPECT_NEAR(r.loglik[i][e], want, 1e-5 * std::max(1.0, std::abs(want))) << m << " item " << i << " ending " << e;
        EXPECT_EQ(r.tokens[i][e], ref["items"][i]["tokens"][e].get<int64_t>()) << m << " item " << i << " ending " << e;
      }
    EXPECT_DOUBLE_EQ(r.acc, ref["acc"].get<double>()) << m;
    EXPECT_DOUBLE_EQ(r.acc_norm, ref["acc_norm"].get<double>()) << m;
    // The CLI prints the same numbers.
    const auto cli = spread::testing::run_spread_env("", fmt::format("eval --model {} --choices {} --json",
                                                                     (dir / m).string(), (dir / "items.jsonl").string()));
    ASSERT_EQ(cli.code, 0) << cli.output;
    const json printed = json::parse(cli.output.substr(cli.output.rfind("\n{") + 1));
    EXPECT_DOUBLE_EQ(printed["choices"]["acc_norm"].get<double>(), ref["acc_norm"].get<double>()) << m;
    EXPECT_EQ(printed["choices"]["items"].get<int64_t>(), 5) << m;
  }
  fs::remove_all(dir);
}

// eval.choices during training: logged under the file's name at every evaluation, and the last one equal to what
// `spread eval --choices` gives for the run's final checkpoint.
TEST(MultipleChoice, TrainingLogsTheScoresOfEachFile) {
  const fs::path dir = scratch("train");
  std::string corpus;
  for (int i = 0; i < 400; ++i) corpus += i % 3 ? "the cat sat on the mat. " : "a dog ran to the park.\n";
  std::ofstream(dir / "corpus.txt") << corpus;
  std::ofstream(dir / "cats.jsonl") << R"({"context": "the cat sat on the", "endings": [" mat.", " park."], "label": 0})"
                                    << "\n"
                                    << R"({"context": "a dog ran to the", "endings": [" mat.", " park."], "label": 1})"
                                    << "\n";
  const std::string run = (dir / "runs" / "lm").string();
  std::ofstream(dir / "lm.toml") << "# every key from --set\n";
  const auto train = spread::testing::run_spread_env(
      "", fmt::format("train {} --set run.name=lm --set run.out_dir={} --set data.source=text --set data.path={} "
                      "--set tokenizer.kind=char --set model.n_layer=1 --set model.n_head=2 --set model.n_embd=16 "
                      "--set model.block_size=16 --set train.max_steps=6 --set train.eval_every=3 "
                      "--set train.ckpt_every=3 --set train.warmup_steps=1 --set 'eval.choices=[{}]'",
                      (dir / "lm.toml").string(), (dir / "runs").string(), (dir / "corpus.txt").string(),
                      (dir / "cats.jsonl").string()));
  ASSERT_EQ(train.code, 0) << train.output;
  std::vector<double> acc_norm;
  for (const auto& j : spread::read_metrics(run + "/metrics.jsonl"))
    if (j.contains("cats_acc_norm")) {
      acc_norm.push_back(j["cats_acc_norm"].get<double>());
      EXPECT_TRUE(j.contains("cats_acc")) << j.dump();
      EXPECT_TRUE(j.contains("val_loss")) << j.dump();
    }
  ASSERT_EQ(acc_norm.size(), 2u) << "evaluations at steps 3 and 6";
  const auto eval = spread::testing::run_spread_env(
      "", fmt::format("eval --run {} --choices {} --json", run, (dir / "cats.jsonl").string()));
  ASSERT_EQ(eval.code, 0) << eval.output;
  const json printed = json::parse(eval.output.substr(eval.output.rfind("\n{") + 1));
  EXPECT_DOUBLE_EQ(printed["choices"]["acc_norm"].get<double>(), acc_norm.back());
  fs::remove_all(dir);
}

TEST(MultipleChoice, AnEncoderRecipeCannotAskForThem) {
  try {
    spread::parse_recipe("", "test.toml", {"train.objective=contrastive", "eval.choices=[a.jsonl]"});
    FAIL() << "accepted";
  } catch (const spread::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("eval.choices"), std::string::npos) << e.what();
  }
}
