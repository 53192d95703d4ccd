// The spread binary under misuse and accidents: two trainers on one run, kill -9, signals, divergence,
// bad options and arguments, paths that cannot be written, files changed under a run. Each test reproduces one
// defect on a tiny char model (1 layer, width 32, block 32, batch 4, one thread) and checks the promise instead.
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "reliability_run.h"
#include "spread/data/npy.h"
#include "spread/log/metrics_log.h"
#include "spread/run/checkpoint.h"

namespace fs = std::filesystem;

using namespace spread::testing;

namespace {

// A run that trains until it is stopped, checkpointing every 10 steps.
const char* kEndless = "max_steps = 100000000\nckpt_every = 10\n";

// The reported divergence, reproduced: AdamW with no second-moment memory and lr 10 makes the weights NaN within a few steps.
const char* kDiverging = "--set train.lr=10 --set train.eps=1e-30 --set train.beta2=0 --set train.grad_clip=0 "
                         "--set train.warmup_steps=0 --set train.min_lr=0";

}  // namespace

// --- 1: one trainer per run directory ---------------------------------------------------------------------------

TEST(RunLock, SecondTrainerAndResumeOnALiveRunAreRefusedWhileReadersWork) {
  TinyRun t("concurrent", kEndless);
  Background a(t.train(), t.dir / "a.log");
  ASSERT_TRUE(wait_for([&] { return contains(read_text(t.dir / "a.log"), "starting"); })) << read_text(t.dir / "a.log");
  const std::string holder = "pid " + std::to_string(a.pid());
  Result fresh = run(t.train("--set train.max_steps=30"));
  EXPECT_EQ(fresh.code, 2) << fresh.output;
  EXPECT_TRUE(contains(fresh.output, t.run_dir.string())) << fresh.output;
  EXPECT_TRUE(contains(fresh.output, holder)) << fresh.output;

  ASSERT_TRUE(wait_for([&] { return newest_step(t.run_dir) >= 10; }));
  Result resumed = run(t.resume("--set train.max_steps=30"));
  EXPECT_EQ(resumed.code, 2) << resumed.output;
  EXPECT_TRUE(contains(resumed.output, holder)) << resumed.output;
  EXPECT_EQ(events(t.run_dir).front(), "start");  // the live run's log was not cut back

  const std::string run_dir = t.run_dir.string();
  EXPECT_EQ(run("eval --run " + run_dir + " --max-batches 1").code, 0);
  EXPECT_EQ(run("generate --run " + run_dir + " --max-new-tokens 5").code, 0);
  EXPECT_EQ(run("compare " + run_dir).code, 0);
  EXPECT_EQ(run("report " + run_dir + " --out " + (t.dir / "r.html").string()).code, 0);
  std::ofstream(t.dir / "texts.txt") << "to be\nor not\n";
  EXPECT_EQ(run("diagnose --run " + run_dir + " --texts " + (t.dir / "texts.txt").string()).code, 0);
  EXPECT_TRUE(a.running()) << read_text(t.dir / "a.log");
}

TEST(RunLock, KillNineOfTheHolderLeavesNoStaleLock) {
  TinyRun t("kill9", kEndless);
  {
    Background a(t.train(), t.dir / "a.log");
    ASSERT_TRUE(wait_for([&] { return newest_step(t.run_dir) >= 10; })) << read_text(t.dir / "a.log");
    ::kill(a.pid(), SIGKILL);
    a.wait();
  }
  const int64_t step = newest_step(t.run_dir);
  Result r = run(t.resume("--set train.max_steps=" + std::to_string(step + 3)));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(newest_step(t.run_dir), step + 3);
}

// --- 2: numeric options -----------------------------------------------------------------------------------------

TEST(Options, NumbersOutOfRangeNameTheOption) {
  TinyRun t("ranges");
  ASSERT_EQ(run(t.train()).code, 0);
  const std::string on_run = " --run " + t.run_dir.string();
  const std::vector<std::pair<std::string, std::string>> cases = {  // command, option: value
      {"eval" + on_run, "--batch-size 0"},          {"eval" + on_run, "--batch-size -1"},
      {"eval" + on_run, "--max-batches -1"},        {"generate" + on_run, "--temperature -0.5"},
      {"generate" + on_run, "--top-k -3"},          {"generate" + on_run, "--seed -1"},
      {"diagnose --token-lists " + t.dir.string(), "--threads -2"},
      {"report " + t.run_dir.string(), "--max-points 0"}};
  for (const auto& [command, option] : cases) {
    Result r = run(command + " " + option);
    EXPECT_EQ(r.code, 2) << option << ": " << r.output;
    EXPECT_TRUE(contains(r.output, option.substr(0, option.find(' ')) + ":")) << option << ": " << r.output;
  }
}

