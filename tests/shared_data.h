#pragma once
#include "test_paths.h"
// The full data sets (docs/data.md) as tests find them: $SPREAD_DATA, else ../shared/data beside the repository.
// A test that needs one starts with SHARED_DATA_OR_SKIP(file, "stsb/stsb-en-train.csv"): when the path is absent it
// skips, printing the path and how to get it, so that a clone without the data passes. With SPREAD_REQUIRE_DATA=1
// (a machine that has the data, such as CI) it fails instead, so that a moved folder cannot turn checks into skips.
// Small extracts that every run needs live in tests/data (tests/data/README.md names their sources).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace spread::testing {

inline std::string shared_data_dir() {
  if (const char* root = std::getenv("SPREAD_DATA"); root != nullptr && *root != '\0') return root;
  return std::string(SPREAD_TEST_DATA_DIR) + "/../../../shared/data";
}

// shared_data_dir()/relative, or "" when it does not exist.
inline std::string shared_data_path(const std::string& relative) {
  const std::string path = shared_data_dir() + "/" + relative;
  return std::filesystem::exists(path) ? path : "";
}

inline bool shared_data_required() {
  const char* v = std::getenv("SPREAD_REQUIRE_DATA");
  return v != nullptr && std::string(v) == "1";
}

inline std::string shared_data_missing(const std::string& relative) {
  return shared_data_dir() + "/" + relative + " is absent (set SPREAD_DATA to the folder of the data sets; docs/data.md)";
}

}  // namespace spread::testing

// Declares `const std::string var`, the path of `relative` under the data root, or skips (fails with
// SPREAD_REQUIRE_DATA=1) the test when it is absent.
#define SHARED_DATA_OR_SKIP(var, relative)                                                           \
  const std::string var = ::spread::testing::shared_data_path(relative);                            \
  if (var.empty()) {                                                                                 \
    if (::spread::testing::shared_data_required()) FAIL() << ::spread::testing::shared_data_missing(relative); \
    GTEST_SKIP() << ::spread::testing::shared_data_missing(relative);                                \
  }
