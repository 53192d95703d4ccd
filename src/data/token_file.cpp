#include "spread/data/token_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "spread/util/error.h"
#include "spread/util/file.h"

namespace spread {
namespace {

constexpr char kMagic[8] = {'S', 'P', 'R', 'D', 'T', 'O', 'K', '\0'};
constexpr uint32_t kVersion = 1;
constexpr int32_t kShardMagic = 20240520;
constexpr size_t kShardHeaderInts = kShardHeaderBytes / 4;
// header[3] of a shard whose header[4..5] hold its text's byte count: the bytes "SPRD", a value no llm.c script
// writes there (they write 0).
constexpr int32_t kSourceBytesMarker = 0x44525053;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t width;
  uint64_t count;
  uint64_t source_bytes;
};
static_assert(sizeof(Header) == 32, "token file header must be 32 bytes");

}  // namespace

void write_token_file(const std::string& path, const std::vector<int32_t>& tokens, uint64_t source_bytes) {
  int32_t max_id = 0;
  for (auto t : tokens) max_id = std::max(max_id, t);
  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kVersion;
  h.width = max_id < 65536 ? 2 : 4;
  h.count = tokens.size();
  h.source_bytes = source_bytes;
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&h), sizeof h);
    if (h.width == 2) {
      std::vector<uint16_t> narrow(tokens.begin(), tokens.end());
      out.write(reinterpret_cast<const char*>(narrow.data()), std::streamsize(narrow.size() * 2));
    } else {
      out.write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * 4));
    }
    out.close();
    if (!out) {
      std::remove(tmp.c_str());  // a full disk must not also keep a partial file
      throw user_error(path, 0, "", "cannot write the token file", "check free disk space");
    }
  }
  rename_file(tmp, path);
}

std::string shard_header(uint32_t width, int64_t count, std::optional<uint64_t> source_bytes) {
  int32_t header[kShardHeaderInts] = {};
  header[0] = kShardMagic;
  header[1] = width == 2 ? 1 : 2;
  header[2] = int32_t(count);
  if (source_bytes) {
    header[3] = kSourceBytesMarker;
    std::memcpy(&header[4], &*source_bytes, sizeof(uint64_t));  // little endian, as the whole format
  }
  return std::string(reinterpret_cast<const char*>(header), sizeof header);
}

void write_token_shard(const std::string& path, const std::vector<int32_t>& tokens) {
  int32_t max_id = 0;
  for (auto t : tokens) max_id = std::max(max_id, t);
  const uint32_t width = max_id < 65536 ? 2 : 4;
  std::string bytes = shard_header(width, int64_t(tokens.size()), std::nullopt);
  if (width == 2) {
    std::vector<uint16_t> narrow(tokens.begin(), tokens.end());
    bytes.append(reinterpret_cast<const char*>(narrow.data()), narrow.size() * 2);
  } else {
    bytes.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 4);
  }
  write_file_atomic(path, bytes);
}

