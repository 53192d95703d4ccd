// Runs on a real vocabulary ([tokenizer] kind = "hf", data/hf_run_tokenizer.h) and `spread tokenize`: an LM on
// GPT-2's byte-level BPE and an MLM on BERT's WordPiece, a few steps of a tiny model each, checked against the
// reference library (Hugging Face `tokenizers`, through the Python of tests/python_env.h; skipped with the reason
// when it is absent): the ids the run trained on, the ids `spread tokenize` gives, the exported tokenizer.json.
#include <gtest/gtest.h>
#include "test_paths.h"
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_run.h"
#include "python_env.h"
#include "shared_data.h"
#include "spread/config/recipe.h"
#include "spread/data/corpus.h"
#include "spread/data/token_file.h"
#include "spread/data/tokenizer.h"
#include "spread/losses/mlm.h"
#include "spread/run/setup.h"
#include "spread/util/error.h"

namespace fs = std::filesystem;
using spread::testing::fresh_temp_dir;
using spread::testing::logged;
using spread::testing::reference_python;
using spread::testing::run_spread;

namespace {

// The real vocabularies (docs/data.md); the tests that read them skip, saying so, where the data root lacks them.
const std::string kTokenizers = spread::testing::shared_data_dir() + "/tokenizers";
const std::string kGpt2 = kTokenizers + "/gpt2";
const std::string kBert = kTokenizers + "/bert-base-uncased/tokenizer.json";

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Text with what the two vocabularies treat differently: case, accents, digits, punctuation, a long word.
std::string corpus_line(int i) {
  return "The Café No. " + std::to_string(i) + " served naïve customers; they're QUITE happy (really!) " +
         std::string(i % 3 == 0 ? "antidisestablishmentarianism " : "and   spaces ") + "\xf0\x9f\x98\x80 ";
}

std::vector<std::vector<int32_t>> jsonl_ids(const fs::path& path, const std::string& field = "") {
  std::vector<std::vector<int32_t>> ids;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    ids.push_back((field.empty() ? j : j.at(field)).get<std::vector<int32_t>>());
  }
  return ids;
}

// The reference's ids of each line through tests/oracles/hf_tokenize_ref.py (the tokenizer as transformers loads it,
// the file's truncation and padding applied to the lines as one encode_batch).
std::vector<std::vector<int32_t>> reference_ids(const std::string& python, const std::string& tokenizer,
                                                const fs::path& lines, bool add_special, const fs::path& work) {
  const fs::path out = work / "ref.jsonl";
  const std::string cmd = "'" + python + "' " + spread::testing::oracle_script("hf_tokenize_ref.py") + " " +
                          tokenizer + " " + lines.string() + " " + out.string() + (add_special ? "" : " --no-special");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return jsonl_ids(out, "ids");
}

// The reference's ids of each line for a tokenizer.json without its truncation and padding and without the
// post-processor: what a run's tokenizer of kind hf gives (data/hf_run_tokenizer.h).
std::vector<std::vector<int32_t>> bare_reference_ids(const std::string& python, const std::string& tokenizer_json,
                                                     const fs::path& lines, const fs::path& work) {
  const fs::path script = work / "bare.py", out = work / "bare.jsonl";
  std::ofstream(script) << R"(import json, sys
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
tok.no_truncation()
tok.no_padding()
with open(sys.argv[3], "w") as f:
    for line in open(sys.argv[2], encoding="utf-8", newline="").read().split("\n")[:-1]:
        f.write(json.dumps(tok.encode(line, add_special_tokens=False).ids) + "\n")
)";
  const std::string cmd = "'" + python + "' " + script.string() + " " + tokenizer_json + " " + lines.string() + " " +
                          out.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return jsonl_ids(out);
}

