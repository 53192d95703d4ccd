#pragma once
#include "test_paths.h"
// The real pretrained model that scripts/get_model.sh fetches (all-MiniLM-L6-v2, from the package index), as tests
// find it: $SPREAD_MODELS/all-MiniLM-L6-v2, else models/all-MiniLM-L6-v2 in the repository. A test that needs it
// starts with REAL_MODEL_OR_SKIP(dir): when the folder is absent it skips, printing how to get it (scripts/test.sh
// fetches it when the package index is reachable, so CI runs these tests).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace spread::testing {

inline std::string real_model_dir() {
  if (const char* root = std::getenv("SPREAD_MODELS"); root != nullptr && *root != '\0')
    return std::string(root) + "/all-MiniLM-L6-v2";
  return std::string(SPREAD_TEST_DATA_DIR) + "/../../models/all-MiniLM-L6-v2";
}

}  // namespace spread::testing

#define REAL_MODEL_OR_SKIP(var)                                                                                    \
  const std::string var = ::spread::testing::real_model_dir();                                                    \
  if (!std::filesystem::exists(var + "/model.safetensors"))                                                       \
  GTEST_SKIP() << var << " is absent: fetch it with scripts/get_model.sh (all-MiniLM-L6-v2 from the package index)"
