#pragma once
// A minimal PNG writer for the report's heatmaps (internal to src/log/report*.cpp): 8-bit RGBA, no interlace,
// filter 0 on every row, one zlib-compressed IDAT chunk. An embedded image is one element for the browser to draw
// where a grid of <rect>s is thousands, and a few KB where the rects are hundreds.
#include <cstdint>
#include <string>
#include <vector>

namespace spread::report::png {

// rgba holds width * height * 4 bytes, rows top to bottom. Returns the PNG file's bytes.
std::string encode_rgba(const std::vector<std::uint8_t>& rgba, std::uint32_t width, std::uint32_t height);

std::string base64(const std::string& bytes);  // RFC 4648 alphabet with '=' padding, no line breaks

}  // namespace spread::report::png
