#pragma once
// Tokenised text, memory-mapped for reading: one file, or a set of shards read as one stream.
// Formats, told apart by their first bytes (little endian):
//   spread's own: magic "SPRDTOK\0" (8 bytes), u32 version (1), u32 bytes per token (2 or 4), u64 token count,
//     u64 byte count of the source text (for bits per byte), then the tokens.
//   llm.c / modded-nanogpt shards: a header of 256 int32: magic 20240520, version, token count (the rest zero);
//     then the tokens: version 1 = uint16 (llm.c's), version 2 = uint32, spread's extension for vocabularies past
//     65,536 ids (llm.c's readers refuse a version they do not know rather than misread it).
//     Byte count, spread's extension in ints llm.c leaves zero and its readers ignore: header[3] = 0x44525053
//     (the bytes "SPRD"), header[4..5] = the uint64 count of the source text's UTF-8 bytes (low int first).
//     `spread tokenize --shards` writes it (data/shard_writer.h); a shard without the marker (llm.c's own) holds no
//     byte count, and bits per byte is then unknown for it (source_bytes() = 0).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "spread/util/mapped_file.h"

namespace spread {

void write_token_file(const std::string& path, const std::vector<int32_t>& tokens, uint64_t source_bytes);
// An llm.c shard of `tokens`: version 1 (uint16) when every id fits, else version 2 (uint32); no byte count.
void write_token_shard(const std::string& path, const std::vector<int32_t>& tokens);

inline constexpr size_t kShardHeaderBytes = 256 * 4;
// The header of an llm.c shard of `count` tokens, each `width` bytes (2: version 1, 4: version 2), with the byte
// count of its source text when given. `count` must fit the header's int32.
std::string shard_header(uint32_t width, int64_t count, std::optional<uint64_t> source_bytes);

class TokenFile {
 public:
  // Throws UserError naming the file when it is missing, truncated or not a token file of either format.
  explicit TokenFile(const std::string& path);
  // The files in this order as one stream; `key` names the recipe key that gave them in errors. Ids are checked
  // as they are copied: one at or past vocab_size is a UserError naming the file and the token's position (0 = no
  // check).
  TokenFile(const std::vector<std::string>& paths, int64_t vocab_size, const std::string& key);

  uint64_t size() const { return size_; }
  // The source text's bytes, or 0 when a file does not say (llm.c's own shards; one such file among the shards
  // makes the whole stream's count unknown).
  uint64_t source_bytes() const { return source_bytes_; }
  size_t files() const { return parts_.size(); }
  int32_t operator[](uint64_t i) const;
  // Copies tokens [start, start + n) into out (int64, as LibTorch's embedding wants), across file boundaries.
  void copy(uint64_t start, uint64_t n, int64_t* out) const;

 private:
  struct Part {
    std::unique_ptr<MappedFile> file;
    std::string path;
    const void* data = nullptr;
    uint32_t width = 2;
    uint64_t count = 0, first = 0;  // first: the stream position of its token 0
    uint64_t source_bytes = 0;      // of its text
    bool bytes_known = false;       // false: not recorded (llm.c's own shards); a shard's known count may be 0
  };
  static Part open_part(const std::string& path);
  const Part& part_at(uint64_t i) const;

  std::vector<Part> parts_;
  uint64_t size_ = 0;
  uint64_t source_bytes_ = 0;
  int64_t vocab_size_ = 0;
  std::string key_;
};

}  // namespace spread
