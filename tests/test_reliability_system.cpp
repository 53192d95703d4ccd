// Reliability of the system around a run: the data root that recipes name their data sets by, the
// memory estimate that refuses a shape the host cannot hold, and the local launcher and rendezvous of data-parallel
// runs when a rank fails or the port is taken. CLI tests drive the built binary as a user would.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include "test_paths.h"
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "cli_run.h"
#include "cli_worker.h"
#include "reliability_run.h"
#include "spread/config/recipe.h"
#include "spread/encode/forward_memory.h"
#include "spread/log/metrics_log.h"
#include "spread/model/transformer.h"
#include "spread/run/setup.h"
#include "spread/train/memory_estimate.h"
#include "spread/util/error.h"

namespace fs = std::filesystem;
using spread::testing::fresh_temp_dir;
using spread::testing::read_text;
using spread::testing::run_spread;
using spread::testing::start_worker;
using spread::testing::wait_worker;
using spread::testing::Worker;

namespace {

const fs::path kRepo = fs::path(SPREAD_TEST_DATA_DIR) / ".." / "..";

std::string user_error_message(const std::function<void()>& body) {
  try {
    body();
  } catch (const spread::UserError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

size_t line_count(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n';
  return n + (!text.empty() && text.back() != '\n');
}

// Sets an environment variable for the life of the object (unset = nullptr), restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

void write_corpus(const fs::path& file, int lines) {
  std::ofstream out(file);
  for (int i = 0; i < lines; ++i) out << "to be or not to be, that is the question " << i % 11 << "\n";
}

}  // namespace

// --- the data root ------------------------------------------------------------------------------------------------

// "${data_root}" in each path key becomes data.root; the resolved recipe (what a run saves) holds the folder and the
// resolved paths, and reads back the same.
TEST(DataRoot, StandsForTheFolderInEveryPathKeyAndIsSavedResolved) {
  const auto dir = fresh_temp_dir("data_root");
  fs::create_directories(dir / "beir");
  std::ofstream(dir / "c.txt") << "text\n";
  std::ofstream(dir / "sts.csv") << "a,b,1\n";
  const std::string toml = "[data]\nsource = \"text\"\nroot = \"" + dir.string() +
                           "\"\npath = \"${data_root}/c.txt\"\n[eval]\nsts = \"${data_root}/sts.csv\"\n"
                           "beir = \"${data_root}/beir\"\n";
  const spread::Recipe r = spread::parse_recipe(toml, "r.toml");
  ASSERT_EQ(r.data.path.size(), 1u);
  EXPECT_EQ(r.data.path[0], dir.string() + "/c.txt");
  EXPECT_EQ(r.eval.sts, dir.string() + "/sts.csv");
  EXPECT_EQ(r.eval.beir, dir.string() + "/beir");
  EXPECT_EQ(r.data.root, dir.string());
  const std::string saved = spread::recipe_to_toml(r);
  EXPECT_FALSE(contains(saved, "${")) << saved;
  EXPECT_TRUE(contains(saved, "'" + dir.string() + "/c.txt'") || contains(saved, "\"" + dir.string() + "/c.txt\""))
      << saved;
  const spread::Recipe again = spread::parse_recipe(saved, "recipe.toml");
  EXPECT_EQ(again.data.path, r.data.path);
  EXPECT_EQ(again.data.root, r.data.root);
  // --set data.root moves every path with it.
  fs::create_directories(dir / "other");
  std::ofstream(dir / "other" / "c.txt") << "text\n";
  const spread::Recipe moved = spread::parse_recipe("[data]\nsource = \"text\"\npath = \"${data_root}/c.txt\"\n", "r.toml",
                                                    {"data.root=" + (dir / "other").string()});
  EXPECT_EQ(moved.data.path[0], (dir / "other").string() + "/c.txt");
  fs::remove_all(dir);
}

// Without data.root: SPREAD_DATA, else ../shared/data; a path made from the root that does not exist names the key,
// the root, where it came from and the fix.
TEST(DataRoot, ComesFromSpreadDataThenTheDefault) {
  const auto dir = fresh_temp_dir("data_root_env");
  std::ofstream(dir / "c.txt") << "text\n";
  const std::string toml = "[data]\nsource = \"text\"\npath = \"${data_root}/c.txt\"\n";
  {
    ScopedEnv env("SPREAD_DATA", dir.string().c_str());
    EXPECT_EQ(spread::parse_recipe(toml, "r.toml").data.path[0], dir.string() + "/c.txt");
  }
  ScopedEnv env("SPREAD_DATA", nullptr);
  const auto old_cwd = fs::current_path();
  fs::current_path(dir);  // no ../shared/data from here
  const std::string message = user_error_message([&] { spread::parse_recipe(toml, "r.toml"); });
  fs::current_path(old_cwd);
  EXPECT_TRUE(contains(message, "r.toml: key 'data.path': '../shared/data/c.txt' does not exist")) << message;
  EXPECT_TRUE(contains(message, "data root '../shared/data', from the default")) << message;
  EXPECT_TRUE(contains(message, "SPREAD_DATA")) << message;
  const std::string unknown = user_error_message(
      [&] { spread::parse_recipe("[eval]\nsts = \"${data}/sts.csv\"\n", "r.toml"); });
  EXPECT_TRUE(contains(unknown, "key 'eval.sts'") && contains(unknown, "unknown variable")) << unknown;
  fs::remove_all(dir);
}

// The shipped recipes name no ../shared folder; without the data a user gets one line and exit code 2, before
// anything is written.
TEST(DataRoot, ShippedRecipesNeedTheRootOnlyAndSayHowToSetIt) {
  for (const auto& entry : fs::directory_iterator(kRepo / "recipes")) {
    std::istringstream lines(read_text(entry.path().string()));
    for (std::string line; std::getline(lines, line);)  // comments may name the default
      EXPECT_TRUE(line.rfind('#', 0) == 0 || !contains(line, "../shared")) << entry.path() << ": " << line;
  }
  const auto dir = fresh_temp_dir("data_root_cli");
  setenv("SPREAD_DATA", (dir / "absent").c_str(), 1);
  const auto r = run_spread("train " + (kRepo / "recipes" / "shakespeare_char.toml").string() +
                            " --set run.out_dir=" + dir.string());
  unsetenv("SPREAD_DATA");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(line_count(r.output), 1u) << r.output;
  EXPECT_TRUE(contains(r.output, "key 'data.path'") && contains(r.output, "from SPREAD_DATA")) << r.output;
  EXPECT_FALSE(fs::exists(dir / "shakespeare_char"));
  fs::remove_all(dir);
}

// --- the memory estimate ------------------------------------------------------------------------------------------

// The parameter count of the estimate is the model's own (LibTorch's numel of every parameter).
TEST(MemoryEstimate, ParameterCountIsTheModels) {
  for (const std::vector<std::string>& sets :
       {std::vector<std::string>{"model.n_layer=3", "model.n_embd=48", "model.block_size=40"},
        {"model.bias=false", "model.n_embd=32"},
        {"train.objective=maxsim", "data.source=pairs", "data.path=x.tsv", "model.causal=false", "model.head_dim=24",
         "loss.maxsim.document_length=64"},
        // Llama's block: rotary positions, RMSNorm, SwiGLU, grouped-query attention, an untied output
        {"model.positions=rope", "model.norm=rmsnorm", "model.mlp=swiglu", "model.n_kv_head=2", "model.bias=false",
         "model.tie_embeddings=false", "model.intermediate_size=40"},
        // ModernBERT's: an embedding norm, none before block 0, bias-free norms, GeGLU, the MLM head
        {"model.causal=false", "train.objective=mlm", "model.positions=rope", "model.mlp=geglu",
         "model.norm_bias=false", "model.bias=false", "model.embedding_norm=true", "model.first_block_norm=false",
         "model.mlm_transform=true", "model.mlm_dense_bias=false", "model.attention_window=8"},
        // BERT's: post-norm with token types and the MLM head
        {"model.causal=false", "train.objective=mlm", "model.norm_position=post", "model.type_vocab_size=2",
         "model.mlm_transform=true"}}) {
    const spread::Recipe r = spread::parse_recipe("", "r.toml", sets);
    spread::Transformer model(spread::model_config(r, 101));
    int64_t numel = 0;  // every tensor the optimizer holds (num_parameters() leaves the positions out, as nanoGPT)
    for (const auto& p : model->parameters()) numel += p.numel();
    EXPECT_EQ(spread::estimate_training_memory(r, 101).parameters, numel) << sets[0];
  }
}

namespace {

// Prints both, and holds the estimate between the measured bytes and twice them.
void expect_estimate_bounds(const std::string& what, double measured, double estimated) {
  std::cout << what << " " << measured / 1048576 << " MiB, estimated " << estimated / 1048576 << " MiB\n";
  EXPECT_GE(estimated, measured) << what;
  EXPECT_LE(estimated, 2 * measured) << what;
}

// Trains `recipe` for 3 steps through the CLI; returns its peak RSS in bytes (the end event of metrics.jsonl) and
// the estimate of the same recipe with the vocabulary the run built.
std::pair<double, double> measured_and_estimated(const fs::path& dir, const std::string& recipe_text) {
  const fs::path recipe = dir / "r.toml";
  std::ofstream(recipe) << recipe_text;
  const auto r = run_spread("train " + recipe.string());
  EXPECT_EQ(r.code, 0) << r.output;
  double peak_mib = 0;
  for (const auto& j : spread::read_metrics((dir / "run" / "metrics.jsonl").string()))
    if (j.value("event", "") == "end") peak_mib = j["peak_rss_mib"].get<double>();
  const spread::Recipe parsed = spread::load_recipe(recipe.string());
  const auto estimate = spread::estimate_training_memory(parsed, spread::estimated_vocab_size(parsed));
  fs::remove_all(dir / "run");
  return {peak_mib * 1024 * 1024, estimate.peak()};
}

std::string base_recipe(const fs::path& dir, const std::string& data, const std::string& model,
                        const std::string& train) {
  return "[run]\nname = \"run\"\nout_dir = \"" + dir.string() + "\"\nthreads = 1\n" + data + "[tokenizer]\nkind = "
         "\"char\"\n[model]\n" + model + "[train]\nmax_steps = 3\nwarmup_steps = 1\neval_every = 0\nckpt_every = 3\n"
         "log_every = 1\n" + train;
}

}  // namespace

// Real runs of each objective, shaped so that weights and activations outweigh the runtime: the estimate is at least
// the measured peak RSS and at most 2x it (1.29-1.49x when measured).
TEST(MemoryEstimate, BoundsThePeakRssOfRealRuns) {
  const auto dir = fresh_temp_dir("memory_runs");
  write_corpus(dir / "c.txt", 3000);
  {
    std::ofstream pairs(dir / "p.tsv");
    pairs << "anchor\tpositive\n";
    // About 60 characters each: the texts fill most of the 64 tokens that the estimate takes for each.
    for (int i = 0; i < 400; ++i)
      pairs << "a question about thing number " << i << " and its many fine properties\tthe answer on thing number "
            << i << " and what it does for us all in the end\n";
  }
  const std::string text = "[data]\nsource = \"text\"\npath = \"" + (dir / "c.txt").string() + "\"\n";
  const std::string pairs = "[data]\nsource = \"pairs\"\npath = \"" + (dir / "p.tsv").string() + "\"\n";
  const std::string encoder = "n_layer = 4\nn_head = 4\nn_embd = 256\nblock_size = 64\ncausal = false\n";
  const struct {
    const char* name;
    std::string recipe;
  } runs[] = {
      {"lm", base_recipe(dir, text, "n_layer = 4\nn_head = 4\nn_embd = 256\nblock_size = 128\n", "batch_size = 32\n")},
      {"lm without recompute, dropout",
       base_recipe(dir, text, "n_layer = 2\nn_head = 4\nn_embd = 256\nblock_size = 128\nrecompute = false\n"
                   "dropout = 0.1\n", "batch_size = 32\n")},
      {"mlm", base_recipe(dir, text, encoder, "objective = \"mlm\"\nbatch_size = 64\n")},
      {"contrastive", base_recipe(dir, pairs, encoder, "objective = \"contrastive\"\nbatch_size = 64\n")},
      {"contrastive, cached", base_recipe(dir, pairs, encoder, "objective = \"contrastive\"\nbatch_size = 64\n"
                                          "[loss.contrastive]\nmini_batch = 16\n")},
      {"maxsim", base_recipe(dir, pairs, encoder + "head_dim = 64\n", "objective = \"maxsim\"\nbatch_size = 32\n"
                             "[loss.maxsim]\nquery_length = 16\ndocument_length = 64\n")},
  };
  for (const auto& run : runs) {
    const auto [measured, estimated] = measured_and_estimated(dir, run.recipe);
    expect_estimate_bounds(std::string(run.name) + ": peak RSS", measured, estimated);
  }
  fs::remove_all(dir);
}

// A shape far beyond this host is refused at once (before any allocation: within seconds, no run directory), with
// the estimate, the memory available and the keys to change.
TEST(MemoryEstimate, RefusesAShapeBeyondTheHostBeforeAllocating) {
  const auto dir = fresh_temp_dir("memory_refuse");
  write_corpus(dir / "c.txt", 300);
  std::ofstream(dir / "r.toml") << "[run]\nname = \"big\"\nout_dir = \"" << dir.string() << "\"\n[data]\nsource = "
                                << "\"text\"\npath = \"" << (dir / "c.txt").string() << "\"\n[tokenizer]\nkind = "
                                << "\"char\"\n";
  const std::string train = "train " + (dir / "r.toml").string();
  const auto wide_started = std::chrono::steady_clock::now();
  const auto wide = run_spread(train + " --set model.n_embd=65536 --set model.n_head=1 --set model.n_layer=1");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - wide_started).count();
  EXPECT_EQ(wide.code, 2) << wide.output;
  EXPECT_EQ(line_count(wide.output), 1u) << wide.output;
  EXPECT_TRUE(contains(wide.output, "needs about") && contains(wide.output, "available")) << wide.output;
  EXPECT_TRUE(contains(wide.output, "model.n_embd")) << wide.output;
  EXPECT_LT(took, 20.0);
  EXPECT_FALSE(fs::exists(dir / "big"));
  const auto batch = run_spread(train + " --set train.batch_size=1048576");
  EXPECT_EQ(batch.code, 2) << batch.output;
  EXPECT_TRUE(contains(batch.output, "lower train.batch_size")) << batch.output;
  EXPECT_FALSE(fs::exists(dir / "big"));
  fs::remove_all(dir);
}

namespace {

// The peak RSS (bytes) of one run of the binary under test with `args` (split on spaces), from wait4's rusage of
// that child alone.
double peak_rss_of(const std::string& args) {
  std::vector<std::string> words = {spread::testing::spread_under_test()};
  std::istringstream in(args);
  for (std::string w; in >> w;) words.push_back(w);
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << args;
  return double(usage.ru_maxrss) * 1024;  // KiB
}

}  // namespace

// What a batch adds to the peak RSS of eval (an LM's windows) and encode (an encoder's texts, truncated to the
// model's length) against forward_pass_bytes of that batch: at least the measured growth, at most twice it.
TEST(MemoryEstimate, ForwardPassEstimateBoundsWhatABatchAddsToThePeak) {
  const auto dir = fresh_temp_dir("memory_forward");
  write_corpus(dir / "c.txt", 2000);
  {
    std::ofstream long_texts(dir / "long.txt");  // 135 characters a line: every text fills the 128 positions
    for (int i = 0; i < 1200; ++i)
      long_texts << "to be or not to be, that is the question " << i % 7 << " to be or not to be, that is the "
                 << "question " << i % 5 << " to be or not to be, that is the question " << i % 3 << "\n";
  }
  const auto recipe = [&](const std::string& name, const std::string& model, const std::string& train) {
    const fs::path path = dir / (name + ".toml");
    std::ofstream(path) << "[run]\nname = \"" << name << "\"\nout_dir = \"" << dir.string() << "\"\nthreads = 1\n"
                        << "[data]\nsource = \"text\"\npath = \"" << (dir / "c.txt").string() << "\"\n"
                        << "[tokenizer]\nkind = \"char\"\n[model]\n" << model << "[train]\n" << train
                        << "max_steps = 1\nwarmup_steps = 1\neval_every = 0\nckpt_every = 1\n[diagnostics]\nevery = 0\n";
    EXPECT_EQ(run_spread("train " + path.string()).code, 0) << name;
    return (dir / name).string();
  };
  const std::string lm = recipe("lm", "n_layer = 2\nn_head = 2\nn_embd = 128\nblock_size = 256\n", "");
  const std::string encoder =
      recipe("enc", "n_layer = 2\nn_head = 4\nn_embd = 256\nblock_size = 128\ncausal = false\n", "objective = \"mlm\"\n");
  const struct {
    std::string name, command;
    int64_t batch, length;
    bool logits;
    std::string run;
  } cases[] = {
      {"eval", "eval --run " + lm + " --text " + (dir / "c.txt").string() + " --batch-size ", 256, 256, true, lm},
      {"encode", "encode --run " + encoder + " --in " + (dir / "long.txt").string() + " --out " +
                     (dir / "e.npy").string() + " --batch-size ", 1024, 128, false, encoder},
  };
  for (const auto& c : cases) {
    const double added = peak_rss_of(c.command + std::to_string(c.batch)) - peak_rss_of(c.command + "1");
    const spread::Recipe run_recipe = spread::load_recipe((fs::path(c.run) / "recipe.toml").string());
    spread::TransformerConfig config;
    config.n_embd = run_recipe.model.n_embd;
    config.n_head = run_recipe.model.n_head;
    config.vocab_size = 64;  // a char vocabulary of the corpus: about 30, so an upper bound
    const double estimated = spread::forward_pass_bytes(config, c.batch, c.length, c.logits);
    expect_estimate_bounds(c.name + ": a batch of " + std::to_string(c.batch) + " added", added, estimated);
  }
  fs::remove_all(dir);
}

// A --batch-size of eval (and encode: the same check before the first batch) beyond the host is refused at once
// with the estimate and a batch size that fits, instead of failing to allocate (or being killed) after the work of
// reading the data. The ulimit keeps a build without the check from taking the machine's memory: there it fails to
// allocate (exit 1).
TEST(MemoryEstimate, RefusesAnEvalBatchBeyondTheHostBeforeTheFirstBatch) {
  const auto dir = fresh_temp_dir("memory_eval_batch");
  write_corpus(dir / "c.txt", 300);
  write_corpus(dir / "big.txt", 200000);  // 8.6 MB: 8.6M tokens, over 200 GB as one batch of width 512
  std::ofstream(dir / "r.toml") << "[run]\nname = \"lm\"\nout_dir = \"" << dir.string() << "\"\nthreads = 1\n"
                                << "[data]\nsource = \"text\"\npath = \"" << (dir / "c.txt").string() << "\"\n"
                                << "[tokenizer]\nkind = \"char\"\n[model]\nn_layer = 1\nn_head = 2\nn_embd = 512\n"
                                << "block_size = 32\n[train]\nmax_steps = 1\nwarmup_steps = 1\neval_every = 0\n"
                                << "ckpt_every = 1\n[diagnostics]\nevery = 0\n";
  ASSERT_EQ(run_spread("train " + (dir / "r.toml").string()).code, 0);
  const std::string eval = "eval --run " + (dir / "lm").string() + " --text " + (dir / "big.txt").string();
  const auto started = std::chrono::steady_clock::now();
  const auto r = spread::testing::shell("ulimit -v 16000000; " +
                                        spread::testing::spread_command(eval + " --batch-size 1048576"));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "needs about") && contains(r.output, "available")) << r.output;
  EXPECT_TRUE(contains(r.output, "lower --batch-size to ")) << r.output;
  EXPECT_LT(took, 30.0);
  fs::remove_all(dir);
}

