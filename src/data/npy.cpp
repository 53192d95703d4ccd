// Minimal .npy reader and writer for 2-D float arrays (format in npy.h). The host is assumed little-endian, as every
// platform spread builds on; arrays are converted to float64 on reading.
#include "spread/data/npy.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <charconv>
#include <cstring>
#include <fstream>
#include <vector>

#include "spread/util/error.h"
#include "spread/util/file.h"

namespace spread {
namespace {

constexpr char kMagic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
constexpr const char* kSaveHint =
    "save a 2-D C-order float32/float64 array: np.save(path, np.ascontiguousarray(x, 'f8'))";

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// The literal after 'key': in the header dict: a quoted string (without quotes), a tuple "(...)", or a bare word.
std::string dict_value(const std::string& header, const std::string& key, const std::string& path) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) k = header.find("\"" + key + "\"");
  size_t colon = k == std::string::npos ? k : header.find(':', k + key.size() + 2);
  if (colon == std::string::npos) throw user_error(path, 0, "", "the .npy header has no '" + key + "'", kSaveHint);
  size_t b = colon + 1;
  while (b < header.size() && header[b] == ' ') ++b;
  if (b >= header.size()) throw user_error(path, 0, "", "the .npy header is cut after '" + key + "'", kSaveHint);
  const char open = header[b];
  const char close = open == '(' ? ')' : (open == '\'' || open == '"') ? open : '\0';
  size_t e = close ? header.find(close, b + 1) : header.find_first_of(",}", b);
  if (e == std::string::npos) throw user_error(path, 0, "", "malformed .npy header value for '" + key + "'", kSaveHint);
  return close ? header.substr(b + 1, e - b - 1) : trim(header.substr(b, e - b));
}

std::vector<int64_t> parse_shape(const std::string& tuple, const std::string& path) {
  std::vector<int64_t> shape;
  size_t b = 0;
  while (b <= tuple.size()) {
    size_t e = tuple.find(',', b);
    if (e == std::string::npos) e = tuple.size();
    std::string item = trim(tuple.substr(b, e - b));
    if (!item.empty()) {
      int64_t size = 0;
      const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), size);
      if (error == std::errc::result_out_of_range)
        throw user_error(path, 0, "", "a dimension of the shape (" + tuple + ") is larger than 2^63 - 1");
      if (error != std::errc() || end != item.data() + item.size() || size < 0)
        throw user_error(path, 0, "", "malformed shape (" + tuple + ") in the .npy header", kSaveHint);
      shape.push_back(size);
    }
    b = e + 1;
  }
  return shape;
}

constexpr uint32_t kMaxHeaderBytes = 10000;
constexpr int64_t kMaxEmptyArrayDimension = int64_t(1) << 24;

NpyHeader read_header(std::ifstream& in, const std::string& path) {
  char lead[8];
  if (!in.read(lead, 8) || std::memcmp(lead, kMagic, 6) != 0)
    throw user_error(path, 0, "", "not a NumPy .npy file (no \\x93NUMPY magic)", kSaveHint);
  const int major = static_cast<unsigned char>(lead[6]);
  uint32_t length = 0;
  if (major == 1) {
    unsigned char b[2];
    if (!in.read(reinterpret_cast<char*>(b), 2)) throw user_error(path, 0, "", "truncated .npy header");
    length = uint32_t(b[0]) | uint32_t(b[1]) << 8;
  } else if (major == 2) {
    unsigned char b[4];
    if (!in.read(reinterpret_cast<char*>(b), 4)) throw user_error(path, 0, "", "truncated .npy header");
    length = uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
  } else {
    throw user_error(path, 0, "", ".npy format version " + std::to_string(major) + ".x is not supported",
                     "versions 1.0 and 2.0 are read; " + std::string(kSaveHint));
  }
  // numpy's own reader refuses headers past 10,000 bytes (np.load's max_header_size); the length, up to 4 GB in
  // format 2.0, is checked before anything is allocated for it.
  if (length > kMaxHeaderBytes)
    throw user_error(path, 0, "", "the .npy header is " + std::to_string(length) + " bytes long, more than the " +
                                      std::to_string(kMaxHeaderBytes) + " numpy reads", kSaveHint);
  std::string header(length, '\0');
  if (!in.read(header.data(), std::streamsize(length))) throw user_error(path, 0, "", "truncated .npy header");
  NpyHeader h;
  h.descr = dict_value(header, "descr", path);
  const std::string fortran = dict_value(header, "fortran_order", path);
  if (fortran != "True" && fortran != "False")
    throw user_error(path, 0, "", "malformed fortran_order '" + fortran + "' in the .npy header", kSaveHint);
  h.fortran_order = fortran == "True";
  h.shape = parse_shape(dict_value(header, "shape", path), path);
  return h;
}

