// The parts of the library include only the parts below them (README, layout table): checkpoints, run files and the
// run lock (run/) and the encoder's forward passes (encode/) sit below everything that uses them, Hugging Face
// import and export are one part (interchange/), and nothing but the CLI's train command and the tools includes
// train/. Read from the source tree, so a stray #include fails here rather than in a review.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "test_paths.h"

namespace fs = std::filesystem;

namespace {

// Bottom first; the parts of one row may include each other (tasks evaluate with eval's perplexity and retrieval,
// and eval reads the maxsim task's pooling options).
const std::vector<std::vector<std::string>> kParts = {
    {"util"}, {"runtime"}, {"config"}, {"log"}, {"data"}, {"model"}, {"pooling"}, {"losses"}, {"diagnostics"},
    {"encode"}, {"run"}, {"interchange"}, {"tasks", "eval"}, {"train"}};

std::map<std::string, size_t> part_ranks() {
  std::map<std::string, size_t> rank;
  for (size_t i = 0; i < kParts.size(); ++i)
    for (const auto& p : kParts[i]) rank[p] = i;
  return rank;
}

struct SourceFile {
  std::string path, part, text;
};

// "path includes part X, which is above its own part Y" for each such include.
std::vector<std::string> layering_violations(const std::vector<SourceFile>& files) {
  const auto rank = part_ranks();
  static const std::regex include(R"re(#include "spread/([a-z_]+)/)re");
  std::vector<std::string> out;
  for (const auto& f : files) {
    const auto own = rank.find(f.part);
    if (own == rank.end()) continue;  // cli, tools, shim: above every part
    for (std::sregex_iterator it(f.text.begin(), f.text.end(), include), end; it != end; ++it) {
      const std::string other = (*it)[1];
      const auto r = rank.find(other);
      if (r == rank.end())
        out.push_back(f.path + " includes '" + other + "', which is no part of the library");
      else if (r->second > own->second)
        out.push_back(f.path + " (part " + f.part + ") includes " + other + ", a part above it");
    }
  }
  return out;
}

std::vector<SourceFile> library_files(const fs::path& root) {
  std::vector<SourceFile> files;
  for (const fs::path base : {root / "src", root / "include" / "spread"})
    for (const auto& e : fs::recursive_directory_iterator(base)) {
      if (!e.is_regular_file()) continue;
      const std::string part = fs::relative(e.path(), base).begin()->string();
      std::ifstream in(e.path());
      files.push_back({e.path().string(), part, {std::istreambuf_iterator<char>(in), {}}});
    }
  return files;
}

}  // namespace

TEST(Layering, EachPartIncludesOnlyThePartsBelowIt) {
  const fs::path root = fs::path(spread::testing::test_data_dir()) / ".." / "..";
  const auto files = library_files(root);
  ASSERT_GT(files.size(), 100u) << "the source tree was not found under " << root;
  for (const auto& v : layering_violations(files)) ADD_FAILURE() << v;
}

// The rule itself, on made-up files: an include upwards and an unknown part are reported, the rest are not.
TEST(Layering, AnIncludeOfAPartAboveIsReported) {
  const std::vector<SourceFile> files = {
      {"src/eval/a.cpp", "eval", "#include \"spread/train/trainer.h\"\n#include \"spread/run/setup.h\"\n"},
      {"src/interchange/b.cpp", "interchange", "#include \"spread/export/export.h\"\n"},
      {"src/tasks/c.cpp", "tasks", "#include \"spread/eval/perplexity.h\"\n"},
      {"src/cli/d.cpp", "cli", "#include \"spread/train/trainer.h\"\n"}};
  const auto v = layering_violations(files);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_NE(v[0].find("src/eval/a.cpp (part eval) includes train"), std::string::npos) << v[0];
  EXPECT_NE(v[1].find("'export', which is no part"), std::string::npos) << v[1];
}