TEST(Options, GenerateCapsMaxNewTokens) {
  TinyRun t("cap");
  ASSERT_EQ(run(t.train()).code, 0);
  // `timeout`: without the cap this runs for hours.
  Result r = shell("timeout 60 env " + spread_command("generate --run " + t.run_dir.string() +
                                                     " --max-new-tokens 1000000000"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "--max-new-tokens")) << r.output;
}

// --- 3, 5: paths ------------------------------------------------------------------------------------------------

TEST(Paths, UnwritableRunDirectoriesAreUserErrorsNamingThePath) {
  TinyRun t("paths");
  std::ofstream(t.dir / "a_file") << "x";
  Result under_file = run(t.train("--set run.out_dir=" + (t.dir / "a_file").string()));
  EXPECT_EQ(under_file.code, 2) << under_file.output;
  EXPECT_TRUE(contains(under_file.output, (t.dir / "a_file").string())) << under_file.output;
  // sysfs lets nobody create a directory at its top, root included: it stands in for a read-only mount.
  Result unwritable = run(t.train("--set run.out_dir=/sys"));
  EXPECT_EQ(unwritable.code, 2) << unwritable.output;
  EXPECT_TRUE(contains(unwritable.output, "/sys/tiny")) << unwritable.output;
  Result long_name = run(t.train("--set run.name=" + std::string(300, 'n')));
  EXPECT_EQ(long_name.code, 2) << long_name.output;
  EXPECT_TRUE(contains(long_name.output, std::string(300, 'n'))) << long_name.output;
}

TEST(Paths, DotAndDotDotAreNoRunNames) {
  TinyRun t("dots");
  fs::create_directories(t.dir / "out");
  for (const char* name : {"..", "."}) {
    Result r = run(t.train("--set run.out_dir=" + (t.dir / "out").string() + " --set run.name=" + name));
    EXPECT_EQ(r.code, 2) << name << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "run.name")) << r.output;
  }
  EXPECT_FALSE(fs::exists(t.dir / "metrics.jsonl"));
  EXPECT_FALSE(fs::exists(t.dir / "out" / "metrics.jsonl"));
}

// --- 4: divergence ----------------------------------------------------------------------------------------------

TEST(Divergence, NoNonFiniteCheckpointAndTheReasonIsLogged) {
  // A checkpoint after every step: the ones written before the weights blew up must be all that is left.
  TinyRun t("nan", "max_steps = 40\nckpt_every = 1\n");
  Result r = run(t.train(kDiverging));
  EXPECT_EQ(r.code, 3) << r.output;
  const auto ev = events(t.run_dir);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.back(), "diverged") << r.output;
  bool has_reason = false;
  for (const auto& j : spread::read_metrics((t.run_dir / "metrics.jsonl").string()))
    has_reason = has_reason || (j.value("event", "") == "diverged" && !j.value("reason", "").empty());
  EXPECT_TRUE(has_reason);
  // Every checkpoint left loads with finite values, and the newest gives a finite loss.
  const auto files = spread::list_checkpoints(t.run_dir.string());
  ASSERT_FALSE(files.empty()) << r.output;
  for (const auto& f : files) EXPECT_FALSE(spread::first_non_finite(spread::read_checkpoint(f)).has_value()) << f;
  Result e = run("eval --json --run " + t.run_dir.string());
  ASSERT_EQ(e.code, 0) << e.output;
  const auto j = nlohmann::json::parse(e.output.substr(e.output.find('{')), nullptr, false);
  EXPECT_TRUE(j.is_object() && j["val_loss"].is_number() && std::isfinite(j["val_loss"].get<double>())) << e.output;
  EXPECT_EQ(run("generate --max-new-tokens 5 --run " + t.run_dir.string()).code, 0);
}

TEST(Divergence, EvalGenerateAndResumeRefuseANonFiniteCheckpoint) {
  TinyRun t("nan_ckpt");
  ASSERT_EQ(run(t.train()).code, 0);
  // As a spread without the check wrote them.
  auto ckpt = spread::read_checkpoint(spread::list_checkpoints(t.run_dir.string()).front());
  ckpt.tensors["model.wte.weight"].fill_(std::numeric_limits<float>::quiet_NaN());
  const std::string file = spread::save_checkpoint(t.run_dir.string(), ckpt, 10);
  for (const std::string& args : {"eval --run " + t.run_dir.string(), "generate --run " + t.run_dir.string(),
                                  t.resume("--set train.max_steps=20")}) {
    Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.output;
    EXPECT_TRUE(contains(r.output, file) && contains(r.output, "NaN")) << args << ": " << r.output;
  }
}

