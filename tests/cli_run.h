#pragma once
// Running the built spread binary from a test (SPREAD_BINARY): exit code and combined output, and a fresh
// temporary directory per test.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace spread::testing {

struct CliResult {
  int code = -1;
  std::string output;  // stdout and stderr together
};

inline CliResult run_spread(const std::string& args) {
  const std::string cmd = std::string(SPREAD_BINARY) + " " + args + " 2>&1";
  CliResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), pipe)) > 0;) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::filesystem::path fresh_temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("spread_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace spread::testing
