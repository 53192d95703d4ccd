#pragma once
#include "test_paths.h"
// Running the built spread binary from a test (SPREAD_BINARY, or another: spread_under_test): exit code and combined output, a fresh
// temporary directory per test, and the values a run logged under one key.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "spread/log/metrics_log.h"

namespace spread::testing {

struct CliResult {
  int code = -1;
  std::string output;  // stdout and stderr together
};

// The program under test: the one built with the tests, or $SPREAD_TEST_BINARY when set (an older build, to see
// the tests of a fix fail before it).
inline std::string spread_under_test() {
  const char* other = std::getenv("SPREAD_TEST_BINARY");
  return other != nullptr && *other != '\0' ? other : SPREAD_BINARY;
}

// `prefix` goes before the program (an `env ...` that sets or clears variables for this run).
inline CliResult run_spread_env(const std::string& prefix, const std::string& args) {
  const std::string cmd = prefix + " " + spread_under_test() + " " + args + " 2>&1";
  CliResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), pipe)) > 0;) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline CliResult run_spread(const std::string& args) { return run_spread_env("", args); }

inline std::filesystem::path fresh_temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("spread_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Every value logged under `key` in run_dir's metrics.jsonl, in order (event lines left out).
inline std::vector<double> logged(const std::filesystem::path& run_dir, const std::string& key) {
  std::vector<double> out;
  for (const auto& j : spread::read_metrics((run_dir / "metrics.jsonl").string()))
    if (j.contains(key) && !j.contains("event")) out.push_back(j[key].get<double>());
  return out;
}

}  // namespace spread::testing