TEST(Divergence, SkippedStepsAreNumberedAsOnTheConsoleAndCompareAndReportSayDiverged) {
  // No checkpoint until the end, so NaN weights reach the following steps, which are skipped.
  TinyRun t("nan_skip", "max_steps = 40\nckpt_every = 0\n");
  Result r = run(t.train(kDiverging));
  EXPECT_EQ(r.code, 3) << r.output;
  std::vector<int64_t> console, logged;
  const std::regex skipped("step (\\d+): loss \\S+ / grad norm \\S+ is not finite");
  for (std::sregex_iterator m(r.output.begin(), r.output.end(), skipped), end; m != end; ++m)
    console.push_back(std::stoll((*m)[1]));
  for (const auto& j : spread::read_metrics((t.run_dir / "metrics.jsonl").string()))
    if (j.value("event", "") == "nan_skip") logged.push_back(j["step"].get<int64_t>());
  ASSERT_FALSE(console.empty()) << r.output;
  EXPECT_EQ(logged, console);
  Result c = run("compare " + t.run_dir.string());
  EXPECT_TRUE(contains(c.output, "diverged")) << c.output;
  Result h = run("report " + t.run_dir.string() + " --out " + (t.dir / "r.html").string());
  EXPECT_TRUE(contains(read_text(t.dir / "r.html"), "diverged")) << h.output;
}

TEST(Divergence, PerplexityOfAHugeLossIsPrintedShort) {
  TinyRun t("ppl");
  ASSERT_EQ(run(t.train()).code, 0);
  auto ckpt = spread::read_checkpoint(spread::list_checkpoints(t.run_dir.string()).front());
  ckpt.tensors["model.wte.weight"].mul_(300);  // finite, but the logits become enormous
  spread::save_checkpoint(t.run_dir.string(), ckpt, 10);
  Result e = run("eval --run " + t.run_dir.string());
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_FALSE(std::regex_search(e.output, std::regex("\\d{16}"))) << e.output;
}

// --- 6: signals -------------------------------------------------------------------------------------------------

TEST(Signals, SigintAndSigtermExit128PlusTheSignalAfterTheCheckpoint) {
  for (int sig : {SIGINT, SIGTERM}) {
    TinyRun t("signal" + std::to_string(sig), kEndless);
    Background a(t.train(), t.dir / "a.log");
    ASSERT_TRUE(wait_for([&] { return contains(read_text(t.dir / "a.log"), "step 2/"); }))
        << read_text(t.dir / "a.log");
    ::kill(a.pid(), sig);
    const int status = a.wait();
    ASSERT_TRUE(WIFEXITED(status)) << read_text(t.dir / "a.log");
    EXPECT_EQ(WEXITSTATUS(status), 128 + sig) << read_text(t.dir / "a.log");
    EXPECT_EQ(events(t.run_dir).back(), "interrupted");
    EXPECT_GE(newest_step(t.run_dir), 2);
    Result c = run("compare " + t.run_dir.string());
    EXPECT_TRUE(contains(c.output, "interrupted")) << c.output;
  }
}

// --- 7: generate streams ----------------------------------------------------------------------------------------

TEST(Generate, TextAppearsWhileTokensAreStillBeingSampled) {
  TinyRun t("stream");
  ASSERT_EQ(run(t.train()).code, 0);
  const fs::path out = t.dir / "g.txt";
  Background g("generate --run " + t.run_dir.string() + " --prompt to --max-new-tokens 100000", out);
  // Text beyond the prompt while the process samples, and more of it half a second later. Text printed at the
  // end appears in a burst of buffered writes just before the process exits, which this cannot mistake for it.
  ASSERT_TRUE(wait_for([&] { return read_text(out).size() > 4 || !g.running(); }) && g.running());
  const size_t first = read_text(out).size();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(g.running());
  EXPECT_GT(read_text(out).size(), first);
}

// --- 8: unexpected arguments ------------------------------------------------------------------------------------

