#pragma once
#include "test_paths.h"
// A spread process started in the background (multi-rank and launcher tests): extra environment variables, output
// (stdout and stderr) in a log file, and a bounded wait for its exit code.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace spread::testing {

struct Worker {
  pid_t pid = -1;
  std::string log;
};

inline Worker start_worker(const std::vector<std::string>& args,
                           const std::vector<std::pair<std::string, std::string>>& env, const std::string& log) {
  Worker w{-1, log};
  w.pid = fork();
  if (w.pid == 0) {
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<std::string> text{SPREAD_BINARY};
    text.insert(text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : text) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (freopen(log.c_str(), "w", stdout) == nullptr) _exit(127);
    dup2(fileno(stdout), 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return w;
}

// The exit code, or -1 when it has not ended within `seconds` (it is then killed).
inline int wait_worker(const Worker& w, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    int status = 0;
    if (waitpid(w.pid, &status, WNOHANG) == w.pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(w.pid, SIGKILL);
  waitpid(w.pid, nullptr, 0);
  return -1;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace spread::testing
