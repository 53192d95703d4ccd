// The spread binary and its readers under bad input and odd run directories, each case a defect found once:
// directories given as files, --set values with commas, a symlink at train.lock, an unwritable
// ckpt/, a 10 MB text line, a bad first JSONL row, errors that must name file and line, a failed fresh start, and
// the small ones. Each test reproduces the defect on the tiny char model of reliability_run.h (a few steps).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "reliability_run.h"
#include "spread/config/recipe.h"
#include "spread/data/pairs.h"
#include "spread/data/special_tokens.h"
#include "spread/data/tokenizer.h"
#include "spread/run/checkpoint.h"
#include "spread/util/error.h"
#include "user_error_message.h"

namespace fs = std::filesystem;
using namespace spread::testing;

namespace {

using spread::testing::user_error_message;

size_t occurrences(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

// A tiny char-level pairs run (contrastive), on a TSV file whose columns are named q and doc.
struct TinyPairsRun : TinyRun {
  fs::path pairs;
  explicit TinyPairsRun(const std::string& name) : TinyRun(name, "max_steps = 2\nckpt_every = 2\n") {
    pairs = dir / "p.tsv";
    std::ofstream p(pairs);
    p << "q\tdoc\n";
    const char* things[] = {"cat", "dog", "bird", "fish", "horse", "child", "man", "woman"};
    for (int i = 0; i < 40; ++i)
      p << "a " << things[i % 8] << " " << i << "\tthe " << things[i % 8] << " " << i << "\n";
  }
  std::string train_pairs(const std::string& extra) const {
    return train("--set train.objective=contrastive --set data.source=pairs --set data.path=" + pairs.string() +
                 " --set model.causal=false " + extra);
  }
};

// Exit code and peak resident memory (MiB) of `spread args`, output discarded; the child is waited for alone, so
// no other process of the test counts.
std::pair<int, double> run_measuring_memory(const std::string& args) {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string cmd = "exec env " + spread_command(args) + " > /dev/null 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, double(usage.ru_maxrss) / 1024.0};  // ru_maxrss is in KiB
}

spread::Recipe recipe_of(const std::string& toml) { return spread::parse_recipe(toml, "r.toml", {}); }

const char* kEncoderRecipe =
    "[data]\nsource = \"text\"\npath = \"c.txt\"\n[model]\ncausal = false\n[train]\nobjective = \"mlm\"\n";

}  // namespace

// --- 3: a directory where a file is expected ---------------------------------------------------------------------

TEST(InputFiles, ADirectoryGivenAsAFileIsRefusedNamingIt) {
  TinyRun t("dir_as_file");
  ASSERT_EQ(run(t.train()).code, 0);
  const fs::path folder = t.dir / "a_folder";
  fs::create_directories(folder);
  const std::string on_run = " --run " + t.run_dir.string();
  // `timeout`, and the scratch folder as working directory: a recipe read as empty trains the defaults, for long.
  Result recipe = shell("cd " + t.dir.string() + " && timeout 20 env " + spread_command("train " + folder.string()));
  EXPECT_EQ(recipe.code, 2) << recipe.output;
  EXPECT_TRUE(contains(recipe.output, folder.string()) && contains(recipe.output, "directory")) << recipe.output;
  const std::string out = " --out " + (t.dir / "e.npy").string();
  for (const std::string& args : {"encode" + on_run + " --in " + folder.string() + out,
                                  "eval" + on_run + " --sts " + folder.string(),
                                  "diagnose" + on_run + " --texts " + folder.string()}) {
    Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.output;
    EXPECT_TRUE(contains(r.output, folder.string() + ": ") && contains(r.output, "is a directory"))
        << args << ": " << r.output;
  }
  EXPECT_FALSE(fs::exists(t.dir / "e.npy"));
}

// --- 4: --set values with commas ---------------------------------------------------------------------------------

TEST(SetOverrides, ValuesWithCommasReachTheRecipeWhole) {
  TinyRun t("set_commas", "max_steps = 2\nckpt_every = 2\n");
  Result lm = run(t.train("--set loss.dispersion.enabled=true --set 'loss.dispersion.layers=[0,1]' "
                          "--set 'loss.contrastive.matryoshka_dims=[16,32]'"));
  ASSERT_EQ(lm.code, 0) << lm.output;
  const spread::Recipe saved = spread::load_recipe((t.run_dir / "recipe.toml").string());
  EXPECT_EQ(saved.loss.dispersion.layers, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(saved.loss.contrastive.matryoshka_dims, (std::vector<int64_t>{16, 32}));

  TinyPairsRun p("set_columns");
  Result pairs = run(p.train_pairs("--set 'data.columns=[q,doc]'"));
  ASSERT_EQ(pairs.code, 0) << pairs.output;
  EXPECT_EQ(spread::load_recipe((p.run_dir / "recipe.toml").string()).data.columns,
            (std::vector<std::string>{"q", "doc"}));
}

// --- 8: train.lock is never written through a symlink -----------------------------------------------------------

TEST(LockFile, ASymlinkAtTrainLockIsRefusedAndItsTargetKept) {
  TinyRun t("lock_link");
  ASSERT_EQ(run(t.train()).code, 0);
  const fs::path victim = t.dir / "precious.txt", lock = t.run_dir / "train.lock";
  std::ofstream(victim) << "precious\n";
  fs::remove(lock);
  fs::create_symlink(victim, lock);
  Result r = run(t.resume("--set train.max_steps=12"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, lock.string())) << r.output;
  EXPECT_EQ(read_text(victim), "precious\n");
  EXPECT_TRUE(fs::is_symlink(lock));
  EXPECT_EQ(newest_step(t.run_dir), 10);
}

// --- 9: output directories are checked before the first step ----------------------------------------------------

TEST(OutputDirs, AnUnwritableCheckpointDirectoryIsFoundBeforeTheFirstStep) {
  TinyRun t("ckpt_ro");
  fs::create_directories(t.run_dir);
  // sysfs lets nobody create a file in it, root included: it stands in for a read-only ckpt/.
  fs::create_directory_symlink("/sys/kernel", t.run_dir / "ckpt");
  Result r = run(t.train());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, (t.run_dir / "ckpt").string())) << r.output;
  EXPECT_FALSE(contains(r.output, "step 1/")) << r.output;
}

