// What spread writes, under accidents: a write error or a kill never leaves a truncated file
// or a temporary folder behind and never costs the previous good output; output paths are checked before the work,
// with the OS's reason; a symbolic link at an output's name is refused, never replaced or written through; an
// existing output is replaced (and --help says so); runs that a command cannot serve are refused with exit 2.
// Two tiny runs (char tokenizer, one layer, width 16, three steps) are trained once and shared by the tests.
#include <gtest/gtest.h>
#include "test_paths.h"
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli_run.h"
#include "spread/data/npy.h"
#include "spread/util/file.h"

namespace fs = std::filesystem;
using spread::testing::CliResult;
using spread::testing::run_spread;

namespace {

const std::string kBeir = std::string(SPREAD_TEST_DATA_DIR) + "/beir_tiny";

// `spread ARGS` through sh after `setup` (a trap or a ulimit), so that a test can make writes fail.
CliResult shell_spread(const std::string& setup, const std::string& args) {
  const std::string cmd = setup + "; SPREAD_BLAS_AUTO=0 " + spread::testing::spread_under_test() + " " + args + " 2>&1";
  CliResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), pipe)) > 0;) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Writes larger than 1 KiB fail with EFBIG instead of killing the process (SIGXFSZ ignored, which exec keeps).
const std::string kSmallFileLimit = "trap '' XFSZ; ulimit -f 2";

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void expect_one_line_error(const CliResult& r, const std::string& what) {
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(r.output.rfind("error: ", 0), 0u) << r.output;
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << r.output;
  EXPECT_NE(r.output.find(what), std::string::npos) << r.output;
}

// A pid that no process has: a child's, after it has exited and been reaped.
pid_t dead_pid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

std::string pairs_recipe(const fs::path& dir, const std::string& name, const std::string& objective, bool causal) {
  return "[run]\nname = \"" + name + "\"\nout_dir = \"" + dir.string() + "\"\nthreads = 1\n" +
         "[data]\nsource = \"pairs\"\npath = \"" + (dir / "pairs.tsv").string() + "\"\n" +
         "[tokenizer]\nkind = \"char\"\n" +
         "[model]\nn_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 64\nhead_dim = 8\ncausal = " +
         (causal ? "true" : "false") + "\n[train]\nobjective = \"" + objective +
         "\"\nbatch_size = 4\nmax_steps = 3\neval_every = 0\nckpt_every = 3\n" +
         "[loss.maxsim]\nquery_length = 16\ndocument_length = 64\n";
}

class ReliabilityOutputs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(spread::testing::fresh_temp_dir("rel_out_runs"));
    std::ofstream pairs(*dir_ / "pairs.tsv");
    pairs << "anchor\tpositive\n";
    const char* words[] = {"cells", "protein", "gene", "virus", "blood", "brain", "drug", "cancer"};
    for (int i = 0; i < 60; ++i)
      pairs << "what does " << words[i % 8] << " " << i << " do\tthe " << words[i % 8] << " number " << i
            << " acts on " << words[(i * 3) % 8] << " in tissue\n";
    pairs.close();
    std::ofstream texts(*dir_ / "texts.txt");
    for (int i = 0; i < 200; ++i) texts << "text number " << i << " about " << words[i % 8] << "\n";
    texts.close();
    for (const auto& [name, objective, causal] : {std::tuple{"causal", "contrastive", true},
                                                  std::tuple{"late", "maxsim", false}}) {
      std::ofstream(*dir_ / (std::string(name) + ".toml")) << pairs_recipe(*dir_, name, objective, causal);
      const auto r = run_spread("train " + (*dir_ / (std::string(name) + ".toml")).string());
      ASSERT_EQ(r.code, 0) << r.output;
    }
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  void SetUp() override {
    out_ = spread::testing::fresh_temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { fs::remove_all(out_); }

  static std::string causal_run() { return (*dir_ / "causal").string(); }  // contrastive, model.causal = true
  static std::string late_run() { return (*dir_ / "late").string(); }      // maxsim
  static std::string texts() { return (*dir_ / "texts.txt").string(); }

  // A 40 x 16 token list as IN/doc.npy, for `spread pool`.
  fs::path token_lists() const {
    fs::create_directories(out_ / "in");
    Eigen::MatrixXd x = Eigen::MatrixXd::Random(40, 16);
    spread::write_npy_matrix((out_ / "in" / "doc.npy").string(), x);
    return out_ / "in";
  }

  static fs::path* dir_;
  fs::path out_;
};

fs::path* ReliabilityOutputs::dir_ = nullptr;