TEST(Options, EverySubcommandRejectsAnUnexpectedArgument) {
  TinyRun t("extra");
  ASSERT_EQ(run(t.train()).code, 0);
  const std::string on_run = " --run " + t.run_dir.string();
  const std::string texts = (t.dir / "texts.txt").string();
  std::ofstream(texts) << "to be\nor not\n";
  for (const std::string& args :
       {t.train("--set run.name=other extra"), "eval" + on_run + " extra", "generate" + on_run + " extra",
        "encode" + on_run + " --in " + texts + " --out " + (t.dir / "e.npy").string() + " extra",
        "diagnose" + on_run + " --texts " + texts + " extra"}) {
    Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "'extra'")) << args << ": " << r.output;
  }
  EXPECT_FALSE(fs::exists(t.dir / "other"));
}

// --- 9: files a run depends on ----------------------------------------------------------------------------------

TEST(RunFiles, ResumeRefusesAMissingTokenizerOrAChangedTokenFile) {
  TinyRun t("files");
  ASSERT_EQ(run(t.train()).code, 0);
  {  // as many characters as before, so a rebuilt tokenizer fits the model, but 'q' became 'z': ids shift
    std::ofstream c(t.corpus);
    for (int i = 0; i < 300; ++i) c << "to be or not to be, that is the zuestion " << i % 7 << "\n";
  }
  fs::remove(t.run_dir / "tokenizer.chars");
  Result r = run(t.resume("--set train.max_steps=15"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "tokenizer.chars") && contains(r.output, "restore")) << r.output;
  EXPECT_FALSE(fs::exists(t.run_dir / "tokenizer.chars"));  // not rebuilt from the changed data

  TinyRun u("files2");
  ASSERT_EQ(run(u.train()).code, 0);
  {
    std::ofstream c(u.corpus);
    for (int i = 0; i < 300; ++i) c << "not to be or to be, the question that is " << i % 5 << "\n";
  }
  fs::remove(u.run_dir / "train.bin");
  Result s = run(u.resume("--set train.max_steps=15"));
  EXPECT_EQ(s.code, 2) << s.output;
  EXPECT_TRUE(contains(s.output, "train.bin")) << s.output;
}

// --- 10: diagnose -----------------------------------------------------------------------------------------------

TEST(Diagnose, NonFiniteTokenListsAreAnErrorNamingTheFile) {
  TinyRun t("npy");
  Eigen::MatrixXd a = Eigen::MatrixXd::Random(4, 8), b = Eigen::MatrixXd::Random(5, 8);
  b(2, 3) = std::numeric_limits<double>::quiet_NaN();
  fs::create_directories(t.dir / "lists");
  spread::write_npy_matrix((t.dir / "lists" / "a.npy").string(), a);
  spread::write_npy_matrix((t.dir / "lists" / "b.npy").string(), b);
  Result r = run("diagnose --token-lists " + (t.dir / "lists").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "b.npy")) << r.output;
}

// --- 11: the smaller ones ---------------------------------------------------------------------------------------

TEST(Data, ADirectoryAsDataPathIsCalledADirectory) {
  TinyRun t("dir_path");
  Result r = run(t.train("--set data.path=" + t.dir.string()));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "is a directory")) << r.output;
}

TEST(Data, InvalidUtf8NamesTheFileAndLine) {
  TinyRun t("utf8");
  std::ofstream(t.corpus, std::ios::app) << "fine\nbad \xff byte\n";
  Result r = run(t.train());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, t.corpus.string() + ":302")) << r.output;
}

TEST(Data, AFullDiskLeavesNoTemporaryTokenFile) {
  TinyRun t("full");
  {
    std::ofstream c(t.corpus);  // ~240 KB of text: train.bin (2 bytes a token) outgrows the limit below
    for (int i = 0; i < 6000; ++i) c << "to be or not to be, that is the question " << i % 7 << "\n";
  }
  // A file size limit stands in for a full disk: writes past it fail (EFBIG) once SIGXFSZ is ignored.
  Result r = shell("trap '' XFSZ; ulimit -f 256; exec env " + spread_command(t.train()));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_FALSE(fs::exists(t.run_dir / "train.bin.tmp"));
  EXPECT_FALSE(fs::exists(t.run_dir / "train.bin"));
}

TEST(Checkpoints, AllCorruptIsNotCalledUntrained) {
  TinyRun t("corrupt");
  ASSERT_EQ(run(t.train()).code, 0);
  for (const auto& f : spread::list_checkpoints(t.run_dir.string())) fs::resize_file(f, fs::file_size(f) / 2);
  Result r = run("eval --run " + t.run_dir.string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_FALSE(contains(r.output, "train the run first")) << r.output;
  EXPECT_TRUE(contains(r.output, "intact")) << r.output;
}