// --- 10: a very long line costs memory for what is kept, not its length ------------------------------------------

TEST(LongLines, EncodersKeepTheIdsOfTheWholeTextsPrefix) {
  // Reference: the whole text encoded, cut to max_length - 2 and framed by hand.
  std::string text;
  for (int i = 0; text.size() < 300000; ++i) text += "to be or not to be, that is question " + std::to_string(i) + " ";
  const std::string scratch = (fs::temp_directory_path() / ("spread_long_" + std::to_string(::getpid()))).string();
  fs::create_directories(scratch);
  std::vector<std::shared_ptr<spread::Tokenizer>> tokenizers = {
      spread::with_special_tokens(spread::make_char_tokenizer(text)),
      spread::with_special_tokens(spread::train_sentencepiece("bpe", 320, text.substr(0, 20000), scratch))};
  fs::remove_all(scratch);
  for (const auto& tokenizer : tokenizers) {
    for (int64_t max_length : {3, 64, 4000}) {
      std::vector<int32_t> expected = tokenizer->encode(text);
      expected.resize(size_t(max_length - 2));
      expected.insert(expected.begin(), tokenizer->special_ids().cls);
      expected.push_back(tokenizer->special_ids().sep);
      EXPECT_EQ(spread::encode_for_encoder(*tokenizer, text, max_length), expected)
          << tokenizer->kind() << ", max_length " << max_length;
    }
  }
}

TEST(LongLines, ATenMegabyteLineDoesNotCostMemoryForItsLength) {
  TinyRun t("long_line", "max_steps = 2\nckpt_every = 2\n");
  ASSERT_EQ(run(t.train("--set tokenizer.kind=bpe --set tokenizer.vocab_size=300")).code, 0);
  const fs::path short_file = t.dir / "short.txt", long_file = t.dir / "long.txt";
  std::ofstream(short_file) << "to be or not to be\n";
  {
    std::ofstream out(long_file);
    std::string line;
    while (line.size() < 10'000'000) line += "to be or not to be, that is the question ";
    out << line << "\n";
  }
  const std::string encode = "encode --run " + t.run_dir.string() + " --out " + (t.dir / "e.npy").string() + " --in ";
  const auto [short_code, short_mib] = run_measuring_memory(encode + short_file.string());
  const auto [long_code, long_mib] = run_measuring_memory(encode + long_file.string());
  ASSERT_EQ(short_code, 0);
  ASSERT_EQ(long_code, 0);
  std::printf("peak RSS of encode: %.0f MiB for one short line, %.0f MiB for one 10 MB line\n", short_mib, long_mib);
  // The line itself is read whole (10 MB, a few copies); tokenizing all of it cost 1.6 GB.
  EXPECT_LT(long_mib - short_mib, 150) << short_mib << " MiB, then " << long_mib << " MiB";
}

