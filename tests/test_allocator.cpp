// The allocator: when the build links jemalloc (SPREAD_JEMALLOC and the library found), it is the process's
// malloc and keeps freed pages (allocator.h); the test binary links the same way as the CLI.
#include <gtest/gtest.h>

#include <string>

#include "spread/runtime/allocator.h"

TEST(Allocator, DescribesWhatIsInUse) {
  const std::string info = spread::tune_allocator();
  EXPECT_EQ(info, spread::allocator_info());
#if SPREAD_EXPECT_JEMALLOC
  EXPECT_EQ(info.rfind("jemalloc 5", 0), 0u) << info;
  EXPECT_NE(info.find("dirty_decay_ms -1"), std::string::npos) << info;
#else
  EXPECT_EQ(info.rfind("glibc", 0), 0u) << info;
#endif
}
