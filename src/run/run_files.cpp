#include "spread/run/run_files.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "spread/run/checkpoint.h"
#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_depth.h"

namespace fs = std::filesystem;

namespace spread {
namespace {

constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "tokenizer.model", "tokenizer.chars"};
constexpr const char* kTokenFiles[] = {"train.bin", "val.bin"};

// "<bytes>:<crc32 hex>", read in chunks (token files can be large).
std::string fingerprint(const fs::path& path) {
  std::ifstream in = open_input_file(path.string());
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

// "<bytes>:<crc32 of the first and last MiB>": cheap for shards of gigabytes (run_files.h).
std::string shard_fingerprint(const fs::path& path) {
  constexpr uint64_t kEnds = 1 << 20;
  std::ifstream in = open_input_file(path.string());
  std::error_code ec;
  const uint64_t bytes = fs::file_size(path, ec);
  if (!in || ec) throw user_error(path.string(), 0, "", "cannot read the shard to check it");
  std::vector<char> buf(size_t(std::min(bytes, kEnds)));
  uLong crc = crc32(0L, Z_NULL, 0);
  for (const uint64_t at : {uint64_t(0), bytes - buf.size()}) {
    in.seekg(std::streamoff(at));
    if (!in.read(buf.data(), std::streamsize(buf.size())))
      throw user_error(path.string(), 0, "", "cannot read the shard to check it");
    crc = crc32(crc, reinterpret_cast<const Bytef*>(buf.data()), uInt(buf.size()));
  }
  return fmt::format("{}:{:08x}", bytes, uint32_t(crc));
}

nlohmann::json shard_record(const std::vector<ShardList>& shards) {
  nlohmann::json record = nlohmann::json::object();
  for (const auto& list : shards) {
    auto& files = record[list.key] = nlohmann::json::array();
    for (const auto& f : list.files) files.push_back({{"path", f}, {"fingerprint", shard_fingerprint(f)}});
  }
  return record;
}

// A recorded string, "" when the record holds something else there (it is a file in the run directory).
std::string string_at(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

const char* const kShardsKey = "shards";
const char* const kShardHint = "restore the shards the run started with, or start a new run under another run.name";

// The recipe's shards now against the record: the same files under each key, each with its recorded fingerprint.
void verify_shards(const nlohmann::json& recorded, const std::vector<ShardList>& now) {
  std::vector<std::string> keys_then, keys_now;
  for (const auto& [key, files] : recorded.items()) keys_then.push_back(key);
  for (const auto& list : now) keys_now.push_back(list.key);
  std::sort(keys_then.begin(), keys_then.end());
  std::sort(keys_now.begin(), keys_now.end());
  if (keys_then != keys_now)
    throw user_error("", 0, now.empty() ? keys_then.front() : now.front().key,
                     fmt::format("the run started with shards under {}, the recipe now names {}",
                                 fmt::join(keys_then, ", "), keys_now.empty() ? "none" : fmt::format("{}", fmt::join(keys_now, ", "))),
                     kShardHint);
  for (const auto& list : now) {
    const auto& files = recorded[list.key];
    std::vector<std::string> then;
    for (const auto& f : files) then.push_back(string_at(f, "path"));
    if (then != list.files)
      throw user_error("", 0, list.key,
                       fmt::format("names {} files now ({} ...), the run started with {} ({} ...)", list.files.size(),
                                   list.files.empty() ? "" : list.files.front(), then.size(),
                                   then.empty() ? "" : then.front()),
                       kShardHint);
    for (const auto& f : files) {
      const std::string path = string_at(f, "path"), fp = shard_fingerprint(path), then_fp = string_at(f, "fingerprint");
      if (fp != then_fp)
        throw user_error(path, 0, list.key,
                         fmt::format("differs from the shard the run started with (bytes:crc32 of its ends {} instead "
                                     "of {})", fp, then_fp),
                         kShardHint);
    }
  }
}

nlohmann::json read_record(const fs::path& path) {
  auto text = read_whole_file(path.string());
  if (text) refuse_deep_json(*text, path.string());
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

FreshStartCleanup::FreshStartCleanup(const std::string& run_dir) : run_dir_(run_dir) {
  std::error_code ec;
  fs::path missing;
  for (fs::path p = fs::absolute(run_dir, ec).lexically_normal(); !p.empty() && !fs::exists(fs::symlink_status(p, ec));
       p = p.parent_path()) {
    missing = p;
    if (p == p.parent_path()) break;
  }
  created_root_ = missing.string();
  if (created_root_.empty())
    for (const auto& e : fs::directory_iterator(run_dir, ec)) entries_before_.insert(e.path().filename().string());
}

FreshStartCleanup::~FreshStartCleanup() {
  if (!armed_) return;
  std::error_code ignored;  // a destructor that runs while an error unwinds: removal is best effort
  if (!created_root_.empty()) {
    fs::remove_all(created_root_, ignored);
    return;
  }
  std::vector<fs::path> added;
  for (const auto& e : fs::directory_iterator(run_dir_, ignored))
    if (!entries_before_.count(e.path().filename().string())) added.push_back(e.path());
  for (const auto& p : added) fs::remove_all(p, ignored);
}

void record_run_files(const std::string& run_dir, const std::vector<ShardList>& shards) {
  nlohmann::json record = nlohmann::json::object();
  if (!shards.empty()) record[kShardsKey] = shard_record(shards);
  std::vector<std::string> names(std::begin(kTokenizerFiles), std::end(kTokenizerFiles));
  names.insert(names.end(), std::begin(kTokenFiles), std::end(kTokenFiles));
  for (const auto& name : names)
    if (fs::exists(fs::path(run_dir) / name)) record[name] = fingerprint(fs::path(run_dir) / name);
  write_file_atomic((fs::path(run_dir) / kRunFilesName).string(), record.dump(2) + "\n");
}

bool has_run_files_record(const std::string& run_dir) { return fs::exists(fs::path(run_dir) / kRunFilesName); }

void verify_run_files(const std::string& run_dir, MissingTokenFiles missing,
                      const std::optional<std::vector<ShardList>>& shards) {
  if (!has_run_files_record(run_dir)) return;
  const nlohmann::json record = read_record(fs::path(run_dir) / kRunFilesName);
  // A record without shards was written by a spread that recorded none: nothing to check, as without a record.
  if (shards && record.contains(kShardsKey))
    verify_shards(record[kShardsKey].is_object() ? record[kShardsKey] : nlohmann::json::object(), *shards);
  for (const auto& [name, recorded] : record.items()) {
    if (name == kShardsKey) continue;
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
