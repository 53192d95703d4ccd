// PNG = 8-byte signature, then chunks (length, type, data, CRC-32 of type + data): IHDR (size, bit depth 8,
// colour type 6 = RGBA), IDAT (zlib stream of the rows, each row prefixed by its filter byte 0), IEND.
#include "report_png.h"

#include <zlib.h>

#include <stdexcept>

namespace spread::report::png {

namespace {

void put_u32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out += char((v >> shift) & 0xff);
}

void put_chunk(std::string& out, const char* type, const std::string& data) {
  put_u32(out, std::uint32_t(data.size()));
  const std::string body = std::string(type, 4) + data;
  out += body;
  put_u32(out, std::uint32_t(crc32(0, reinterpret_cast<const Bytef*>(body.data()), uInt(body.size()))));
}

std::string deflate(const std::string& raw) {
  uLongf size = compressBound(uLong(raw.size()));
  std::string out(size, '\0');
  if (compress2(reinterpret_cast<Bytef*>(out.data()), &size, reinterpret_cast<const Bytef*>(raw.data()),
                uLong(raw.size()), Z_BEST_COMPRESSION) != Z_OK) {
    throw std::runtime_error("zlib compress2 failed");  // only on out-of-memory: not a user error
  }
  out.resize(size);
  return out;
}

}  // namespace

std::string encode_rgba(const std::vector<std::uint8_t>& rgba, std::uint32_t width, std::uint32_t height) {
  std::string header;
  put_u32(header, width);
  put_u32(header, height);
  header += std::string("\x08\x06\x00\x00\x00", 5);  // bit depth 8, RGBA, deflate, filter method 0, no interlace
  std::string raw;
  raw.reserve(std::size_t(height) * (1 + 4 * std::size_t(width)));
  for (std::uint32_t y = 0; y < height; ++y) {
    raw += '\0';  // filter type 0 (None)
    raw.append(reinterpret_cast<const char*>(rgba.data()) + std::size_t(y) * width * 4, std::size_t(width) * 4);
  }
  std::string out("\x89PNG\r\n\x1a\n", 8);
  put_chunk(out, "IHDR", header);
  put_chunk(out, "IDAT", deflate(raw));
  put_chunk(out, "IEND", "");
  return out;
}

std::string base64(const std::string& bytes) {
  static const char* const kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    std::uint32_t v = std::uint32_t(std::uint8_t(bytes[i])) << 16;
    if (i + 1 < bytes.size()) v |= std::uint32_t(std::uint8_t(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) v |= std::uint8_t(bytes[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[v & 63] : '=';
  }
  return out;
}

}  // namespace spread::report::png