// Item 1: MegatronBert attends both ways, so the export would compute other embeddings than the causal model.
TEST_F(ReliabilityOutputs, ExportRefusesAContrastiveRunTrainedCausal) {
  expect_one_line_error(run_spread("export --run " + causal_run() + " --out " + (out_ / "st").string()),
                        "model.causal");
  EXPECT_FALSE(fs::exists(out_ / "st"));
}

// Item 11.
TEST_F(ReliabilityOutputs, GenerateRefusesEncoderRunsNamingTheirObjective) {
  expect_one_line_error(run_spread("generate --run " + causal_run() + " --max-new-tokens 5"), "\"contrastive\"");
  expect_one_line_error(run_spread("generate --run " + late_run() + " --max-new-tokens 5"), "\"maxsim\"");
}

// Item 6: the previous good file survives a failed write, and no partial or temporary file is left.
TEST_F(ReliabilityOutputs, EncodeKeepsThePreviousOutputWhenTheWriteFails) {
  const auto out = out_ / "e.npy";
  const std::string args = "encode --run " + causal_run() + " --in " + texts() + " --out " + out.string();
  ASSERT_EQ(run_spread(args).code, 0);
  const std::string good = bytes_of(out);
  ASSERT_GT(good.size(), 200u * 16 * 4);
  const auto r = shell_spread(kSmallFileLimit, args + " --no-normalize");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(bytes_of(out), good);
  EXPECT_EQ(names_in(out_), std::vector<std::string>{"e.npy"});
}

TEST_F(ReliabilityOutputs, PoolKeepsThePreviousOutputWhenTheWriteFails) {
  const auto in = token_lists();
  const std::string args = "pool --in " + in.string() + " --out " + (out_ / "p").string() + " --pool-factor ";
  ASSERT_EQ(run_spread(args + "2").code, 0);
  const std::string vectors = bytes_of(out_ / "p" / "doc.npy"), labels = bytes_of(out_ / "p" / "doc.labels.npy");
  const auto r = shell_spread(kSmallFileLimit, args + "1");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(bytes_of(out_ / "p" / "doc.npy"), vectors);
  EXPECT_EQ(bytes_of(out_ / "p" / "doc.labels.npy"), labels);
  EXPECT_EQ(names_in(out_ / "p"), (std::vector<std::string>{"doc.labels.npy", "doc.npy"}));
}

// Pool's outputs go in groups (two syncs for all the files of a group): committed, every file is replaced; given up
// (an error before commit), none is and no temporary is left.
TEST_F(ReliabilityOutputs, AnOutputGroupReplacesAllItsFilesOrNone) {
  const auto a = (out_ / "a.txt").string(), b = (out_ / "b.txt").string();
  std::ofstream(a) << "old a";
  auto text = [](const char* t) { return [t](std::ostream& out) { out << t; }; };
  {
    spread::OutputFileGroup group;
    group.add(a, text("new a"));
    group.add(b, text("new b"));
    EXPECT_EQ(bytes_of(out_ / "a.txt"), "old a");  // nothing replaced before commit
  }
  EXPECT_EQ(bytes_of(out_ / "a.txt"), "old a");
  EXPECT_EQ(names_in(out_), std::vector<std::string>{"a.txt"});
  spread::OutputFileGroup group;
  group.add(a, text("new a"));
  group.add(b, text("new b"));
  group.commit();
  EXPECT_EQ(bytes_of(out_ / "a.txt"), "new a");
  EXPECT_EQ(bytes_of(out_ / "b.txt"), "new b");
  EXPECT_EQ(names_in(out_), (std::vector<std::string>{"a.txt", "b.txt"}));
}

