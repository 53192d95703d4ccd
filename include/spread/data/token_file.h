#pragma once
// Tokenised splits cached as binary files, memory-mapped for reading.
// Layout (little endian): magic "SPRDTOK\0" (8 bytes), u32 version (1), u32 bytes per token (2 or 4),
// u64 token count, u64 byte count of the source text (for bits per byte), then the tokens.
#include <cstdint>
#include <string>
#include <vector>

#include "spread/util/mapped_file.h"

namespace spread {

void write_token_file(const std::string& path, const std::vector<int32_t>& tokens, uint64_t source_bytes);

class TokenFile {
 public:
  // Throws UserError naming the file when it is missing, truncated or not a token file.
  explicit TokenFile(const std::string& path);

  uint64_t size() const { return count_; }
  uint64_t source_bytes() const { return source_bytes_; }
  int32_t operator[](uint64_t i) const {
    return width_ == 2 ? int32_t(static_cast<const uint16_t*>(data_)[i]) : static_cast<const int32_t*>(data_)[i];
  }
  // Copies tokens [start, start + n) into out (int64, as LibTorch's embedding wants).
  void copy(uint64_t start, uint64_t n, int64_t* out) const;

 private:
  MappedFile file_;
  const void* data_ = nullptr;
  uint32_t width_ = 2;
  uint64_t count_ = 0;
  uint64_t source_bytes_ = 0;
};

}  // namespace spread
