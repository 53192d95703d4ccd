// util/mapped_file.h: a mapped file that shrinks under the process (a shard truncated while a trainer reads it) is
// exit 2 naming the file, not a death by SIGBUS; a SIGBUS anywhere else still kills the process.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "spread/util/mapped_file.h"

namespace fs = std::filesystem;

namespace {

fs::path file_of(size_t bytes, const std::string& name) {
  const fs::path p = fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  std::ofstream(p, std::ios::binary | std::ios::trunc) << std::string(bytes, 'x');
  return p;
}

// Maps a new file of 1 MiB, removes its name, cuts it to nothing through a descriptor and reads the byte at `offset`
// of the mapping. Everything happens in the death test's child, which leaves no file behind.
char read_after_truncation(spread::MappedFile::Access access, size_t offset) {
  const fs::path file = file_of(1 << 20, "spread_mapped_shrinks");
  const int fd = ::open(file.c_str(), O_RDWR);
  const spread::MappedFile mapped(file.string(), access);
  fs::remove(file);
  if (fd < 0 || ::ftruncate(fd, 0) != 0) std::abort();
  return static_cast<const volatile char*>(static_cast<const void*>(mapped.bytes().data()))[offset];
}

// A SIGBUS raised while a file is mapped, at no mapped address.
void raise_sigbus_while_mapped() {
  const fs::path file = file_of(4096, "spread_mapped_other");
  const spread::MappedFile mapped(file.string());  // the handler is installed
  fs::remove(file);
  std::raise(SIGBUS);
}

TEST(MappedFileDeathTest, AFileTruncatedWhileMappedIsExitTwoNamingIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const auto access : {spread::MappedFile::Access::random, spread::MappedFile::Access::whole})
    EXPECT_EXIT(read_after_truncation(access, 700000), ::testing::ExitedWithCode(2),
                "error: /.*spread_mapped_shrinks_[0-9]+: shrank while spread read it");
}

TEST(MappedFileDeathTest, ASigbusElsewhereStillKills) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(raise_sigbus_while_mapped(), ::testing::KilledBySignal(SIGBUS), "");
}

TEST(MappedFile, AnUnchangedFileReadsAsWritten) {
  const fs::path file = file_of(10000, "spread_mapped_reads");
  {
    const spread::MappedFile mapped(file.string(), spread::MappedFile::Access::random);
    ASSERT_EQ(mapped.bytes().size(), 10000u);
    EXPECT_EQ(mapped.bytes()[9999], 'x');
  }
  fs::remove(file);
}

}  // namespace