// A tiny model's recipe on the vocabulary at `path`.
std::string write_recipe(const fs::path& dir, const std::string& name, const std::string& objective,
                         const std::string& path, const fs::path& corpus, int steps) {
  const fs::path recipe = dir / (name + ".toml");
  std::ofstream(recipe) << "[run]\nname = \"" << name << "\"\nout_dir = \"" << dir.string() << "\"\n"
                        << "[data]\nsource = \"text\"\npath = \"" << corpus.string() << "\"\n"
                        << "[tokenizer]\nkind = \"hf\"\npath = \"" << path << "\"\n"
                        << "[model]\nn_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 32\n"
                        << (objective == "mlm" ? "causal = false\n" : "")
                        << "[train]\nobjective = \"" << objective << "\"\nbatch_size = 4\nmax_steps = " << steps
                        << "\nwarmup_steps = 2\neval_every = 0\nlog_every = 1\nckpt_every = 3\nkeep_last = 10\n"
                        << "[diagnostics]\nevery = 0\n";
  return recipe.string();
}

// Trains `recipe` to the end; trains a copy, keeps only its step-3 checkpoint and resumes it: the losses agree
// bitwise, so the run's tokenizer came back from the run directory alone.
void expect_resume_matches(const fs::path& dir, const std::string& straight, const std::string& broken) {
  auto a = run_spread("train " + straight), b = run_spread("train " + broken);
  ASSERT_EQ(a.code, 0) << a.output;
  ASSERT_EQ(b.code, 0) << b.output;
  const fs::path broken_run = dir / "broken";
  for (const auto& entry : fs::directory_iterator(broken_run / "ckpt"))
    if (entry.path().filename().string().find("step_00000003") == std::string::npos) fs::remove(entry.path());
  auto r = run_spread("train --resume " + broken_run.string());
  ASSERT_EQ(r.code, 0) << r.output;
  const auto la = logged(dir / "straight", "loss"), lb = logged(broken_run, "loss");
  ASSERT_EQ(la.size(), 6u);
  ASSERT_EQ(lb.size(), 6u);
  for (size_t i = 0; i < la.size(); ++i) EXPECT_EQ(la[i], lb[i]) << "step " << i + 1;
}

}  // namespace

// GPT-2's vocabulary: the run's train.bin holds the reference's ids of the training text, resume, generate and
// export work from the run directory alone, and the exported tokenizer.json is the run's copy, byte for byte.
TEST(HfRun, LmOnGpt2VocabularyTrainsOnTheReferencesIdsAndResumes) {
  SHARED_DATA_OR_SKIP(vocabularies, "tokenizers");
  std::string why;
  const std::string python = reference_python({"tokenizers", "transformers"}, &why);
  if (python.empty()) GTEST_SKIP() << why;
  auto dir = fresh_temp_dir("hf_lm");
  // One line without "\n": the train split (data/corpus.h: the first 90% of the bytes) is then one reference line.
  std::string text;
  for (int i = 0; i < 60; ++i) text += corpus_line(i);
  std::ofstream(dir / "corpus.txt") << text;
  const auto straight = write_recipe(dir, "straight", "lm", kGpt2, dir / "corpus.txt", 6);
  const auto broken = write_recipe(dir, "broken", "lm", kGpt2, dir / "corpus.txt", 6);
  expect_resume_matches(dir, straight, broken);
  const fs::path run = dir / "straight";
  EXPECT_TRUE(fs::exists(run / "tokenizer.hf.json"));
  const auto meta = nlohmann::json::parse(file_bytes(run / "tokenizer.json"));
  EXPECT_EQ(meta["kind"], "hf");
  EXPECT_EQ(meta["vocab_size"], 50257);

  spread::DataConfig data;
  data.source = "text";
  data.path = {(dir / "corpus.txt").string()};
  const auto corpus = spread::load_corpus(data, "test.toml");
  std::ofstream(dir / "train_text.txt") << corpus.train << "\n";
  const auto want = reference_ids(python, kGpt2, dir / "train_text.txt", false, dir);
  ASSERT_EQ(want.size(), 1u);
  spread::TokenFile train((run / "train.bin").string());
  std::vector<int32_t> got;
  for (uint64_t i = 0; i < train.size(); ++i) got.push_back(train[i]);
  EXPECT_EQ(got, want[0]);

  auto g = run_spread("generate --run " + run.string() + " --prompt 'The Caf\xc3\xa9' --max-new-tokens 5 --seed 1");
  EXPECT_EQ(g.code, 0) << g.output;
  EXPECT_EQ(g.output.rfind("The Caf\xc3\xa9", 0), 0u) << g.output;
  auto e = run_spread("export --run " + run.string() + " --out " + (dir / "hf").string());
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_EQ(file_bytes(dir / "hf" / "tokenizer.json"), file_bytes(run / "tokenizer.hf.json"));
  fs::remove_all(dir);
}

