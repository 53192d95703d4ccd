// The test binary's main: the same BLAS kernels and allocator settings as the CLI, so tests that train run as
// users' runs do (before the kernels were switched here, in-process tests ran OpenBLAS's misdetected Prescott ones).
#include <gtest/gtest.h>

#include "spread/runtime/allocator.h"
#include "spread/runtime/blas.h"

int main(int argc, char** argv) {
  spread::select_blas_core(argv);
  spread::tune_allocator();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