// --- 12: a bad first JSONL row is one bad row -------------------------------------------------------------------

TEST(JsonlPairs, ABadFirstRowIsSkippedAndCountedOrNamedWhenStrict) {
  const fs::path file = fs::temp_directory_path() / ("spread_first_row_" + std::to_string(::getpid()) + ".jsonl");
  {
    std::ofstream out(file);
    out << "{\"anchor\": \"only an anchor\"}\n";
    for (int i = 0; i < 20; ++i) out << "{\"anchor\": \"a " << i << "\", \"positive\": \"p " << i << "\"}\n";
  }
  spread::PairSourceSpec spec;
  spec.paths = {file.string()};
  spec.recipe_file = "r.toml";
  spread::PairSet set;
  ASSERT_EQ(user_error_message([&] { set = spread::load_pairs(spec); }), "");
  EXPECT_EQ(set.bad_rows, 1);
  EXPECT_EQ(set.train.size() + set.val.size(), 20u);
  ASSERT_EQ(set.bad_row_messages.size(), 1u);
  EXPECT_TRUE(contains(set.bad_row_messages[0], file.string() + ":1: ")) << set.bad_row_messages[0];
  spec.strict = true;
  const std::string strict = user_error_message([&] { spread::load_pairs(spec); });
  EXPECT_TRUE(contains(strict, file.string() + ":1: ") && contains(strict, "positive")) << strict;
  fs::remove(file);
}

TEST(JsonlPairs, ANulByteInAPairIsABadRowNamingFileAndLine) {
  const fs::path file = fs::temp_directory_path() / ("spread_nul_pairs_" + std::to_string(::getpid()) + ".tsv");
  {
    std::ofstream out(file, std::ios::binary);
    out << "anchor\tpositive\n" << std::string("a \0 b\tp\n", 8);
    for (int i = 0; i < 10; ++i) out << "a " << i << "\tp " << i << "\n";
  }
  spread::PairSourceSpec spec;
  spec.paths = {file.string()};
  const spread::PairSet set = spread::load_pairs(spec);
  EXPECT_EQ(set.bad_rows, 1);
  ASSERT_FALSE(set.bad_row_messages.empty());
  EXPECT_TRUE(contains(set.bad_row_messages[0], file.string() + ":2: ") && contains(set.bad_row_messages[0], "NUL"))
      << set.bad_row_messages[0];
  fs::remove(file);
}

// --- 13 and 18: errors in texts name the file and line ----------------------------------------------------------

TEST(InputErrors, InvalidUtf8AndNulBytesInEncodeInputNameFileAndLine) {
  TinyRun t("encode_bytes");
  ASSERT_EQ(run(t.train()).code, 0);
  const fs::path bad_utf8 = t.dir / "utf8.txt", nul = t.dir / "nul.txt";
  std::ofstream(bad_utf8) << "to be\nor \xff not\n";
  std::ofstream(nul, std::ios::binary) << std::string("to be\nto be\nor \0 not\n", 21);
  for (const fs::path& in : {bad_utf8, nul}) {
    Result r = run("encode --run " + t.run_dir.string() + " --in " + in.string() + " --out " +
                   (t.dir / "e.npy").string());
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_TRUE(contains(r.output, in.string() + ":" + (in == nul ? "3" : "2") + ": ")) << r.output;
  }
}

TEST(InputErrors, NulBytesInTrainingTextNameFileAndLine) {
  TinyRun t("train_nul");
  std::ofstream(t.corpus, std::ios::app | std::ios::binary) << std::string("fine\nnul \0 here\n", 16);
  Result r = run(t.train());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, t.corpus.string() + ":302")) << r.output;
}

TEST(InputErrors, ACharacterOutsideTheVocabularyInAnStsFileNamesFileLineAndCharacter) {
  TinyRun t("sts_char");
  ASSERT_EQ(run(t.train()).code, 0);
  const fs::path sts = t.dir / "sts.csv";
  std::ofstream(sts) << "to be,or not,3.0\nto be,the \xce\xb6 question,1.0\nnot to be,to be,4.5\n";  // U+03B6
  Result r = run("eval --run " + t.run_dir.string() + " --sts " + sts.string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, sts.string() + ":2: ") && contains(r.output, "U+03B6")) << r.output;
}

// --- 15: a failed fresh start leaves no half-made run ------------------------------------------------------------

