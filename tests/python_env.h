#pragma once
#include "test_paths.h"
// The Python environment of the reference libraries (scripts/python_env.sh) as tests find it: $SPREAD_PYTHON,
// else $SPREAD_VENV/bin/python, else the repository's .venv/bin/python. Tests that need a library call
// reference_python({"tokenizers"}) and skip, printing why, when it returns "" (scripts/test.sh makes the
// environment when the package index is reachable, so CI runs them).
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace spread::testing {

inline std::string reference_python_path() {
  if (const char* p = std::getenv("SPREAD_PYTHON")) return p;
  if (const char* v = std::getenv("SPREAD_VENV")) return std::string(v) + "/bin/python";
  return std::string(SPREAD_TEST_DATA_DIR) + "/../../.venv/bin/python";
}

// The python that imports every module in `modules`, or "" with the reason in *why_not.
inline std::string reference_python(const std::vector<std::string>& modules, std::string* why_not) {
  const std::string python = reference_python_path();
  if (!std::filesystem::exists(python)) {
    *why_not = "no reference Python environment at " + python + " (make it with scripts/python_env.sh)";
    return "";
  }
  std::string imports;
  for (const auto& m : modules) imports += (imports.empty() ? "import " : ", ") + m;
  const std::string cmd = "'" + python + "' -c '" + imports + "' > /dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    *why_not = python + " cannot `" + imports + "` (remake it with scripts/python_env.sh)";
    return "";
  }
  return python;
}

// The second environment, of the newest peers (scripts/python_env.sh --peers: sentence-transformers 6): the python
// of $SPREAD_PEERS_PYTHON, else the repository's .venv-peers, that imports every module, or "" with the reason.
inline std::string peers_python(const std::vector<std::string>& modules, std::string* why_not) {
  const char* p = std::getenv("SPREAD_PEERS_PYTHON");
  const std::string python = p ? p : std::string(SPREAD_TEST_DATA_DIR) + "/../../.venv-peers/bin/python";
  if (!std::filesystem::exists(python)) {
    *why_not = "no peers environment at " + python + " (make it with scripts/python_env.sh --peers)";
    return "";
  }
  std::string imports;
  for (const auto& m : modules) imports += (imports.empty() ? "import " : ", ") + m;
  if (std::system(("'" + python + "' -c '" + imports + "' > /dev/null 2>&1").c_str()) != 0) {
    *why_not = python + " cannot `" + imports + "` (remake it with scripts/python_env.sh --peers)";
    return "";
  }
  return python;
}

}  // namespace spread::testing
