#pragma once
// UTF-8 stepping and the Unicode character classes the `tokenizers` crate asks Rust's char for, answered by ICU:
//   is_whitespace   Rust char::is_whitespace (the White_Space property)
//   is_alphanumeric Rust char::is_alphanumeric (Alphabetic or Nd/Nl/No)
//   is_numeric      Rust char::is_numeric (Nd, Nl, No)
//   is_punctuation  the unicode_categories crate's is_punctuation (Pc Pd Pe Pf Pi Po Ps)
//   is_other        Cc Cf Co Cs, which BertNormalizer's clean_text removes (measured: tokenizers 0.22 keeps
//                   unassigned code points, Cn)
//   is_mark         unicode-normalization's is_combining_mark (Mn Mc Me), which StripAccents removes
//   is_nonspacing_mark  Mn alone, which BertNormalizer's strip_accents removes (measured: it keeps the Mc vowel
//                   signs of Devanagari and the enclosing keycap U+20E3, Me)
// Lower-casing is Rust's char::to_lowercase, the full mapping: as ICU's simple u_tolower except U+0130, whose
// full lower case is two characters ("i" + U+0307), the only unconditional multi-character lower-case mapping.
#include <cstdint>
#include <string>
#include <string_view>

namespace spread::hf {

// The code point starting at s[i] and its length in bytes; the text is valid UTF-8 (checked at the edge).
inline char32_t decode_utf8(std::string_view s, size_t i, int* len) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) { *len = 1; return b; }
  if (b < 0xE0) { *len = 2; return ((b & 0x1F) << 6) | (s[i + 1] & 0x3F); }
  if (b < 0xF0) { *len = 3; return ((b & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F); }
  *len = 4;
  return ((b & 0x07) << 18) | ((s[i + 1] & 0x3F) << 12) | ((s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
}
inline int utf8_len(char32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }
inline int utf8_lead_len(unsigned char b) { return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }
void append_utf8(std::string& out, char32_t c);

// The byte offset of the first invalid UTF-8 sequence in `s`, or -1 when it is valid.
int64_t first_invalid_utf8(std::string_view s);

bool is_whitespace(char32_t c);
bool is_alphanumeric(char32_t c);
bool is_numeric(char32_t c);
bool is_letter(char32_t c);      // \p{L}
bool is_number(char32_t c);      // \p{N}
bool is_punctuation(char32_t c);
bool is_bert_punctuation(char32_t c);  // ASCII punctuation or is_punctuation (BertPreTokenizer, Punctuation)
bool is_other(char32_t c);
bool is_mark(char32_t c);
bool is_nonspacing_mark(char32_t c);
bool is_word_char(char32_t c);  // Rust regex's Unicode \w
bool is_chinese_char(char32_t c);  // the CJK blocks BERT's tokenizer pads with spaces
// Appends char::to_lowercase(c).
void append_lowercase(std::string& out, char32_t c);

// Python's str.lower() of a whole text, as sentence-transformers' do_lower_case applies it: the full mapping of
// append_lowercase plus the one context-dependent rule of Unicode's default case conversion, Final_Sigma
// (U+03A3 becomes the final form U+03C2 after a cased letter and before none; both skip case-ignorable
// characters), which a character-at-a-time lower case cannot apply. ICU's root-locale full lower case (no
// language's rules: Python has none).
std::string python_lower(std::string_view text);

}  // namespace spread::hf
