// `spread pool`'s file handling (ward_files.h): list, read, check, pool, write.
#include "spread/pooling/ward_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "spread/data/npy.h"
#include "spread/util/error.h"
#include "spread/util/file.h"

namespace spread {
namespace {

namespace fs = std::filesystem;

// Documents read and held at once: bounds memory for large directories while keeping every thread busy.
constexpr size_t kGroup = 256;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<fs::path> token_list_files(const std::string& dir) {
  if (!fs::is_directory(dir))
    throw user_error(dir, 0, "--in", "not a directory", "give a directory of .npy token lists, one per document");
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && ends_with(name, ".npy") && !ends_with(name, ".labels.npy"))
      files.push_back(entry.path());
  }
  if (files.empty())
    throw user_error(dir, 0, "--in", "no .npy file", "one n x d float32/float64 array per document");
  std::sort(files.begin(), files.end());
  return files;
}

fs::path pooled_name(const fs::path& out_dir, const fs::path& input) { return out_dir / input.filename(); }
fs::path labels_name(const fs::path& out_dir, const fs::path& input) {
  return out_dir / (input.stem().string() + ".labels.npy");
}

// Before any pooling: the output folder exists (made if missing), is not the input folder, and every name to be
// written can be (util/file.h: no symbolic link, no directory in the way); temporaries of killed runs are removed.
void check_outputs(const std::string& in_dir, const std::string& out_dir, const std::vector<fs::path>& files) {
  make_directories(out_dir);
  std::error_code ec;
  if (fs::equivalent(in_dir, out_dir, ec))
    throw user_error(out_dir, 0, "--out", "is the input directory; pooled files would replace the token lists",
                     "choose another output directory");
  for (const fs::path& input : files) {
    check_output_file(pooled_name(out_dir, input).string(), "--out");
    check_output_file(labels_name(out_dir, input).string(), "--out");
  }
  remove_stale_temporaries(out_dir);
}

RowMatrixXd read_token_list(const fs::path& file) {
  RowMatrixXd x = read_npy_matrix(file.string());
  for (int64_t i = 0; i < x.rows(); ++i)
    for (int64_t j = 0; j < x.cols(); ++j)
      if (!std::isfinite(x(i, j)))
        throw user_error(file.string(), 0, "", fmt::format("token {} has a non-finite value ({}) at column {}", i,
                                                           x(i, j), j),
                         "pooling needs finite vectors; check the encoder's output");
  return x;
}

void write_pooled(const fs::path& out_dir, const fs::path& input, const WardPooled& pooled, OutputFileGroup& group) {
  write_npy_matrix(pooled_name(out_dir, input).string(), pooled.vectors, &group);
  write_npy_int64_vector(labels_name(out_dir, input).string(), pooled.labels, &group);
}

}  // namespace

PoolFilesSummary pool_token_files(const std::string& in_dir, const std::string& out_dir, const WardBudget& budget,
                                  const WardPoolOptions& opt, int threads,
                                  const std::function<void(int64_t, int64_t)>& progress) {
  const std::vector<fs::path> files = token_list_files(in_dir);
  check_outputs(in_dir, out_dir, files);
  PoolFilesSummary summary;
  for (size_t begin = 0; begin < files.size(); begin += kGroup) {
    const size_t end = std::min(files.size(), begin + kGroup);
    std::vector<RowMatrixXd> docs;
    for (size_t f = begin; f < end; ++f) docs.push_back(read_token_list(files[f]));
    const auto pool_start = std::chrono::steady_clock::now();
    const std::vector<WardPooled> pooled = ward_pool_many(docs, budget, opt, threads);
    summary.pooling_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - pool_start).count();
    OutputFileGroup group;  // a group's files are replaced together, at two syncs for all of them
    for (size_t i = 0; i < docs.size(); ++i) {
      write_pooled(out_dir, files[begin + i], pooled[i], group);
      summary.tokens += docs[i].rows();
      summary.vectors += pooled[i].vectors.rows();
    }
    group.commit();
    summary.documents = int64_t(end);
    if (progress) progress(summary.documents, int64_t(files.size()));
  }
  return summary;
}

}  // namespace spread
