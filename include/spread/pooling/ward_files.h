#pragma once
// Ward pooling of a directory of token lists (`spread pool`), so that anyone can check the pooling against SciPy:
// every `<name>.npy` in the input directory (one document, n x d, float32 or float64, C order; names ending in
// `.labels.npy` are skipped) gives, in the output directory,
//   <name>.npy         the pooled vectors [P'+K, d] as float64 (protected rows first, then the unit cluster means)
//   <name>.labels.npy  int64 (n,): the cluster of every input token, -1 for protected tokens (labels + 1 =
//                      fcluster's numbering)
// Files are read in name order, a bounded number at a time, and pooled on worker threads. Bad input (no directory,
// no .npy file, a file that is not a 2-D float array, a non-finite value, output over the input) throws UserError
// naming the file; documents before it have been written. The output names are checked before any pooling and each
// file is replaced whole (util/file.h: an existing one is replaced, a symbolic link at a name is refused).
#include <cstdint>
#include <functional>
#include <string>

#include "spread/pooling/ward.h"

namespace spread {

struct PoolFilesSummary {
  int64_t documents = 0;
  int64_t tokens = 0;   // input tokens, all documents
  int64_t vectors = 0;  // output vectors, all documents
  double pooling_seconds = 0;  // wall time inside the pooling itself, without reading and writing the files (what
                               // a benchmark against an in-memory pooler compares)
};

// progress(done, total) is called after each group of documents is written.
PoolFilesSummary pool_token_files(const std::string& in_dir, const std::string& out_dir, const WardBudget& budget,
                                  const WardPoolOptions& opt, int threads,
                                  const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace spread
