// The .npy reader against files written by NumPy (tests/oracles/gen_socm_fixtures.py) and its own writer.
#include <gtest/gtest.h>
#include "test_paths.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "spread/data/npy.h"
#include "spread/util/error.h"

namespace {

std::string npy_fixture(const std::string& name) { return std::string(SPREAD_TEST_DATA_DIR) + "/socm/npy/" + name; }

// The fixture arrays hold a[i, j] = (4 i + j) / 8 with shape (3, 4).
void expect_arange_fixture(const Eigen::MatrixXd& m) {
  ASSERT_EQ(m.rows(), 3);
  ASSERT_EQ(m.cols(), 4);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(m(i, j), (4 * i + j) / 8.0) << i << "," << j;
}

// The UserError of reading `name`, which must name the file and contain `words`.
void expect_rejected(const std::string& name, const std::string& words) {
  const std::string path = npy_fixture(name);
  try {
    spread::read_npy_matrix(path);
    ADD_FAILURE() << name << " was accepted";
  } catch (const spread::UserError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(words), std::string::npos) << msg;
  }
}

}  // namespace

TEST(Npy, ReadsFloat64WrittenByNumpy) { expect_arange_fixture(spread::read_npy_matrix(npy_fixture("f8.npy"))); }

TEST(Npy, ReadsFloat32WrittenByNumpy) { expect_arange_fixture(spread::read_npy_matrix(npy_fixture("f4.npy"))); }

TEST(Npy, ReadsFormatVersion2) { expect_arange_fixture(spread::read_npy_matrix(npy_fixture("f8_v2.npy"))); }

TEST(Npy, ReadsAnArrayWithoutRows) {
  Eigen::MatrixXd m = spread::read_npy_matrix(npy_fixture("f8_empty.npy"));
  EXPECT_EQ(m.rows(), 0);
  EXPECT_EQ(m.cols(), 4);
}

TEST(Npy, RejectsWhatItCannotReadNamingTheFile) {
  expect_rejected("bad_fortran.npy", "Fortran order");
  expect_rejected("bad_int32.npy", "'<i4'");
  expect_rejected("bad_3d.npy", "3 dimensions");
  expect_rejected("bad_1d.npy", "1 dimensions");
  expect_rejected("bad_big_endian.npy", "'>f8'");
  expect_rejected("bad_truncated.npy", "truncated");
  expect_rejected("bad_not_npy.npy", "not a NumPy .npy file");
  expect_rejected("missing.npy", "cannot open");
}

TEST(Npy, WriterRoundTripsAndAlignsTheDataLikeNumpy) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal;
  Eigen::MatrixXd m(5, 7);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = normal(rng);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("spread_npy_" + std::to_string(::getpid()) + ".npy")).string();
  spread::write_npy_matrix(path, m);
  EXPECT_EQ(spread::read_npy_matrix(path), m);  // bit-exact
  // numpy aligns the data to 64 bytes: the file is header (a multiple of 64) plus the data.
  EXPECT_EQ(std::filesystem::file_size(path) % 64, (5 * 7 * 8) % 64);
  std::remove(path.c_str());
}
