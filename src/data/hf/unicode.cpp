// Character classes over ICU's character properties (unicode/uchar.h); see unicode.h for which Rust function each
// stands for. ASCII is answered without ICU: it is most of the text and these run once per character.
#include "unicode.h"

#include <stdexcept>

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

namespace spread::hf {

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

int64_t first_invalid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) { ++i; continue; }
    int n = 0;
    char32_t min = 0;
    if (b >= 0xC2 && b <= 0xDF) { n = 2; min = 0x80; }
    else if (b >= 0xE0 && b <= 0xEF) { n = 3; min = 0x800; }
    else if (b >= 0xF0 && b <= 0xF4) { n = 4; min = 0x10000; }
    else return static_cast<int64_t>(i);
    if (i + n > s.size()) return static_cast<int64_t>(i);
    for (int k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return static_cast<int64_t>(i);
    int len = 0;
    const char32_t c = decode_utf8(s, i, &len);
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return static_cast<int64_t>(i);
    i += n;
  }
  return -1;
}

static uint32_t category_mask(char32_t c) { return U_GET_GC_MASK(static_cast<UChar32>(c)); }

bool is_whitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE);
}

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return (category_mask(c) & U_GC_N_MASK) != 0;
}
bool is_number(char32_t c) { return is_numeric(c); }

bool is_letter(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return (category_mask(c) & U_GC_L_MASK) != 0;
}

bool is_alphanumeric(char32_t c) {
  if (c < 0x80) return is_letter(c) || is_numeric(c);
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_ALPHABETIC) || is_numeric(c);
}

bool is_punctuation(char32_t c) { return (category_mask(c) & U_GC_P_MASK) != 0; }

bool is_bert_punctuation(char32_t c) {
  if (c < 0x80) return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
  return is_punctuation(c);
}

bool is_other(char32_t c) {
  return (category_mask(c) & (U_GC_CC_MASK | U_GC_CF_MASK | U_GC_CO_MASK | U_GC_CS_MASK)) != 0;
}

bool is_mark(char32_t c) {
  if (c < 0x80) return false;
  return (category_mask(c) & U_GC_M_MASK) != 0;
}

bool is_nonspacing_mark(char32_t c) {
  if (c < 0x80) return false;
  return (category_mask(c) & U_GC_MN_MASK) != 0;
}

// Rust regex's \w: Alphabetic, M, Nd, Pc and Join_Control (UTS#18 annex C).
bool is_word_char(char32_t c) {
  if (c < 0x80) return is_letter(c) || is_numeric(c) || c == '_';
  const auto ch = static_cast<UChar32>(c);
  return u_hasBinaryProperty(ch, UCHAR_ALPHABETIC) ||
         (category_mask(c) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0 ||
         u_hasBinaryProperty(ch, UCHAR_JOIN_CONTROL);
}

bool is_chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

void append_lowercase(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
  } else if (c == 0x130) {
    out += "i\xCC\x87";
  } else {
    append_utf8(out, static_cast<char32_t>(u_tolower(static_cast<UChar32>(c))));
  }
}

std::string python_lower(std::string_view text) {
  std::string out;
  bool ascii = true;
  for (const char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) {
    out.assign(text);
    for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    return out;
  }
  // Line by line: ICU's strings hold at most 2^31 units, and Final_Sigma never looks past a line break (neither
  // cased nor case-ignorable). A line of 1 GiB or more is beyond any text spread reads as one.
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    if (end - start >= (size_t(1) << 30)) throw std::length_error("python_lower: a line of 1 GiB or more");
    icu::UnicodeString u = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data() + start, int32_t(end - start)));
    u.toLower(icu::Locale::getRoot());
    u.toUTF8String(out);
    if (end < text.size()) out.push_back('\n');
    start = end + 1;
  }
  return out;
}

}  // namespace spread::hf