// --- the local launcher and the rendezvous ------------------------------------------------------------------------

namespace {

// The pid of the child of `parent` whose environment holds RANK=<rank>, or -1.
pid_t worker_of(pid_t parent, int rank) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_text((entry.path() / "stat").string());
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid != parent) continue;
    std::istringstream env(read_text((entry.path() / "environ").string()));
    bool match = false;
    for (std::string var; std::getline(env, var, '\0');) match = match || var == "RANK=" + std::to_string(rank);
    if (match)
      return pid_t(std::stoi(name));
  }
  return -1;
}

size_t logged_steps(const fs::path& run_dir) {
  if (!fs::exists(run_dir / "metrics.jsonl")) return 0;
  size_t n = 0;
  for (const auto& j : spread::read_metrics((run_dir / "metrics.jsonl").string())) n += j.contains("loss");
  return n;
}

}  // namespace

// Rank 1 stopped (SIGSTOP) mid-run: rank 0 gives up after SPREAD_DIST_TIMEOUT and exits 4; the launcher then stops
// rank 1 and exits 4 itself instead of waiting for it forever.
TEST(Launcher, StopsTheOtherRanksWhenOneFails) {
  const auto dir = fresh_temp_dir("launch_stop");
  write_corpus(dir / "c.txt", 300);
  std::ofstream(dir / "r.toml") << "[run]\nname = \"f\"\nout_dir = \"" << dir.string() << "\"\nthreads = 1\n[data]\n"
                                << "source = \"text\"\npath = \"" << (dir / "c.txt").string() << "\"\n[tokenizer]\n"
                                << "kind = \"char\"\n[model]\nn_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 16\n"
                                << "[train]\nbatch_size = 2\nmax_steps = 1000000\nwarmup_steps = 1\neval_every = 0\n"
                                << "ckpt_every = 0\nlog_every = 1\n";
  // The timeout also bounds the ranks' rendezvous: 3 s failed it on a loaded machine (ctest -j2 beside the
  // browser test), where one rank started more than 3 s after the other, so the run never reached its steps.
  Worker launcher = start_worker({"train", (dir / "r.toml").string(), "--nproc", "2"}, {{"SPREAD_DIST_TIMEOUT", "10"}},
                                 (dir / "launcher.log").string());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (logged_steps(dir / "f") < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_GE(logged_steps(dir / "f"), 3u) << read_text(launcher.log);
  const pid_t rank1 = worker_of(launcher.pid, 1);
  ASSERT_GT(rank1, 0);
  kill(rank1, SIGSTOP);
  const auto stopped_at = std::chrono::steady_clock::now();
  const int code = wait_worker(launcher, 40);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped_at).count();
  const std::string out = read_text(launcher.log);
  if (code < 0) kill(rank1, SIGKILL);  // the launcher was killed by wait_worker; its worker is left
  EXPECT_EQ(code, 4) << out;
  EXPECT_LT(took, 30.0) << out;  // 10 s of timeout, 2 s to settle, and rank 1 ends on its SIGTERM
  EXPECT_TRUE(contains(out, "rank 0 exited with code 4: stopping the other ranks")) << out;
  EXPECT_FALSE(fs::exists("/proc/" + std::to_string(rank1)));
  fs::remove_all(dir);
}