// Bytes per element of a supported dtype, or a UserError that names what the file holds.
size_t item_size(const NpyHeader& h, const std::string& path) {
  if (h.descr == "<f8") return 8;
  if (h.descr == "<f4") return 4;
  throw user_error(path, 0, "", "dtype '" + h.descr + "' is not supported (float32 or float64, little-endian)",
                   kSaveHint);
}

}  // namespace

Eigen::MatrixXd read_npy_matrix(const std::string& path) {
  std::ifstream in = open_input_file(path);
  if (!in) throw user_error(path, 0, "", "cannot open the .npy file");
  const NpyHeader h = read_header(in, path);
  const size_t item = item_size(h, path);
  if (h.fortran_order) throw user_error(path, 0, "", "the array is in Fortran order, C order is required", kSaveHint);
  if (h.shape.size() != 2)
    throw user_error(path, 0, "",
                     "the array has " + std::to_string(h.shape.size()) + " dimensions, 2 (n x d) are required",
                     "one text per file, tokens as rows: reshape to (n, d)");
  const int64_t rows = h.shape[0], cols = h.shape[1];
  // An empty array's other dimension is not bounded by the file's size; (0, 5e11) hung in the element loop of the
  // conversion below. Nothing spread reads has a dimension near this bound.
  if (rows == 0 || cols == 0) {
    if (std::max(rows, cols) > kMaxEmptyArrayDimension)
      throw user_error(path, 0, "", "the array is empty, shape (" + std::to_string(rows) + ", " +
                                        std::to_string(cols) + "), with a dimension past " +
                                        std::to_string(kMaxEmptyArrayDimension), kSaveHint);
    return Eigen::MatrixXd(rows, cols);
  }
  const auto header_end = in.tellg();
  in.seekg(0, std::ios::end);
  const auto available = uint64_t(in.tellg() - header_end);
  const uint64_t needed = uint64_t(rows) * uint64_t(cols) * item;
  if (cols > 0 && (uint64_t(rows) > available / uint64_t(cols) / item || needed > available))
    throw user_error(path, 0, "",
                     "truncated: shape (" + std::to_string(rows) + ", " + std::to_string(cols) + ") needs " +
                         std::to_string(needed) + " data bytes, the file holds " + std::to_string(available));
  in.seekg(header_end);
  std::vector<char> raw(needed);
  if (!in.read(raw.data(), std::streamsize(needed))) throw user_error(path, 0, "", "cannot read the array data");
  using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using RowMajorF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  if (item == 8) return Eigen::Map<const RowMajor>(reinterpret_cast<const double*>(raw.data()), rows, cols);
  return Eigen::Map<const RowMajorF>(reinterpret_cast<const float*>(raw.data()), rows, cols).cast<double>();
}

namespace {

// The format 1.0 header of a C-order array of `descr` ('<f4', '<f8', '<i8') and `shape` (a Python tuple literal
// such as "(3, 4)" or "(3,)").
std::string npy_header(const std::string& descr, const std::string& shape) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // numpy pads with spaces and ends with '\n' so that the data starts at a multiple of 64 bytes.
  const size_t unpadded = sizeof kMagic + 2 + 2 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  const char version_and_length[4] = {1, 0, char(header.size() & 0xff), char(header.size() >> 8)};
  return std::string(kMagic, sizeof kMagic) + std::string(version_and_length, 4) + header;
}

// The file as write_output_file writes it (util/file.h): whole or not at all, the previous one kept on failure.
void write_npy(const std::string& path, const std::string& descr, const std::string& shape, const void* data,
               size_t bytes, OutputFileGroup* group = nullptr) {
  const std::string header = npy_header(descr, shape);
  const auto write = [&](std::ostream& out) {
    out.write(header.data(), std::streamsize(header.size()));
    out.write(static_cast<const char*>(data), std::streamsize(bytes));
  };
  if (group != nullptr) group->add(path, write);
  else write_output_file(path, write);
}

std::string shape_2d(int64_t rows, int64_t cols) {
  return "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")";
}

}  // namespace

void write_npy_float32(const std::string& path, const float* data, int64_t rows, int64_t cols) {
  write_npy(path, "<f4", shape_2d(rows, cols), data, size_t(rows * cols) * sizeof(float));
}

void write_npy_matrix(const std::string& path, const Eigen::MatrixXd& m, OutputFileGroup* group) {
  const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> rows = m;
  write_npy(path, "<f8", shape_2d(m.rows(), m.cols()), rows.data(), size_t(rows.size()) * sizeof(double), group);
}

void write_npy_int64_vector(const std::string& path, const std::vector<int64_t>& values, OutputFileGroup* group) {
  write_npy(path, "<i8", "(" + std::to_string(values.size()) + ",)", values.data(), values.size() * sizeof(int64_t),
            group);
}

}  // namespace spread