// BERT's vocabulary: the MLM uses BERT's own [PAD] [CLS] [SEP] [MASK] (0 101 102 103) instead of appending six ids,
// the run's tokenizer gives the reference's ids without the post-processor and without the file's truncation
// (max_length 256), and the export writes BERT's tokenizer.json as it is.
TEST(HfRun, MlmOnBertVocabularyUsesBertsSpecialIdsAndResumes) {
  SHARED_DATA_OR_SKIP(vocabularies, "tokenizers");
  std::string why;
  const std::string python = reference_python({"tokenizers", "transformers"}, &why);
  if (python.empty()) GTEST_SKIP() << why;
  auto dir = fresh_temp_dir("hf_mlm");
  {
    std::ofstream corpus(dir / "docs.txt");
    for (int i = 0; i < 80; ++i) corpus << corpus_line(i) << "\n";
  }
  const auto straight = write_recipe(dir, "straight", "mlm", kBert, dir / "docs.txt", 6);
  const auto broken = write_recipe(dir, "broken", "mlm", kBert, dir / "docs.txt", 6);
  expect_resume_matches(dir, straight, broken);
  const fs::path run = dir / "straight";
  EXPECT_EQ(nlohmann::json::parse(file_bytes(run / "tokenizer.json"))["vocab_size"], 30522);
  const auto tokenizer = spread::load_tokenizer(run.string());
  const auto s = tokenizer->special_ids();
  EXPECT_EQ(std::vector<int32_t>({s.pad, s.cls, s.sep, s.mask}), std::vector<int32_t>({0, 101, 102, 103}));
  EXPECT_FALSE(s.has_markers());

  {
    std::ofstream lines(dir / "lines.txt");
    lines << corpus_line(3) << "\n\nHello, WORLD!\n";
    for (int i = 0; i < 300; ++i) lines << "word" << i << " ";  // longer than the file's truncation
    lines << "\n";
  }
  auto t = run_spread("tokenize --tokenizer " + run.string() + " --in " + (dir / "lines.txt").string() + " --out " +
                      (dir / "ids.jsonl").string());
  ASSERT_EQ(t.code, 0) << t.output;
  const auto want = bare_reference_ids(python, kBert, dir / "lines.txt", dir);
  EXPECT_EQ(jsonl_ids(dir / "ids.jsonl"), want);
  ASSERT_EQ(want.size(), 4u);
  EXPECT_GT(want[3].size(), 256u);

  auto e = run_spread("export --run " + run.string() + " --out " + (dir / "hf").string());
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_EQ(file_bytes(dir / "hf" / "tokenizer.json"), file_bytes(kBert));
  const auto config = nlohmann::json::parse(file_bytes(dir / "hf" / "tokenizer_config.json"));
  EXPECT_EQ(config["mask_token"], "[MASK]");
  EXPECT_FALSE(config.contains("unk_token") && config["unk_token"] == "<unk>");
  fs::remove_all(dir);
}