// More workers than cores: one warning line, then the run as asked (here a missing recipe: every worker says so).
TEST(Launcher, WarnsWhenWorkersOutnumberTheCores) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const auto r = run_spread("train /nonexistent/r.toml --nproc " + std::to_string(cores + 1));
  EXPECT_EQ(r.code, 2) << r.output;
  const std::string warning = "warning: --nproc " + std::to_string(cores + 1) + " starts more workers than this host "
                              "has cores (" + std::to_string(cores) + ")";
  EXPECT_TRUE(contains(r.output, warning)) << r.output;
  EXPECT_EQ(r.output.find("warning: --nproc"), r.output.rfind("warning: --nproc")) << r.output;
}

// The rendezvous port held by another program: each rank exits 2 with one line naming the port and MASTER_PORT, no
// C++ stack trace.
TEST(Rendezvous, PortInUseIsOneLineNamingTheFix) {
  const int holder = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(holder, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = 0;
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(holder, 16), 0);
  socklen_t length = sizeof(address);
  getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length);
  const std::string port = std::to_string(ntohs(address.sin_port));

  const auto dir = fresh_temp_dir("port_in_use");
  write_corpus(dir / "c.txt", 300);
  std::ofstream(dir / "r.toml") << "[run]\nname = \"p\"\nout_dir = \"" << dir.string() << "\"\nthreads = 1\n[data]\n"
                                << "source = \"text\"\npath = \"" << (dir / "c.txt").string() << "\"\n[tokenizer]\n"
                                << "kind = \"char\"\n[model]\nn_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 16\n"
                                << "[train]\nmax_steps = 2\n";
  std::vector<Worker> ranks;
  for (int rank = 0; rank < 2; ++rank)
    ranks.push_back(start_worker({"train", (dir / "r.toml").string()},
                                 {{"RANK", std::to_string(rank)}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                                  {"MASTER_PORT", port}, {"SPREAD_DIST_TIMEOUT", "3"}},
                                 (dir / ("r" + std::to_string(rank) + ".log")).string()));
  for (const auto& w : ranks) {
    const int code = wait_worker(w, 30);
    const std::string out = read_text(w.log);
    EXPECT_EQ(code, 2) << out;
    EXPECT_EQ(line_count(out), 1u) << out;
    EXPECT_TRUE(contains(out, "127.0.0.1:" + port) && contains(out, "MASTER_PORT")) << out;
  }
  close(holder);
  fs::remove_all(dir);
}
