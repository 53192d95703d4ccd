// Learning-rate schedule at chosen steps, against values worked by hand from nanoGPT's formula.
#include <gtest/gtest.h>

#include <cmath>

#include "spread/train/schedule.h"

TEST(Schedule, WarmupCosineAndFloor) {
  spread::LrSchedule s{1e-3, 1e-4, 100, 2000};
  EXPECT_DOUBLE_EQ(s.at(0), 1e-3 * 1.0 / 101.0);
  EXPECT_DOUBLE_EQ(s.at(49), 1e-3 * 50.0 / 101.0);
  EXPECT_DOUBLE_EQ(s.at(100), 1e-3);                      // cosine starts at the peak
  EXPECT_NEAR(s.at(1050), 1e-4 + 0.5 * 9e-4, 1e-15);      // half way: cos(pi/2) = 0
  EXPECT_NEAR(s.at(1999), 1e-4 + 0.5 * (1 + std::cos(M_PI * 1899.0 / 1900.0)) * 9e-4, 1e-15);
  EXPECT_DOUBLE_EQ(s.at(2000), 1e-4);
  EXPECT_DOUBLE_EQ(s.at(5000), 1e-4);
}

TEST(Schedule, NoWarmup) {
  spread::LrSchedule s{2.0, 0.0, 0, 4};
  EXPECT_DOUBLE_EQ(s.at(0), 2.0);
  EXPECT_NEAR(s.at(2), 1.0, 1e-15);
  EXPECT_NEAR(s.at(3), 0.5 * (1 + std::cos(M_PI * 0.75)) * 2.0, 1e-15);
}
