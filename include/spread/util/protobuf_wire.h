#pragma once
// The protobuf wire format, enough to read the fields of sentencepiece's ModelProto (Debian ships no generated code
// for sentencepiece_model.proto): each field is a key varint (field number << 3 | wire type), then a varint (0),
// 8 bytes (1), a length-delimited run (2) or 4 bytes (5). Malformed bytes throw ProtobufError; nothing is read
// outside the given bytes, and nothing is allocated.
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

namespace spread {

struct ProtobufError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Walks the fields of one message; a nested message is read with a WireReader over bytes().
class WireReader {
 public:
  explicit WireReader(std::string_view message) : rest_(message) {}

  // Moves to the next field; false at the end of the message.
  bool next() {
    if (rest_.empty()) return false;
    const uint64_t key = read_varint();
    field_ = key >> 3;
    wire_type_ = int(key & 7);
    varint_ = 0;
    bytes_ = {};
    switch (wire_type_) {
      case 0: varint_ = read_varint(); break;
      case 1: bytes_ = take(8); break;
      case 2: bytes_ = take(read_varint()); break;
      case 5: bytes_ = take(4); break;
      default: throw ProtobufError("unknown wire type " + std::to_string(wire_type_));
    }
    return true;
  }

  uint64_t field() const { return field_; }
  int wire_type() const { return wire_type_; }
  uint64_t varint() const { return varint_; }        // wire type 0
  std::string_view bytes() const { return bytes_; }  // wire types 1, 2 and 5
  float fixed32_float() const {                      // wire type 5
    float f = 0;
    if (bytes_.size() == 4) std::memcpy(&f, bytes_.data(), 4);
    return f;
  }

 private:
  uint64_t read_varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const auto byte = uint8_t(take(1)[0]);
      value |= uint64_t(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    throw ProtobufError("a varint longer than 10 bytes");
  }

  std::string_view take(uint64_t n) {
    if (n > rest_.size()) throw ProtobufError("truncated");
    const auto out = rest_.substr(0, size_t(n));
    rest_.remove_prefix(size_t(n));
    return out;
  }

  std::string_view rest_;
  uint64_t field_ = 0;
  int wire_type_ = 0;
  uint64_t varint_ = 0;
  std::string_view bytes_;
};

}  // namespace spread
