#pragma once
// safetensors files, written and read from the format's specification (no C++ package exists in Debian):
//   8 bytes   N, the header's length, unsigned little-endian
//   N bytes   a JSON object: {"__metadata__": {"format": "pt"}, "NAME": {"dtype": "F32", "shape": [..],
//             "data_offsets": [BEGIN, END]}, ...}, padded with spaces to a multiple of 8 bytes
//   the rest  the tensors' bytes, row-major, little-endian; offsets are relative to the start of this buffer
// Promises: the writer puts tensors in name order and the JSON keys in sorted order, so the same tensors give the
// same bytes (exports are byte-identical). The reader checks everything a bad file could get wrong (header length,
// JSON, dtype, shape, offsets in range, buffer covered exactly without holes or overlaps, END - BEGIN equal to
// the dtype's size times the shape's product) and raises UserError naming the file and the problem.
// Both assume a little-endian host (x86-64, aarch64), as LibTorch's own serialisation does.
#include <map>
#include <string>
#include <string_view>
#include <torch/types.h>

namespace spread {

using NamedTensors = std::map<std::string, torch::Tensor>;

// The file's bytes for `tensors` (any device; copied to CPU and made contiguous). Supported dtypes: F64, F32, F16,
// BF16, I64, I32, I16, I8, U8, BOOL. `metadata` becomes "__metadata__" (string values only, as the format says).
std::string safetensors_bytes(const NamedTensors& tensors,
                              const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

// Parses bytes written by any safetensors writer; `source` names the file in errors.
NamedTensors parse_safetensors(std::string_view bytes, const std::string& source);

// The same, with "__metadata__" too: its string values (the format allows no others; a value of another type,
// which some writers put there anyway, is left out rather than refused). `remedy` ends every error's hint.
struct SafetensorsContent {
  NamedTensors tensors;
  std::map<std::string, std::string> metadata;
};
SafetensorsContent parse_safetensors_content(std::string_view bytes, const std::string& source,
                                             const std::string& remedy = "export it again");

// Writes the file atomically (temporary name, fsync, rename).
void write_safetensors(const std::string& path, const NamedTensors& tensors);
// Reads and checks a file (UserError naming it when it is missing or malformed).
NamedTensors read_safetensors(const std::string& path);

}  // namespace spread
