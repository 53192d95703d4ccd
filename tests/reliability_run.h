#pragma once
#include "test_paths.h"
// The spread binary in tests of misuse and accidents (test_reliability*.cpp): a shell command with its exit code
// and output, a process in the background, polling, and the tiny char model run those tests start (1 layer, width
// 32, block 32, batch 4, one thread).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_run.h"
#include "spread/log/metrics_log.h"
#include "spread/run/checkpoint.h"

namespace spread::testing {

namespace fs = std::filesystem;

struct Result {
  int code;  // the exit code; -1 when the process did not exit (killed by a signal)
  std::string output;
};

// `command` through sh, so that a test can set ulimits or traps first; stderr joins stdout.
inline Result shell(const std::string& command) {
  Result r{-1, ""};
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::string spread_binary() { return spread_under_test(); }

// SPREAD_BLAS_AUTO=0: no switch of the BLAS core of its own, which would restart each of the many short processes
// here where OpenBLAS lacks the in-place switch (speed is not under test).
inline std::string spread_command(const std::string& args) {
  return "SPREAD_BLAS_AUTO=0 " + spread_binary() + " " + args;
}

inline Result run(const std::string& args) { return shell(spread_command(args)); }

// A spread process in the background, its output in a file; killed (-9) when the test ends however it ends.
class Background {
 public:
  Background(const std::string& args, const fs::path& log) {
    pid_ = fork();
    if (pid_ == 0) {
      const std::string cmd = "exec env " + spread_command(args) + " > " + log.string() + " 2>&1";
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~Background() {
    if (running()) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  pid_t pid() const { return pid_; }
  bool running() {
    if (status_ >= 0) return false;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == 0) return true;
    status_ = status;
    return false;
  }
  // The raw wait status.
  int wait() {
    if (status_ < 0) waitpid(pid_, &status_, 0);
    return status_;
  }

 private:
  pid_t pid_ = -1;
  int status_ = -1;
};

// Polls `done` every 10 ms for up to `seconds`.
inline bool wait_for(const std::function<bool()>& done, double seconds = 120) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

inline std::vector<std::string> events(const fs::path& run_dir) {
  std::vector<std::string> out;
  for (const auto& j : spread::read_metrics((run_dir / "metrics.jsonl").string()))
    if (j.contains("event")) out.push_back(j["event"].get<std::string>());
  return out;
}

inline int64_t newest_step(const fs::path& run_dir) {
  const auto files = spread::list_checkpoints(run_dir.string());
  return files.empty() ? -1 : spread::read_checkpoint(files.front()).step;
}

// A scratch folder with a corpus and a recipe for the tiny model; `dir / "tiny"` is the run directory.
struct TinyRun {
  fs::path dir, recipe, corpus, run_dir;

  explicit TinyRun(const std::string& name, const std::string& train_keys = "max_steps = 10\nckpt_every = 5\n") {
    dir = fs::temp_directory_path() / ("spread_rel_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    corpus = dir / "corpus.txt";
    run_dir = dir / "tiny";
    {
      std::ofstream c(corpus);
      for (int i = 0; i < 300; ++i) c << "to be or not to be, that is the question " << i % 7 << "\n";
    }
    recipe = dir / "r.toml";
    std::ofstream(recipe) << "[run]\nname = \"tiny\"\nout_dir = \"" << dir.string() << "\"\nthreads = 1\n"
                          << "[data]\nsource = \"text\"\npath = \"" << corpus.string() << "\"\n"
                          << "[tokenizer]\nkind = \"char\"\n"
                          << "[model]\nn_layer = 1\nn_head = 2\nn_embd = 32\nblock_size = 32\n"
                          << "[train]\nbatch_size = 4\nwarmup_steps = 2\neval_every = 0\neval_batches = 2\n"
                          << "log_every = 1\n" << train_keys << "[diagnostics]\nevery = 0\n";
  }
  ~TinyRun() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
  std::string train(const std::string& extra = "") const { return "train " + recipe.string() + " " + extra; }
  std::string resume(const std::string& extra = "") const { return "train --resume " + run_dir.string() + " " + extra; }
};

}  // namespace spread::testing
