// Learning-rate schedule at chosen steps, against values worked by hand from nanoGPT's formula.
#include <gtest/gtest.h>

#include <cmath>

#include "spread/config/recipe.h"
#include "spread/train/schedule.h"
#include "spread/util/error.h"

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

TEST(Schedule, LinearDecayAfterWarmup) {
  spread::LrSchedule s{1.0, 0.1, 10, 110, spread::ScheduleKind::linear};
  EXPECT_DOUBLE_EQ(s.at(9), 10.0 / 11.0);
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);
  EXPECT_NEAR(s.at(60), 0.55, 1e-15);  // half way from 1 to 0.1
  EXPECT_NEAR(s.at(109), 1.0 - 0.9 * 99.0 / 100.0, 1e-15);
  EXPECT_DOUBLE_EQ(s.at(110), 0.1);
}

// 100 steps, 10 of warmup, the last 20% decaying: stable at the peak over steps 10..79, decay over 80..99.
TEST(Schedule, WarmupStableDecayInEachShape) {
  for (auto shape : {spread::DecayShape::linear, spread::DecayShape::cosine, spread::DecayShape::sqrt}) {
    spread::LrSchedule s{2.0, 0.2, 10, 100, spread::ScheduleKind::wsd, 0.2, shape};
    EXPECT_EQ(s.decay_start(), 80);
    EXPECT_DOUBLE_EQ(s.at(0), 2.0 / 11.0);
    EXPECT_DOUBLE_EQ(s.at(10), 2.0);
    EXPECT_DOUBLE_EQ(s.at(79), 2.0);
    EXPECT_DOUBLE_EQ(s.at(80), 2.0);  // the decay's first step is still at the peak (r = 0)
    EXPECT_DOUBLE_EQ(s.at(100), 0.2);
  }
  spread::LrSchedule linear{2.0, 0.2, 10, 100, spread::ScheduleKind::wsd, 0.2, spread::DecayShape::linear};
  spread::LrSchedule cosine{2.0, 0.2, 10, 100, spread::ScheduleKind::wsd, 0.2, spread::DecayShape::cosine};
  spread::LrSchedule sqrt{2.0, 0.2, 10, 100, spread::ScheduleKind::wsd, 0.2, spread::DecayShape::sqrt};
  // Step 85: a quarter of the decay. linear 1 - 1/4; cosine (1 + cos(pi/4)) / 2; sqrt 1 - 1/2.
  EXPECT_NEAR(linear.at(85), 0.2 + 1.8 * 0.75, 1e-15);
  EXPECT_NEAR(cosine.at(85), 0.2 + 1.8 * 0.5 * (1.0 + std::sqrt(0.5)), 1e-15);
  EXPECT_NEAR(sqrt.at(85), 0.2 + 1.8 * 0.5, 1e-15);
  EXPECT_NEAR(linear.at(99), 0.2 + 1.8 * 0.05, 1e-15);
}

TEST(Schedule, ScaleIsTheRateOverThePeak) {
  spread::LrSchedule s{2.0, 0.2, 10, 100, spread::ScheduleKind::wsd, 0.2};
  EXPECT_DOUBLE_EQ(s.scale(50), 1.0);
  EXPECT_DOUBLE_EQ(s.scale(100), 0.1);
  EXPECT_DOUBLE_EQ(s.scale(0), 1.0 / 11.0);
  // train.lr = 0 freezes AdamW's parameters, not Muon's: the factor keeps the schedule's shape (min_lr is 0 then).
  spread::LrSchedule frozen{0.0, 0.0, 10, 100, spread::ScheduleKind::wsd, 0.2};
  EXPECT_DOUBLE_EQ(frozen.scale(50), 1.0);
  EXPECT_DOUBLE_EQ(frozen.scale(90), 0.5);
  EXPECT_DOUBLE_EQ(frozen.at(50), 0.0);
}

TEST(Schedule, TheRecipeChoosesIt) {
  const auto r = spread::parse_recipe("", "test.toml",
                                      {"train.schedule=wsd", "train.decay_fraction=0.25", "train.decay_shape=sqrt",
                                       "train.lr=0.5", "train.min_lr=0.05", "train.warmup_steps=4",
                                       "train.max_steps=40"});
  const spread::LrSchedule s = spread::make_schedule(r.train);
  EXPECT_EQ(s.kind, spread::ScheduleKind::wsd);
  EXPECT_EQ(s.decay_shape, spread::DecayShape::sqrt);
  EXPECT_EQ(s.decay_start(), 30);
  EXPECT_DOUBLE_EQ(s.at(29), 0.5);
  EXPECT_NEAR(s.at(32), 0.05 + 0.45 * (1.0 - std::sqrt(0.2)), 1e-15);
}

TEST(Schedule, AWarmupThatRunsIntoTheDecayIsRefusedNamingTheKey) {
  try {
    spread::parse_recipe("", "test.toml", {"train.schedule=wsd", "train.decay_fraction=0.5", "train.warmup_steps=60",
                                           "train.max_steps=100"});
    FAIL() << "no error";
  } catch (const spread::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("train.warmup_steps"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("step 50"), std::string::npos) << e.what();
  }
}