TEST(FailedStart, AFreshStartThatFailsRemovesWhatItMadeAndOnlyThat) {
  TinyRun t("failed_start");
  // Longer than the validation split: refused after the tokenizer and token files are written.
  const std::string too_long = "--set model.block_size=4096";
  Result fresh = run(t.train(too_long));
  EXPECT_EQ(fresh.code, 2) << fresh.output;
  EXPECT_FALSE(fs::exists(t.run_dir)) << fresh.output;

  fs::create_directories(t.run_dir);
  std::ofstream(t.run_dir / "notes.txt") << "mine\n";
  Result into_existing = run(t.train(too_long));
  EXPECT_EQ(into_existing.code, 2) << into_existing.output;
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(t.run_dir)) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"notes.txt"});
  EXPECT_EQ(read_text(t.run_dir / "notes.txt"), "mine\n");

  fs::remove_all(t.run_dir);
  ASSERT_EQ(run(t.train()).code, 0);
  const std::string recipe_before = read_text(t.run_dir / "recipe.toml");
  Result over_a_run = run(t.train(too_long));  // refused: the directory holds checkpoints
  EXPECT_EQ(over_a_run.code, 2) << over_a_run.output;
  EXPECT_EQ(read_text(t.run_dir / "recipe.toml"), recipe_before);
  EXPECT_TRUE(fs::exists(t.run_dir / "train.lock") && fs::exists(t.run_dir / "metrics.jsonl"));
  EXPECT_EQ(newest_step(t.run_dir), 10);
}

// --- 18: the small ones -----------------------------------------------------------------------------------------

TEST(SmallInputs, ABlankRunNameIsRefused) {
  for (const char* name : {" ", "  ", "\\t"}) {
    const std::string message = user_error_message(
        [&] { recipe_of(std::string("[run]\nname = \"") + name + "\"\n[data]\npath = \"c.txt\"\n"); });
    EXPECT_TRUE(contains(message, "run.name")) << "'" << name << "': " << message;
  }
  EXPECT_EQ(user_error_message([] { recipe_of("[run]\nname = \"a b\"\n[data]\npath = \"c.txt\"\n"); }), "");
}

TEST(SmallInputs, AnEncoderMaxLengthBelowThreeIsRefusedWithTheMinimum) {
  for (int length : {1, 2}) {
    const std::string message = user_error_message([&] {
      spread::parse_recipe(kEncoderRecipe, "r.toml", {"data.max_length=" + std::to_string(length)});
    });
    EXPECT_TRUE(contains(message, "data.max_length") && contains(message, "at least 3")) << length << ": " << message;
  }
  for (const char* fine : {"data.max_length=3", "data.max_length=0"})
    EXPECT_EQ(user_error_message([&] { spread::parse_recipe(kEncoderRecipe, "r.toml", {fine}); }), "") << fine;
}

TEST(SmallInputs, AWrongWordnetPairsPathSaysThePathDoesNotExist) {
  spread::PairSourceSpec spec;
  spec.source = "wordnet_pairs";
  spec.paths = {"/nonexistent/wordnet"};
  spec.recipe_file = "r.toml";
  const std::string message = user_error_message([&] { spread::load_pairs(spec); });
  EXPECT_TRUE(contains(message, "/nonexistent/wordnet") && contains(message, "does not exist")) << message;
  EXPECT_FALSE(contains(message, "not installed")) << message;
}

TEST(SmallInputs, NoPreviousCheckpointIsPromisedWhenNoneRemains) {
  TinyRun t("no_previous");
  ASSERT_EQ(run(t.train()).code, 0);
  const auto files = spread::list_checkpoints(t.run_dir.string());
  ASSERT_EQ(files.size(), 2u);
  for (const auto& f : files) fs::resize_file(f, fs::file_size(f) / 2);
  Result r = run("eval --run " + t.run_dir.string());
  EXPECT_EQ(r.code, 2) << r.output;
  // One warning per damaged file; only the newer has a previous checkpoint to fall back on.
  EXPECT_EQ(occurrences(r.output, "using the previous checkpoint"), 1u) << r.output;
  const size_t oldest = r.output.find(files.back());
  ASSERT_NE(oldest, std::string::npos) << r.output;
  const std::string oldest_line = r.output.substr(oldest, r.output.find('\n', oldest) - oldest);
  // (The message after the path: the temporary folder's own name holds the word.)
  const std::string message = oldest_line.substr(files.back().size());
  EXPECT_FALSE(contains(message, "previous")) << oldest_line;
  EXPECT_TRUE(contains(message, "no older checkpoint is left")) << oldest_line;
}
