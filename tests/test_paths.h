#pragma once
// The two paths the tests need, fixed when the build is configured. They live in one generated file
// (CMakeLists.txt writes test_paths.cpp into the build folder), not in compile definitions, so that every other
// test file compiles to the same command in any clone and ccache can reuse it.
namespace spread::testing {
const char* test_data_dir();  // tests/data of the source tree
const char* built_spread_binary();  // the built command-line program
}  // namespace spread::testing

#define SPREAD_TEST_DATA_DIR ::spread::testing::test_data_dir()
#define SPREAD_BINARY ::spread::testing::built_spread_binary()
