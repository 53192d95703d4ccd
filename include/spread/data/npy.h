#pragma once
// NumPy .npy files (format 1.0 and 2.0) holding one 2-D float32 or float64 array in C order, little-endian: the
// exchange format of `spread diagnose --token-lists` (one n x d token list per text), so results can be checked
// against other tools. Layout: "\x93NUMPY", major, minor, header length (uint16 for 1.0, uint32 for 2.0), a Python
// dict literal {'descr': '<f8', 'fortran_order': False, 'shape': (n, d), } padded with spaces, then the data.
#include <Eigen/Core>

#include <cstdint>

#include <string>
#include <vector>

namespace spread {

// Reads the array as float64. Throws UserError naming the file for anything else (another dtype, Fortran order,
// not 2-D, big-endian, format 3.0, a truncated file).
Eigen::MatrixXd read_npy_matrix(const std::string& path);

class OutputFileGroup;  // util/file.h

// The writers replace `path` whole or leave it as it was (util/file.h, write_output_file); with a `group`, when the
// group is committed (OutputFileGroup: many files, two syncs for all).

// Writes `m` as a C-order '<f8' array in format 1.0 (numpy.load reads it).
void write_npy_matrix(const std::string& path, const Eigen::MatrixXd& m, OutputFileGroup* group = nullptr);

// Writes rows x cols float32 values (row-major) as a C-order '<f4' array in format 1.0.
void write_npy_float32(const std::string& path, const float* data, int64_t rows, int64_t cols);

// Writes a 1-D '<i8' array in format 1.0 (the cluster labels of `spread pool`).
void write_npy_int64_vector(const std::string& path, const std::vector<int64_t>& values,
                            OutputFileGroup* group = nullptr);

}  // namespace spread
