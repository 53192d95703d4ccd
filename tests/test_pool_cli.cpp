// `spread pool` as a user meets it: pooled vectors and labels that match SciPy's clusters (the fixtures of
// tests/oracles/gen_ward_fixtures.py), and one line with exit code 2 for every kind of bad input.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>

#include "cli_run.h"
#include "spread/data/npy.h"
#include "test_paths.h"

namespace fs = std::filesystem;
using spread::testing::run_spread;

namespace {

const fs::path kFixtures = fs::path(SPREAD_TEST_DATA_DIR) / "ward";

// A 1-D little-endian int64 .npy file (format 1.0), as `spread pool` writes labels; read here without spread.
std::vector<int64_t> read_labels(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) return {};
  const size_t header_len = size_t(uint8_t(bytes[8])) | size_t(uint8_t(bytes[9])) << 8;
  const std::string header = bytes.substr(10, header_len);
  EXPECT_NE(header.find("'<i8'"), std::string::npos) << header;
  std::vector<int64_t> labels((bytes.size() - 10 - header_len) / 8);
  std::memcpy(labels.data(), bytes.data() + 10 + header_len, labels.size() * 8);
  EXPECT_NE(header.find("(" + std::to_string(labels.size()) + ",)"), std::string::npos) << header;
  return labels;
}

nlohmann::json expected_case(const std::string& name) {
  std::ifstream in(kFixtures / "expected.json");
  const nlohmann::json fixtures = nlohmann::json::parse(in);
  for (const auto& c : fixtures["cases"])
    if (c["name"] == name) return c;
  ADD_FAILURE() << "no fixture case " << name;
  return {};
}

// One line, "error: ...", naming `what`, exit code 2.
void expect_one_line_error(const spread::testing::CliResult& r, const std::string& what) {
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(r.output.rfind("error: ", 0), 0u) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_NE(r.output.find(what), std::string::npos) << r.output;
}

}  // namespace

TEST(PoolCli, LabelsAreScipysClustersInBothDistancesAndPrecisions) {
  const auto dir = spread::testing::fresh_temp_dir("pool_ok");
  fs::create_directories(dir / "in");
  fs::copy_file(kFixtures / "lattice_180.npy", dir / "in" / "doc64.npy");
  const Eigen::MatrixXd y17 = spread::read_npy_matrix((kFixtures / "clustered_17.npy").string());
  const Eigen::MatrixXf y17f = y17.cast<float>();  // the fixture's values are exact in float32
  const Eigen::Matrix<float, -1, -1, Eigen::RowMajor> rows17 = y17f;
  spread::write_npy_float32((dir / "in" / "doc32.npy").string(), rows17.data(), rows17.rows(), rows17.cols());
  std::ofstream(dir / "in" / "notes.txt") << "not a token list\n";
  for (const std::string mode : {"cosine", "euclidean"}) {
    SCOPED_TRACE(mode);
    const auto r = run_spread("pool --in " + (dir / "in").string() + " --out " + (dir / mode).string() +
                              " --pool-factor 4 --protected 0 --ward-distance " + mode);
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("pooled 2 documents"), std::string::npos) << r.output;
    // The pooling's own time (what bench_colbert compares with in-memory poolers) is reported beside the whole.
    std::smatch times;
    ASSERT_TRUE(std::regex_search(r.output, times, std::regex(R"(in ([0-9.]+) s \(pooling ([0-9.]+) s)"))) << r.output;
    EXPECT_GT(std::stod(times[2]), 0.0) << r.output;
    EXPECT_LE(std::stod(times[2]), std::stod(times[1]) + 0.005) << r.output;
    const auto lattice = expected_case("lattice_180")[mode]["maxclust"]["45"].get<std::vector<int64_t>>();
    const auto clustered = expected_case("clustered_17")[mode]["maxclust"]["4"].get<std::vector<int64_t>>();
    EXPECT_EQ(read_labels(dir / mode / "doc64.labels.npy"), lattice);
    EXPECT_EQ(read_labels(dir / mode / "doc32.labels.npy"), clustered);
    const Eigen::MatrixXd pooled = spread::read_npy_matrix((dir / mode / "doc32.npy").string());
    ASSERT_EQ(pooled.rows(), *std::max_element(clustered.begin(), clustered.end()) + 1);
    for (int64_t c = 0; c < pooled.rows(); ++c) {
      Eigen::RowVectorXd mean = Eigen::RowVectorXd::Zero(y17.cols());
      for (size_t i = 0; i < clustered.size(); ++i)
        if (clustered[i] == c) mean += y17.row(int64_t(i));
      EXPECT_LT((pooled.row(c) - mean.normalized()).cwiseAbs().maxCoeff(), 1e-12) << "cluster " << c;
    }
  }
  // The default protects the first token: label -1, its row unchanged in front.
  const auto r = run_spread("pool --in " + (dir / "in").string() + " --out " + (dir / "p").string() +
                            " --max-tokens 10");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto labels = read_labels(dir / "p" / "doc32.labels.npy");
  ASSERT_EQ(labels.size(), 17u);
  EXPECT_EQ(labels[0], -1);
  const Eigen::MatrixXd pooled = spread::read_npy_matrix((dir / "p" / "doc32.npy").string());
  EXPECT_LE(pooled.rows(), 10);
  EXPECT_EQ(pooled.row(0), y17.row(0));
  fs::remove_all(dir);
}

TEST(PoolCli, BadInputIsOneLineNamingItWithExitCode2) {
  const auto dir = spread::testing::fresh_temp_dir("pool_bad");
  const std::string in = (dir / "in").string(), out = " --out " + (dir / "out").string();
  fs::create_directories(in);
  fs::copy_file(kFixtures / "clustered_17.npy", dir / "in" / "a.npy");
  const std::string ok = "pool --in " + in + out;

  expect_one_line_error(run_spread("pool --in " + (dir / "missing").string() + out + " --pool-factor 2"), "missing");
  expect_one_line_error(run_spread(ok + " --pool-factor 2 --max-tokens 8"), "exactly one budget");
  expect_one_line_error(run_spread(ok + " --pool-factor 0.5"), "--pool-factor");
  expect_one_line_error(run_spread(ok + " --max-tokens=-3"), "--max-tokens");
  expect_one_line_error(run_spread(ok + " --max-tokens 2.5"), "max-tokens");
  expect_one_line_error(run_spread(ok + " --distance-threshold=-1"), "--distance-threshold");
  expect_one_line_error(run_spread(ok + " --pool-factor 2 --protected=-1"), "--protected");
  expect_one_line_error(run_spread(ok + " --pool-factor 2 --ward-distance manhattan"), "--ward-distance");
  expect_one_line_error(run_spread("pool --in " + in + " --out " + in + " --pool-factor 2"), "--out");

  std::ofstream(dir / "in" / "b.npy") << "not numpy at all";
  expect_one_line_error(run_spread(ok + " --pool-factor 2"), "b.npy");
  fs::remove(dir / "in" / "b.npy");
  Eigen::MatrixXd bad = spread::read_npy_matrix((kFixtures / "clustered_17.npy").string());
  bad(3, 2) = std::numeric_limits<double>::quiet_NaN();
  spread::write_npy_matrix((dir / "in" / "c.npy").string(), bad);
  expect_one_line_error(run_spread(ok + " --pool-factor 2"), "c.npy");
  fs::remove_all(dir);
}

TEST(PoolCli, HasHelp) {
  const auto r = run_spread("pool --help");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("--pool-factor"), std::string::npos) << r.output;
}
