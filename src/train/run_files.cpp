#include "spread/train/run_files.h"

#include <zlib.h>

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "spread/train/checkpoint.h"
#include "spread/util/error.h"
#include "spread/util/file.h"

namespace fs = std::filesystem;

namespace spread {
namespace {

constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "tokenizer.model", "tokenizer.chars"};
constexpr const char* kTokenFiles[] = {"train.bin", "val.bin"};

// "<bytes>:<crc32 hex>", read in chunks (token files can be large).
std::string fingerprint(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw user_error(path.string(), 0, "", "cannot read the file to check it");
  std::vector<char> buf(1 << 20);
  uLong crc = crc32(0L, Z_NULL, 0);
  uint64_t bytes = 0;
  while (in.read(buf.data(), std::streamsize(buf.size())) || in.gcount() > 0) {
    crc = crc32(crc, reinterpret_cast<const Bytef*>(buf.data()), uInt(in.gcount()));
    bytes += uint64_t(in.gcount());
  }
  return fmt::format("{}:{:08x}", bytes, uint32_t(crc));
}

nlohmann::json read_record(const fs::path& path) {
  auto text = read_whole_file(path.string());
  auto j = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
  if (!j.is_object())
    throw user_error(path.string(), 0, "", "unreadable record of the run's tokenizer and token files",
                     "restore it from a copy of the run directory");
  return j;
}

bool is_token_file(const std::string& name) {
  for (const char* t : kTokenFiles)
    if (name == t) return true;
  return false;
}

std::string recovery_hint(const std::string& name) {
  if (is_token_file(name))
    return "restore the data files the run started with and delete " + name +
           " to rebuild it, or start a new run under another run.name";
  return "restore it from a copy of the run directory; a tokenizer built again from the data may give the ids "
         "other meanings, so without the original start a new run under another run.name";
}

}  // namespace

void record_run_files(const std::string& run_dir) {
  nlohmann::json record = nlohmann::json::object();
  std::vector<std::string> names(std::begin(kTokenizerFiles), std::end(kTokenizerFiles));
  names.insert(names.end(), std::begin(kTokenFiles), std::end(kTokenFiles));
  for (const auto& name : names)
    if (fs::exists(fs::path(run_dir) / name)) record[name] = fingerprint(fs::path(run_dir) / name);
  write_file_atomic((fs::path(run_dir) / kRunFilesName).string(), record.dump(2) + "\n");
}

bool has_run_files_record(const std::string& run_dir) { return fs::exists(fs::path(run_dir) / kRunFilesName); }

void verify_run_files(const std::string& run_dir, MissingTokenFiles missing) {
  if (!has_run_files_record(run_dir)) return;
  const nlohmann::json record = read_record(fs::path(run_dir) / kRunFilesName);
  for (const auto& [name, recorded] : record.items()) {
    const fs::path path = fs::path(run_dir) / name;
    if (!fs::exists(path)) {
      if (is_token_file(name) && missing == MissingTokenFiles::Allowed) continue;
      throw user_error(path.string(), 0, "", "missing: this run's checkpoints were trained with it",
                       recovery_hint(name));
    }
    const std::string now = fingerprint(path), then = recorded.is_string() ? recorded.get<std::string>() : "?";
    if (now != then)
      throw user_error(path.string(), 0, "",
                       fmt::format("differs from the file the run started with (bytes:crc32 {} instead of {})",
                                   now, then),
                       recovery_hint(name));
  }
}

}  // namespace spread