// Item 7.
TEST_F(ReliabilityOutputs, ExportLeavesNoTemporaryFolderAfterAWriteError) {
  const auto r = shell_spread(kSmallFileLimit, "export --run " + late_run() + " --out " + (out_ / "pl").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(names_in(out_).empty()) << fmt::format("{}", fmt::join(names_in(out_), " "));
}

TEST_F(ReliabilityOutputs, ExportRemovesTemporaryFoldersOfDeadProcessesOnly) {
  // The temporary names spread gives (util/file.h), of this test's process (live) and of an ended one (dead).
  const std::string live = spread::temporary_name(out_ / "pl").filename().string();
  const std::string dead = live.substr(0, live.rfind('-') + 1) + std::to_string(dead_pid());
  for (const auto& name : {dead, live}) {
    fs::create_directories(out_ / name);
    std::ofstream(out_ / name / "model.safetensors") << "partial";
  }
  const auto r = run_spread("export --run " + late_run() + " --out " + (out_ / "pl").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(fs::exists(out_ / dead));
  EXPECT_TRUE(fs::exists(out_ / live / "model.safetensors"));  // another export may still be writing it
}

// Item 14: checked before the model is loaded and the texts encoded, with the OS's reason.
TEST_F(ReliabilityOutputs, OutputPathsAreCheckedBeforeTheWorkWithTheReason) {
  const std::string missing = (out_ / "nodir" / "a").string();
  expect_one_line_error(run_spread("encode --run " + causal_run() + " --in " + texts() + " --out " + missing +
                                   ".npy"), "No such file or directory");
  expect_one_line_error(run_spread("encode --run " + causal_run() + " --in " + texts() + " --out " + out_.string()),
                        "is a directory");
  expect_one_line_error(run_spread("eval --run " + late_run() + " --beir " + kBeir + " --out " + missing + ".json"),
                        "No such file or directory");
  expect_one_line_error(run_spread("diagnose --run " + causal_run() + " --texts " + texts() +
                                   " --max-texts 20 --out " + missing + ".json"), "No such file or directory");
  expect_one_line_error(run_spread("diagnose --token-lists " + token_lists().string() + " --out " + out_.string()),
                        "is a directory");
}

// Item 17: one rule for every output, a link at the name written or replaced is refused; the link and its target
// stay as they were.
TEST_F(ReliabilityOutputs, SymbolicLinksAtOutputNamesAreRefused) {
  fs::create_directories(out_ / "target");
  fs::create_directory_symlink(out_ / "target", out_ / "link");
  expect_one_line_error(run_spread("export --run " + late_run() + " --out " + (out_ / "link").string()),
                        "symbolic link");
  EXPECT_TRUE(fs::is_symlink(out_ / "link"));
  EXPECT_TRUE(fs::is_empty(out_ / "target"));

  const auto in = token_lists();
  std::ofstream(out_ / "victim.npy") << "keep";
  fs::create_directories(out_ / "p");
  fs::create_symlink(out_ / "victim.npy", out_ / "p" / "doc.npy");
  expect_one_line_error(run_spread("pool --in " + in.string() + " --out " + (out_ / "p").string() +
                                   " --pool-factor 2"), "symbolic link");
  EXPECT_TRUE(fs::is_symlink(out_ / "p" / "doc.npy"));
  EXPECT_EQ(bytes_of(out_ / "victim.npy"), "keep");

  fs::create_symlink(out_ / "victim.npy", out_ / "e.npy");
  expect_one_line_error(run_spread("encode --run " + causal_run() + " --in " + texts() + " --out " +
                                   (out_ / "e.npy").string()), "symbolic link");
  fs::create_symlink(out_ / "victim.npy", out_ / "r.html");
  expect_one_line_error(run_spread("report " + causal_run() + " --out " + (out_ / "r.html").string()),
                        "symbolic link");
  EXPECT_EQ(bytes_of(out_ / "victim.npy"), "keep");
}

// Item 18: an existing output is replaced, and every command's --help says so.
TEST_F(ReliabilityOutputs, EveryOutputsHelpSaysAnExistingOneIsReplaced) {
  for (const char* command : {"encode", "pool", "eval", "diagnose", "export", "report"}) {
    const auto r = run_spread(std::string(command) + " --help");
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("replaced"), std::string::npos) << command << ":\n" << r.output;
    EXPECT_NE(r.output.find("symbolic link"), std::string::npos) << command << ":\n" << r.output;
  }
  const auto out = out_ / "e.npy";
  std::ofstream(out) << "old";
  ASSERT_EQ(run_spread("encode --run " + causal_run() + " --in " + texts() + " --out " + out.string()).code, 0);
  EXPECT_EQ(spread::read_npy_matrix(out.string()).rows(), 200);
}

TEST_F(ReliabilityOutputs, EvalPoolFactorsAreDeduplicatedInOrder) {
  const auto r = run_spread("eval --run " + late_run() + " --beir " + kBeir + " --pool-factors 2,1,2,1 --json");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto rows = nlohmann::json::parse(r.output.substr(r.output.find('{')))["beir"]["results"];
  ASSERT_EQ(rows.size(), 2u) << rows.dump();
  EXPECT_EQ(rows[0]["pool_factor"].get<double>(), 2.0);
  EXPECT_EQ(rows[1]["pool_factor"].get<double>(), 1.0);
}

// More vectors than the documents' tokens cannot be reached: the unpooled mean is the most.
TEST_F(ReliabilityOutputs, CalibrateWarnsWhenTheTargetIsUnreachable) {
  auto r = run_spread("calibrate --run " + late_run() + " --docs " + kBeir + " --target-tokens 100000 --json");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto c = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  const double most = c["unpooled_mean"].get<double>();
  EXPECT_NE(r.output.find("warning:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(fmt::format("{:.2f}", most)), std::string::npos) << r.output;
  r = run_spread("calibrate --run " + late_run() + " --docs " + kBeir + " --target-tokens 8 --json");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("warning:"), std::string::npos) << r.output;
}

}  // namespace
