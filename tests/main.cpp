// The test binary's main: the same allocator settings as the CLI, so tests that train run as users' runs do.
#include <gtest/gtest.h>

#include "spread/runtime/allocator.h"

int main(int argc, char** argv) {
  spread::tune_allocator();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
