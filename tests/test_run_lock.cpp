// The run directory's lock within one process: flock(2) locks belong to open file descriptions, so a second
// RunLock on the same directory conflicts with the first as another process's would (tests/test_reliability.cpp
// checks two processes and kill -9).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <optional>

#include "spread/run/run_lock.h"
#include "spread/util/error.h"

namespace fs = std::filesystem;

TEST(RunLock, SecondLockIsRefusedNamingDirectoryAndHolderUntilTheFirstIsReleased) {
  const auto dir = fs::temp_directory_path() / ("spread_test_lock_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::optional<spread::RunLock> first(std::in_place, dir.string());
  try {
    spread::RunLock second(dir.string());
    FAIL() << "two locks on one run directory";
  } catch (const spread::UserError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(dir.string()), std::string::npos) << message;
    EXPECT_NE(message.find("pid " + std::to_string(::getpid())), std::string::npos) << message;
  }
  first.reset();
  EXPECT_NO_THROW(spread::RunLock again(dir.string()));
  fs::remove_all(dir);
}

TEST(RunLock, UncreatableLockFileIsAUserErrorNamingIt) {
  try {
    spread::RunLock lock("/nonexistent/run");
    FAIL() << "locked a directory that does not exist";
  } catch (const spread::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/run/train.lock"), std::string::npos) << e.what();
  }
}
