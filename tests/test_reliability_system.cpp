// Reliability of the system around a run (issue 29): the data root that recipes name their data sets by, the
// memory estimate that refuses a shape the host cannot hold, and the local launcher and rendezvous of data-parallel
// runs when a rank fails or the port is taken. CLI tests drive the built binary as a user would.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "cli_run.h"
#include "cli_worker.h"
#include "spread/config/recipe.h"
#include "spread/log/metrics_log.h"
#include "spread/util/error.h"

namespace fs = std::filesystem;
using spread::testing::fresh_temp_dir;
using spread::testing::read_text;
using spread::testing::run_spread;
using spread::testing::start_worker;
using spread::testing::wait_worker;
using spread::testing::Worker;

namespace {

const fs::path kRepo = fs::path(SPREAD_TEST_DATA_DIR) / ".." / "..";

std::string user_error_message(const std::function<void()>& body) {
  try {
    body();
  } catch (const spread::UserError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

size_t line_count(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n';
  return n + (!text.empty() && text.back() != '\n');
}

// Sets an environment variable for the life of the object (unset = nullptr), restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

void write_corpus(const fs::path& file, int lines) {
  std::ofstream out(file);
  for (int i = 0; i < lines; ++i) out << "to be or not to be, that is the question " << i % 11 << "\n";
}

}  // namespace

// --- the data root ------------------------------------------------------------------------------------------------

// "${data_root}" in each path key becomes data.root; the resolved recipe (what a run saves) holds the folder and the
// resolved paths, and reads back the same.
TEST(DataRoot, StandsForTheFolderInEveryPathKeyAndIsSavedResolved) {
  const auto dir = fresh_temp_dir("data_root");
  fs::create_directories(dir / "beir");
  std::ofstream(dir / "c.txt") << "text\n";
  std::ofstream(dir / "sts.csv") << "a,b,1\n";
  const std::string toml = "[data]\nsource = \"text\"\nroot = \"" + dir.string() +
                           "\"\npath = \"${data_root}/c.txt\"\n[eval]\nsts = \"${data_root}/sts.csv\"\n"
                           "beir = \"${data_root}/beir\"\n";
  const spread::Recipe r = spread::parse_recipe(toml, "r.toml");
  ASSERT_EQ(r.data.path.size(), 1u);
  EXPECT_EQ(r.data.path[0], dir.string() + "/c.txt");
  EXPECT_EQ(r.eval.sts, dir.string() + "/sts.csv");
  EXPECT_EQ(r.eval.beir, dir.string() + "/beir");
  EXPECT_EQ(r.data.root, dir.string());
  const std::string saved = spread::recipe_to_toml(r);
  EXPECT_FALSE(contains(saved, "${")) << saved;
  EXPECT_TRUE(contains(saved, "'" + dir.string() + "/c.txt'") || contains(saved, "\"" + dir.string() + "/c.txt\""))
      << saved;
  const spread::Recipe again = spread::parse_recipe(saved, "recipe.toml");
  EXPECT_EQ(again.data.path, r.data.path);
  EXPECT_EQ(again.data.root, r.data.root);
  // --set data.root moves every path with it.
  fs::create_directories(dir / "other");
  std::ofstream(dir / "other" / "c.txt") << "text\n";
  const spread::Recipe moved = spread::parse_recipe("[data]\nsource = \"text\"\npath = \"${data_root}/c.txt\"\n", "r.toml",
                                                    {"data.root=" + (dir / "other").string()});
  EXPECT_EQ(moved.data.path[0], (dir / "other").string() + "/c.txt");
  fs::remove_all(dir);
}

// Without data.root: SPREAD_DATA, else ../shared/data; a path made from the root that does not exist names the key,
// the root, where it came from and the fix.
TEST(DataRoot, ComesFromSpreadDataThenTheDefault) {
  const auto dir = fresh_temp_dir("data_root_env");
  std::ofstream(dir / "c.txt") << "text\n";
  const std::string toml = "[data]\nsource = \"text\"\npath = \"${data_root}/c.txt\"\n";
  {
    ScopedEnv env("SPREAD_DATA", dir.string().c_str());
    EXPECT_EQ(spread::parse_recipe(toml, "r.toml").data.path[0], dir.string() + "/c.txt");
  }
  ScopedEnv env("SPREAD_DATA", nullptr);
  const auto old_cwd = fs::current_path();
  fs::current_path(dir);  // no ../shared/data from here
  const std::string message = user_error_message([&] { spread::parse_recipe(toml, "r.toml"); });
  fs::current_path(old_cwd);
  EXPECT_TRUE(contains(message, "r.toml: key 'data.path': '../shared/data/c.txt' does not exist")) << message;
  EXPECT_TRUE(contains(message, "data root '../shared/data', from the default")) << message;
  EXPECT_TRUE(contains(message, "SPREAD_DATA")) << message;
  const std::string unknown = user_error_message(
      [&] { spread::parse_recipe("[eval]\nsts = \"${data}/sts.csv\"\n", "r.toml"); });
  EXPECT_TRUE(contains(unknown, "key 'eval.sts'") && contains(unknown, "unknown variable")) << unknown;
  fs::remove_all(dir);
}

// The shipped recipes name no ../shared folder; without the data a user gets one line and exit code 2, before
// anything is written.
TEST(DataRoot, ShippedRecipesNeedTheRootOnlyAndSayHowToSetIt) {
  for (const auto& entry : fs::directory_iterator(kRepo / "recipes")) {
    const std::string text = read_text(entry.path().string());
    EXPECT_FALSE(contains(text, "../shared")) << entry.path();
  }
  const auto dir = fresh_temp_dir("data_root_cli");
  setenv("SPREAD_DATA", (dir / "absent").c_str(), 1);
  const auto r = run_spread("train " + (kRepo / "recipes" / "shakespeare_char.toml").string() +
                            " --set run.out_dir=" + dir.string());
  unsetenv("SPREAD_DATA");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(line_count(r.output), 1u) << r.output;
  EXPECT_TRUE(contains(r.output, "key 'data.path'") && contains(r.output, "from SPREAD_DATA")) << r.output;
  EXPECT_FALSE(fs::exists(dir / "shakespeare_char"));
  fs::remove_all(dir);
}
