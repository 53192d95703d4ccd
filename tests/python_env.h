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

// `python` when it exists and imports every module in `modules`, or "" with the reason (and `remake`, the command
// that makes it) in *why_not.
inline std::string python_importing(const std::string& python, const std::vector<std::string>& modules,
                                    const std::string& remake, std::string* why_not) {
  if (!std::filesystem::exists(python)) {
    *why_not = "no Python environment at " + python + " (make it with " + remake + ")";
    return "";
  }
  std::string imports;
  for (const auto& m : modules) imports += (imports.empty() ? "import " : ", ") + m;
  if (std::system(("'" + python + "' -c '" + imports + "' > /dev/null 2>&1").c_str()) != 0) {
    *why_not = python + " cannot `" + imports + "` (remake it with " + remake + ")";
    return "";
  }
  return python;
}

// The python of the reference environment that imports every module in `modules`, or "" with the reason.
inline std::string reference_python(const std::vector<std::string>& modules, std::string* why_not) {
  return python_importing(reference_python_path(), modules, "scripts/python_env.sh", why_not);
}

// The second environment, of the newest peers (scripts/python_env.sh --peers: sentence-transformers 6): the python
// of $SPREAD_PEERS_PYTHON, else the repository's .venv-peers, that imports every module, or "" with the reason.
inline std::string peers_python(const std::vector<std::string>& modules, std::string* why_not) {
  const char* p = std::getenv("SPREAD_PEERS_PYTHON");
  const std::string python = p ? p : std::string(SPREAD_TEST_DATA_DIR) + "/../../.venv-peers/bin/python";
  return python_importing(python, modules, "scripts/python_env.sh --peers", why_not);
}

}  // namespace spread::testing
