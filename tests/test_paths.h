#pragma once
// The paths the tests need. The two fixed when the build is configured live in one generated file (CMakeLists.txt
// writes test_paths.cpp into the build folder), not in compile definitions, so that every other test file compiles
// to the same command in any clone and ccache can reuse it; the rest are derived from them.
#include <string>

namespace spread::testing {
const char* test_data_dir();  // tests/data of the source tree
const char* built_spread_binary();  // the built command-line program

// A Python oracle of tests/oracles/ by file name (e.g. "hf_model_ref.py"): the reference scripts the tests run
// with the environment of python_env.h, kept apart from the benchmarks (bench/) and experiments (experiments/).
inline std::string oracle_script(const std::string& name) {
  return std::string(test_data_dir()) + "/../oracles/" + name;
}
}  // namespace spread::testing

#define SPREAD_TEST_DATA_DIR ::spread::testing::test_data_dir()
#define SPREAD_BINARY ::spread::testing::built_spread_binary()
