#include "spread/data/safetensors.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_text.h"
#include "spread/util/mapped_file.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian; so is this host's");

namespace spread {
namespace {

// The format's dtype names (upper case, as the specification lists them).
const std::vector<std::pair<std::string, torch::ScalarType>>& dtype_table() {
  static const std::vector<std::pair<std::string, torch::ScalarType>> table = {
      {"F64", torch::kFloat64}, {"F32", torch::kFloat32}, {"F16", torch::kFloat16}, {"BF16", torch::kBFloat16},
      {"I64", torch::kInt64},   {"I32", torch::kInt32},   {"I16", torch::kInt16},   {"I8", torch::kInt8},
      {"U8", torch::kUInt8},    {"BOOL", torch::kBool}};
  return table;
}

std::string dtype_name(torch::ScalarType type, const std::string& tensor) {
  for (const auto& [name, t] : dtype_table())
    if (t == type) return name;
  throw UserError(fmt::format("safetensors: tensor '{}' has dtype {}, which spread does not write", tensor,
                              c10::toString(type)));
}

// Header limit: the reference implementation refuses headers over 100 MB too, so a corrupt length cannot make
// the reader allocate gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct Entry {
  std::string name;
  torch::ScalarType type;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

Entry parse_entry(const std::string& name, const nlohmann::json& j, const std::string& source,
                  const std::string& remedy) {
  auto bad = [&](const std::string& problem) {
    return user_error(source, 0, name, problem, "the file is damaged or not a safetensors file: " + remedy);
  };
  if (!j.is_object() || !j.contains("dtype") || !j.contains("shape") || !j.contains("data_offsets"))
    throw bad("entry needs dtype, shape and data_offsets");
  Entry e;
  e.name = name;
  const auto& dtype = j["dtype"];
  auto it = std::find_if(dtype_table().begin(), dtype_table().end(),
                         [&](const auto& p) { return dtype.is_string() && p.first == dtype.get<std::string>(); });
  if (it == dtype_table().end()) throw bad("unknown or unsupported dtype " + dtype.dump());
  e.type = it->second;
  if (!j["shape"].is_array()) throw bad("shape is not an array");
  for (const auto& d : j["shape"]) {
    // 2^64 - 1 read as int64_t is -1: with another dimension 0 it passed the byte count and LibTorch refused it.
    if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      throw bad("shape holds " + d.dump() + ", not a size");
    e.shape.push_back(d.get<int64_t>());
  }
  const auto& off = j["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    throw bad("data_offsets is not [BEGIN, END]");
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  if (e.end < e.begin) throw bad("data_offsets END lies before BEGIN");
  uint64_t count = 1;
  for (int64_t d : e.shape) {
    if (d != 0 && count > (uint64_t(1) << 62) / uint64_t(d)) throw bad("shape too large");
    count *= uint64_t(d);
  }
  const uint64_t expected = count * uint64_t(c10::elementSize(e.type));
  if (e.end - e.begin != expected)
    throw bad(fmt::format("data_offsets span {} bytes but dtype and shape need {}", e.end - e.begin, expected));
  return e;
}

// The buffer must be covered exactly: sorted by BEGIN, each entry starts where the previous one ended.
void check_coverage(std::vector<Entry>& entries, uint64_t buffer_size, const std::string& source,
                    const std::string& remedy) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  for (const auto& e : entries) {
    if (e.begin != at)
      throw user_error(source, 0, e.name,
                       fmt::format("data_offsets begin at {} but the previous tensor ends at {} (a hole or an overlap)",
                                   e.begin, at),
                       "the file is damaged: " + remedy);
    at = e.end;
  }
  if (at != buffer_size)
    throw user_error(source, 0, "", fmt::format("the tensors cover {} data bytes but the file holds {}", at,
                                                buffer_size),
                     "the file is truncated or damaged: " + remedy);
}

}  // namespace

std::string safetensors_bytes(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<torch::Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {  // std::map: name order
    if (name == "__metadata__") throw UserError("safetensors: '__metadata__' cannot name a tensor");
    auto c = t.detach().to(torch::kCPU).contiguous();
    const uint64_t bytes = uint64_t(c.numel()) * c.element_size();
    header[name] = {{"dtype", dtype_name(c.scalar_type(), name)},
                    {"shape", c.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(c);
  }
  std::string json = header.dump();  // nlohmann's objects are sorted maps: the same keys always dump alike
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + json.size() + offset);
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out.push_back(char((n >> (8 * i)) & 0xff));
  out += json;
  for (const auto& c : data) out.append(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
  return out;
}

NamedTensors parse_safetensors(std::string_view bytes, const std::string& source) {
  return parse_safetensors_content(bytes, source).tensors;
}

SafetensorsContent parse_safetensors_content(std::string_view bytes, const std::string& source,
                                             const std::string& remedy) {
  const std::string hint = "not a safetensors file, or a damaged one: " + remedy;
  if (bytes.size() < 8) throw user_error(source, 0, "", "shorter than the 8-byte header length", hint);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[size_t(i)])) << (8 * i);
  if (n > kMaxHeaderBytes || n > bytes.size() - 8)
    throw user_error(source, 0, "", fmt::format("header length {} exceeds the file ({} bytes)", n, bytes.size()),
                     hint);
  const std::string_view text = bytes.substr(8, n);
  // The format pads its header with spaces; the reference library refuses anything else after the JSON.
  if (text.find('\0') != std::string_view::npos)
    throw user_error(source, 0, "", "header holds a NUL byte, which JSON does not allow", hint);
  const nlohmann::json header = parse_json_text(text, source);
  if (!header.is_object()) throw user_error(source, 0, "", "header is not a JSON object", hint);
  std::vector<Entry> entries;
  SafetensorsContent out;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) throw user_error(source, 0, name, "is not an object of strings", hint);
      for (const auto& [key, text] : value.items())
        if (text.is_string()) out.metadata[key] = text.get<std::string>();
      continue;
    }
    entries.push_back(parse_entry(name, value, source, remedy));
  }
  const uint64_t data_start = 8 + n;
  check_coverage(entries, bytes.size() - data_start, source, remedy);
  for (const auto& e : entries) {
    auto t = torch::empty(e.shape, torch::TensorOptions().dtype(e.type));
    if (e.end > e.begin) std::memcpy(t.data_ptr(), bytes.data() + data_start + e.begin, e.end - e.begin);
    out.tensors[e.name] = t;
  }
  return out;
}

void write_safetensors(const std::string& path, const NamedTensors& tensors) {
  write_file_atomic(path, safetensors_bytes(tensors));
}

NamedTensors read_safetensors(const std::string& path) {
  const MappedFile file(path);
  return parse_safetensors(file.bytes(), path);
}

}  // namespace spread