TokenFile::Part TokenFile::open_part(const std::string& path) {
  Part p;
  p.path = path;
  p.file = std::make_unique<MappedFile>(path, MappedFile::Access::random);
  const std::string_view bytes = p.file->bytes();
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), kMagic, 4) == 0) {
    Header h;
    // The count is compared by division: count * width wraps around for a count near 2^62 or 2^63, and a hostile
    // header then passed the check and the tokens were read past the end of the mapping.
    const bool ok = bytes.size() >= sizeof(Header) && (std::memcpy(&h, bytes.data(), sizeof h), true) &&
                    std::memcmp(h.magic, kMagic, 8) == 0 && h.version == kVersion && (h.width == 2 || h.width == 4) &&
                    (bytes.size() - sizeof(Header)) % h.width == 0 &&
                    h.count == (bytes.size() - sizeof(Header)) / h.width;
    if (!ok)
      throw user_error(path, 0, "", "not a valid spread token file (truncated, or a bad header or size)",
                       "delete it; it is rebuilt from the text");
    p.width = h.width;
    p.count = h.count;
    p.source_bytes = h.source_bytes;
    p.bytes_known = h.source_bytes > 0;
    p.data = bytes.data() + sizeof(Header);
    return p;
  }
  int32_t header[kShardHeaderInts] = {};
  if (bytes.size() >= sizeof header) std::memcpy(header, bytes.data(), sizeof header);
  if (header[0] != kShardMagic)
    throw user_error(path, 0, "", "not a token file: neither spread's (SPRDTOK) nor an llm.c shard (magic 20240520)",
                     "give token files made by `spread` or by llm.c / modded-nanogpt's data scripts");
  const uint32_t width = header[1] == 1 ? 2 : header[1] == 2 ? 4 : 0;
  const uint64_t body = bytes.size() - sizeof header;
  if (width == 0 || header[2] < 0 || body % width != 0 || uint64_t(header[2]) != body / width)
    throw user_error(path, 0, "",
                     fmt::format("a bad llm.c shard: version {} (1 = uint16, 2 = uint32 tokens), {} tokens in the "
                                 "header, {} bytes after it", header[1], header[2], body),
                     "the file is truncated or damaged; make it again");
  p.width = width;
  p.count = uint64_t(header[2]);
  p.bytes_known = header[3] == kSourceBytesMarker;
  if (p.bytes_known) std::memcpy(&p.source_bytes, &header[4], sizeof(uint64_t));
  p.data = bytes.data() + sizeof header;
  return p;
}

TokenFile::TokenFile(const std::string& path) : TokenFile(std::vector<std::string>{path}, 0, "") {}

TokenFile::TokenFile(const std::vector<std::string>& paths, int64_t vocab_size, const std::string& key)
    : vocab_size_(vocab_size), key_(key) {
  bool bytes_known = true;
  for (const auto& path : paths) {
    Part p = open_part(path);
    bytes_known = bytes_known && p.bytes_known;
    source_bytes_ += p.source_bytes;
    p.first = size_;
    size_ += p.count;
    parts_.push_back(std::move(p));
  }
  if (!bytes_known) source_bytes_ = 0;
}

const TokenFile::Part& TokenFile::part_at(uint64_t i) const {
  if (parts_.size() == 1) return parts_[0];
  const auto after = std::upper_bound(parts_.begin(), parts_.end(), i,
                                      [](uint64_t at, const Part& p) { return at < p.first; });
  return *(after - 1);
}

int32_t TokenFile::operator[](uint64_t i) const {
  const Part& p = part_at(i);
  const uint64_t k = i - p.first;
  return p.width == 2 ? int32_t(static_cast<const uint16_t*>(p.data)[k]) : static_cast<const int32_t*>(p.data)[k];
}

void TokenFile::copy(uint64_t start, uint64_t n, int64_t* out) const {
  if (start > size_ || n > size_ - start) throw std::out_of_range("TokenFile::copy past the end of the tokens");
  for (uint64_t i = 0; i < n;) {
    const Part& p = part_at(start + i);
    const uint64_t k = start + i - p.first, take = std::min(n - i, p.count - k);
    for (uint64_t j = 0; j < take; ++j)
      out[i + j] = p.width == 2 ? int64_t(static_cast<const uint16_t*>(p.data)[k + j])
                                : int64_t(static_cast<const int32_t*>(p.data)[k + j]);
    if (vocab_size_ > 0)
      for (uint64_t j = 0; j < take; ++j)
        if (out[i + j] < 0 || out[i + j] >= vocab_size_)
          throw user_error(p.path, 0, key_,
                           fmt::format("token {} is id {}, outside the tokenizer's {} ids", k + j, out[i + j],
                                       vocab_size_),
                           "give shards made with the tokenizer that tokenizer.path or tokenizer.model names");
    i += take;
  }
}

}  // namespace spread
