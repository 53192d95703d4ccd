#include "spread/data/token_file.h"

#include <cstring>
#include <fstream>

#include "spread/util/error.h"
#include "spread/util/file.h"

namespace spread {
namespace {

constexpr char kMagic[8] = {'S', 'P', 'R', 'D', 'T', 'O', 'K', '\0'};
constexpr uint32_t kVersion = 1;

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

TokenFile::TokenFile(const std::string& path) : file_(path, MappedFile::Access::random) {
  const std::string_view bytes = file_.bytes();
  Header h;
  bool ok = bytes.size() >= sizeof(Header);
  if (ok) {
    std::memcpy(&h, bytes.data(), sizeof h);
    // The count is compared by division: count * width wraps around for a count near 2^62 or 2^63, and a hostile
    // header then passed the check and the tokens were read past the end of the mapping.
    ok = std::memcmp(h.magic, kMagic, 8) == 0 && h.version == kVersion && (h.width == 2 || h.width == 4) &&
         (bytes.size() - sizeof(Header)) % h.width == 0 && h.count == (bytes.size() - sizeof(Header)) / h.width;
  }
  if (!ok)
    throw user_error(path, 0, "", "not a valid spread token file (truncated, or a bad header or size)",
                     "delete it; it is rebuilt from the text");
  width_ = h.width;
  count_ = h.count;
  source_bytes_ = h.source_bytes;
  data_ = bytes.data() + sizeof(Header);
}

void TokenFile::copy(uint64_t start, uint64_t n, int64_t* out) const {
  for (uint64_t i = 0; i < n; ++i) out[i] = (*this)[start + i];
}

}  // namespace spread