// `spread tokenize` with the Hugging Face files themselves, post-processor on and off, against the reference (BERT's
// tokenizer.json pads a batch to its longest line: the file is the batch).
TEST(TokenizeCli, GivesTheReferencesIdsForBertAndGpt2) {
  SHARED_DATA_OR_SKIP(vocabularies, "tokenizers");
  std::string why;
  const std::string python = reference_python({"tokenizers", "transformers"}, &why);
  if (python.empty()) GTEST_SKIP() << why;
  auto dir = fresh_temp_dir("tokenize_ref");
  {
    std::ofstream lines(dir / "lines.txt");
    for (int i = 0; i < 20; ++i) lines << corpus_line(i) << (i % 4 ? "" : " and some more words") << "\n";
    lines << "\n  leading spaces\tand a tab\n";
  }
  for (const auto& [tokenizer, special] : std::vector<std::pair<std::string, bool>>{
           {kBert, true}, {kBert, false}, {kTokenizers + "/bert-base-uncased/vocab.txt", true}, {kGpt2, true}}) {
    const std::string out = (dir / "ids.jsonl").string();
    auto r = run_spread("tokenize --tokenizer " + tokenizer + " --in " + (dir / "lines.txt").string() + " --out " +
                        out + (special ? "" : " --no-special"));
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_EQ(jsonl_ids(out), reference_ids(python, tokenizer, dir / "lines.txt", special, dir)) << tokenizer;
  }
  fs::remove_all(dir);
}

