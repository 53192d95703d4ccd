// The fuzz targets' corpora replayed (tests/fuzz/): every committed input, seeds and the crashes fuzzing found, is
// read by its target under the readers' contract (a UserError or acceptance, nothing else), within a time and a
// memory bound. A corpus file named accepted_* must be accepted and refused_* refused, so that the seeds keep
// reaching past the first check of their reader, and the inputs of known defects keep being refused.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "fuzz/fuzz_targets.h"
#include "spread/util/error.h"
#include "test_paths.h"

namespace fs = std::filesystem;
using spread::fuzz::Outcome;

namespace {

fs::path corpus_root() { return fs::path(SPREAD_TEST_DATA_DIR).parent_path() / "fuzz" / "corpus"; }

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int64_t peak_rss_mb() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024;
}

// Seconds one input may take: the fuzzing runs hold each target to 1 s under the sanitizers; here the margin is for
// a loaded CI machine.
constexpr double kSecondsPerInput = 10.0;

}  // namespace

TEST(FuzzCorpus, EveryTargetHasACorpusAndEveryCorpusATarget) {
  std::set<std::string> folders;
  for (const auto& entry : fs::directory_iterator(corpus_root())) folders.insert(entry.path().filename().string());
  for (const auto& target : spread::fuzz::targets()) {
    EXPECT_TRUE(folders.count(target.name)) << "no corpus folder for the target " << target.name;
    folders.erase(target.name);
    int accepted_seeds = 0;
    if (fs::is_directory(corpus_root() / target.name))
      for (const auto& entry : fs::directory_iterator(corpus_root() / target.name))
        accepted_seeds += entry.path().filename().string().rfind("accepted_", 0) == 0;
    EXPECT_GE(accepted_seeds, 1) << target.name << ": no seed that its reader accepts";
  }
  for (const auto& stray : folders) ADD_FAILURE() << "corpus folder " << stray << " names no target";
}

TEST(FuzzCorpus, EveryInputIsReadOrRefusedWithAUserErrorInBoundedTimeAndMemory) {
  int64_t inputs = 0;
  for (const auto& target : spread::fuzz::targets()) {
    const fs::path folder = corpus_root() / target.name;
    if (!fs::is_directory(folder)) continue;  // the test above names it
    for (const auto& entry : fs::directory_iterator(folder)) {
      const std::string name = entry.path().filename().string();
      const std::string bytes = file_bytes(entry.path());
      SCOPED_TRACE(std::string(target.name) + "/" + name);
      const int64_t rss_before = peak_rss_mb();
      const auto start = std::chrono::steady_clock::now();
      Outcome outcome{};
      std::string refusal;
      try {
        outcome = spread::fuzz::run_one(target, bytes, &refusal);
      } catch (const spread::fuzz::ContractBroken& e) {
        ADD_FAILURE() << e.what();
        continue;
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      ++inputs;
      EXPECT_LT(seconds, kSecondsPerInput);
      EXPECT_LE(peak_rss_mb() - rss_before, target.memory_bound_mb) << "MB of peak RSS added";
      if (name.rfind("accepted_", 0) == 0) EXPECT_EQ(outcome, Outcome::accepted) << "a seed its reader refuses: " << refusal;
      if (name.rfind("refused_", 0) == 0) EXPECT_EQ(outcome, Outcome::refused) << "an input its reader accepts";
    }
  }
  EXPECT_GT(inputs, 0);
}

// The harness itself: a bundle's files and the names it refuses (a name leaving the folder would let an input
// write outside the scratch folder).
TEST(FuzzCorpus, BundlesSplitIntoTheirFilesAndRefuseNamesOutsideTheFolder) {
  const auto files = spread::fuzz::split_bundle("ignored\n=== a.json\n{}\n=== sub/b.txt\nx\n=== e\n");
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0], (std::pair<std::string, std::string>{"a.json", "{}"}));
  EXPECT_EQ(files[1], (std::pair<std::string, std::string>{"sub/b.txt", "x"}));
  EXPECT_EQ(files[2], (std::pair<std::string, std::string>{"e", ""}));
  for (const char* bad : {"=== ../x\n", "=== /etc/x\n", "=== a b\n", "=== \n"})
    EXPECT_THROW(spread::fuzz::split_bundle(bad), spread::UserError) << bad;
}

// run_one's verdicts: a UserError is a refusal, another exception breaks the contract (a target that swallowed
// every exception, or passed every one, would fail here).
TEST(FuzzCorpus, OnlyAUserErrorIsARefusal) {
  const spread::fuzz::Target refuses{"t", "", 1, 1, [](std::string_view) { throw spread::UserError("bad"); }};
  const spread::fuzz::Target breaks{"t", "", 1, 1, [](std::string_view) { throw std::out_of_range("at"); }};
  const spread::fuzz::Target reads{"t", "", 1, 1, [](std::string_view) {}};
  EXPECT_EQ(spread::fuzz::run_one(refuses, ""), Outcome::refused);
  EXPECT_EQ(spread::fuzz::run_one(reads, ""), Outcome::accepted);
  EXPECT_THROW(spread::fuzz::run_one(breaks, ""), spread::fuzz::ContractBroken);
}