// A run directory's own tokenizer (here char: one id per character, in code point order, counted by hand).
TEST(TokenizeCli, RunDirectoryUsesTheRunsTokenizerAndDecodes) {
  auto dir = fresh_temp_dir("tokenize_run");
  spread::make_char_tokenizer("abc \n")->save((dir / "run").string());  // ids: \n 0, ' ' 1, a 2, b 3, c 4
  std::ofstream(dir / "in.txt") << "abc\n\ncab a\n";
  auto r = run_spread("tokenize --tokenizer " + (dir / "run").string() + " --in " + (dir / "in.txt").string() +
                      " --out " + (dir / "ids.jsonl").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(file_bytes(dir / "ids.jsonl"), "[2, 3, 4]\n[]\n[4, 2, 3, 1, 2]\n");
  auto d = run_spread("tokenize --decode --tokenizer " + (dir / "run").string() + " --in " +
                      (dir / "ids.jsonl").string());
  ASSERT_EQ(d.code, 0) << d.output;
  EXPECT_NE(d.output.find("\"abc\"\n\"\"\n\"cab a\"\n"), std::string::npos) << d.output;
  fs::remove_all(dir);
}

// Bad input is one line naming the file and line (exit 2), and an existing output file is left as it was.
TEST(TokenizeCli, BadInputNamesTheFileAndLineAndKeepsTheOldOutput) {
  auto dir = fresh_temp_dir("tokenize_bad");
  spread::make_char_tokenizer("abc \n")->save((dir / "run").string());
  const std::string tok = " --tokenizer " + (dir / "run").string();
  std::ofstream(dir / "out.jsonl") << "old\n";
  std::ofstream(dir / "utf8.txt") << "abc\nab\ncab\xff\n";
  auto r = run_spread("tokenize" + tok + " --in " + (dir / "utf8.txt").string() + " --out " +
                      (dir / "out.jsonl").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("utf8.txt:3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("invalid UTF-8"), std::string::npos) << r.output;
  EXPECT_EQ(file_bytes(dir / "out.jsonl"), "old\n");
  std::ofstream(dir / "ids.txt") << "[2, 3]\n[2, \"x\"]\n";
  r = run_spread("tokenize --decode" + tok + " --in " + (dir / "ids.txt").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("ids.txt:2"), std::string::npos) << r.output;
  std::ofstream(dir / "range.txt") << "[2, 99]\n";
  r = run_spread("tokenize --decode" + tok + " --in " + (dir / "range.txt").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("range.txt:1"), std::string::npos) << r.output;
  // An unwritable output fails before the work, naming --out.
  r = run_spread("tokenize" + tok + " --in " + (dir / "ids.txt").string() + " --out " +
                 (dir / "missing" / "o.jsonl").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--out"), std::string::npos) << r.output;
  EXPECT_EQ(run_spread("tokenize --in " + (dir / "ids.txt").string()).code, 2);
  EXPECT_EQ(run_spread("tokenize --help").code, 0);
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos);
  fs::remove_all(dir);
}

// ColBERT markers the vocabulary lacks are added to it as the reference's add_tokens adds them (PyLate's way):
// the same added_tokens entries (ids 30522 and 30523, not special, normalized) as `tokenizers` writes, the same ids
// for texts that hold them, and a run's saved copy loads with the same ids, adding nothing again.
TEST(HfRunTokenizer, MarkersAreAddedAsTheLibraryAddsTokens) {
  if (!fs::exists(kBert)) GTEST_SKIP() << spread::testing::shared_data_missing("tokenizers");
  std::string why;
  const std::string python = reference_python({"tokenizers"}, &why);
  if (python.empty()) GTEST_SKIP() << why;
  const fs::path dir = fresh_temp_dir("hf_markers");
  spread::TokenizerSpec spec;
  spec.kind = "hf", spec.hf_path = kBert, spec.query_marker = "[Q] ", spec.document_marker = "[D] ";
  const auto tokenizer = spread::build_tokenizer(spec, "", dir.string());
  tokenizer->save(dir.string());
  const fs::path script = dir / "add.py", ref = dir / "ref.json";
  std::ofstream(script) << "import sys\nfrom tokenizers import Tokenizer\nt = Tokenizer.from_file(sys.argv[1])\n"
                           "t.add_tokens(['[Q] ', '[D] '])\nt.save(sys.argv[2])\n";
  const std::string cmd = "'" + python + "' " + script.string() + " " + kBert + " " + ref.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto added = [](const fs::path& p) { return nlohmann::json::parse(file_bytes(p)).at("added_tokens"); };
  EXPECT_EQ(added(dir / "tokenizer.hf.json"), added(ref));
  const auto s = tokenizer->special_ids();
  EXPECT_EQ(s.query, 30522);
  EXPECT_EQ(s.document, 30523);
  EXPECT_EQ(tokenizer->vocab_size(), 30524);
  std::ofstream(dir / "lines.txt") << "who plays [Q] the guitar?\n[D] a document [D] \n[q] lower case, [Q]x\n";
  const auto want = bare_reference_ids(python, ref.string(), dir / "lines.txt", dir);
  std::vector<std::vector<int32_t>> got;
  for (const std::string line : {"who plays [Q] the guitar?", "[D] a document [D] ", "[q] lower case, [Q]x"})
    got.push_back(tokenizer->encode(line));
  EXPECT_EQ(got, want);
  const auto reloaded = spread::load_tokenizer(dir.string());
  EXPECT_EQ(reloaded->vocab_size(), 30524);
  EXPECT_EQ(reloaded->special_ids().query, 30522);
  EXPECT_EQ(reloaded->special_ids().document, 30523);
  EXPECT_EQ(reloaded->encode("who plays [Q] the guitar?"), want[0]);
  fs::remove_all(dir);
}

// The recipe refuses what kind hf cannot do, naming the key.
TEST(HfRecipe, RefusesAMissingPathAPathWithoutHfAndMaxsim) {
  const auto error_of = [](std::vector<std::string> overrides) {
    try {
      spread::parse_recipe("", "r.toml", overrides);
    } catch (const spread::UserError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of({"tokenizer.kind=hf"}).find("tokenizer.path"), std::string::npos);
  EXPECT_NE(error_of({"tokenizer.path=" + kBert}).find("tokenizer.path"), std::string::npos);
  EXPECT_NE(error_of({"tokenizer.kind=hf", "tokenizer.path=" + kBert, "train.objective=maxsim", "data.source=sick",
                      "data.path=x", "model.causal=false", "model.block_size=256"}).find("[Q]"), std::string::npos);
  EXPECT_EQ(error_of({"tokenizer.kind=hf", "tokenizer.path=" + kBert}), "");
  // maxsim with two entries of the vocabulary as markers (ColBERT's [unused0] [unused1]); markers go together
  // and need kind hf.
  const std::vector<std::string> maxsim = {"tokenizer.kind=hf", "tokenizer.path=" + kBert, "train.objective=maxsim",
                                           "data.source=sick", "data.path=x", "model.causal=false",
                                           "model.block_size=256"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), maxsim.begin(), maxsim.end());
    return error_of(more);
  };
  EXPECT_EQ(with({"tokenizer.query_marker=[unused0]", "tokenizer.document_marker=[unused1]"}), "");
  EXPECT_NE(with({"tokenizer.query_marker=[unused0]"}).find("tokenizer.document_marker"), std::string::npos);
  EXPECT_NE(error_of({"tokenizer.query_marker=[unused0]", "tokenizer.document_marker=[unused1]"})
                .find("tokenizer.query_marker"), std::string::npos);
  EXPECT_NE(with({"tokenizer.query_marker=[unused0]", "tokenizer.document_marker=[unused1]",
                  "loss.maxsim.skiplist_words=[\".\"]"}).find("loss.maxsim.skiplist = true"), std::string::npos);
  // tokenizer.lowercase (do_lower_case): kind hf only, and not for maxsim (PyLate's folders do not lower-case).
  EXPECT_EQ(error_of({"tokenizer.kind=hf", "tokenizer.path=" + kBert, "tokenizer.lowercase=true"}), "");
  EXPECT_NE(error_of({"tokenizer.lowercase=true"}).find("tokenizer.lowercase"), std::string::npos);
  EXPECT_NE(with({"tokenizer.query_marker=[unused0]", "tokenizer.document_marker=[unused1]",
                  "tokenizer.lowercase=true"}).find("tokenizer.lowercase"), std::string::npos);
}

// The run's tokenizer decides whether texts are lower-cased: its record keeps the flag, and a recipe that says
// otherwise is refused naming tokenizer.lowercase.
TEST(HfRecipe, LowercaseIsKeptWithTheRunsTokenizerAndChecked) {
  if (!fs::exists(kBert)) GTEST_SKIP() << spread::testing::shared_data_missing("tokenizers");
  const fs::path dir = spread::testing::fresh_temp_dir("hf_lowercase");
  spread::TokenizerSpec spec;
  spec.kind = "hf", spec.hf_path = kBert, spec.lowercase = true;
  spread::build_tokenizer(spec, "", dir.string())->save(dir.string());
  const auto loaded = spread::load_tokenizer(dir.string());
  EXPECT_TRUE(loaded->lowercases());
  // ΟΔΟΣ: the final sigma only when lower-cased first (bert-base-uncased's normalizer gives the other one).
  spec.lowercase = false;
  const auto plain = spread::build_tokenizer(spec, "", dir.string());
  EXPECT_NE(loaded->encode("\u039F\u0394\u039F\u03A3"), plain->encode("\u039F\u0394\u039F\u03A3"));
  spread::Recipe recipe = spread::parse_recipe("", "r.toml", {"tokenizer.kind=hf", "tokenizer.path=" + kBert});
  try {
    spread::check_lowercase_matches(recipe, *loaded);
    ADD_FAILURE() << "a recipe without tokenizer.lowercase passed against a lower-casing tokenizer";
  } catch (const spread::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.lowercase"), std::string::npos) << e.what();
  }
  recipe.tokenizer.lowercase = true;
  EXPECT_NO_THROW(spread::check_lowercase_matches(recipe, *loaded));
  EXPECT_THROW(spread::check_lowercase_matches(recipe, *plain), spread::UserError);
  fs::remove_all(dir);
}

// BERT's [PAD] is id 0: MLM's random replacements must come from the whole vocabulary, not from [0, pad).
TEST(HfRecipe, MlmRandomReplacementsUseTheWholeVocabularyWhenPadIsZero) {
  spread::SpecialIds s;
  s.pad = 0, s.cls = 101, s.sep = 102, s.mask = 103, s.ordinary_end = 30522;
  auto ids = torch::full({4, 64}, 5000, torch::kLong);
  auto valid = torch::ones({4, 64}, torch::kBool);
  const auto m = spread::mask_tokens(ids, valid, s, 1.0, 7);
  int64_t replaced = 0;
  auto in = m.inputs.accessor<int64_t, 2>();
  for (int64_t b = 0; b < 4; ++b)
    for (int64_t t = 0; t < 64; ++t) {
      EXPECT_GE(in[b][t], 0);
      EXPECT_LT(in[b][t], 30522);
      if (in[b][t] != 5000 && in[b][t] != 103) ++replaced;
    }
  EXPECT_GT(replaced, 5);  // about 10% of 256
}
