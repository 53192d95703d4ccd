#pragma once
// The text as it moves through the pipeline, with the way back to the original: the `tokenizers` crate's
// NormalizedString and PreTokenizedString. Every byte of the normalized text carries the [begin, end) byte range
// of the original character it came from (absolute in the input, where the crate keeps a shift per slice; the
// same numbers). Characters a normalizer writes in place of one inherit its range; removed characters vanish;
// a token's original range is its first byte's begin to its last byte's end, as the crate's convert_offsets.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "unicode.h"

namespace spread::hf {

using Range = std::pair<uint32_t, uint32_t>;

struct Normalized {
  std::string text;
  std::vector<Range> align;  // one per byte of text
  uint32_t orig_begin = 0;   // this piece's range in the original
  uint32_t orig_end = 0;

  static Normalized from_original(std::string_view s, uint32_t shift);
  // The piece [b, e) of the normalized text, as the crate's slice(Range::Normalized).
  Normalized slice(uint32_t b, uint32_t e) const;
  // Original range of the normalized bytes [b, e) (empty ranges map to themselves, shifted).
  Range original_range(uint32_t b, uint32_t e) const;

  // Rebuilds the text character by character: `f(c, out)` appends what replaces c (nothing removes it); each
  // written byte inherits c's original range.
  template <class F>
  void map_chars(F f);
  // `s` before the first character, sharing its original range (the crate's prepend); nothing on empty text.
  void prepend(std::string_view s);
  // Each [b, e) of `matches` (sorted, disjoint, non-empty) replaced by `content`, which takes the original
  // range of the match's last byte (the crate's replace).
  void replace(const std::vector<Range>& matches, std::string_view content);
  void strip(bool left, bool right);
};

// The crate's SplitDelimiterBehavior.
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// A cover of the text: consecutive [b, e) pieces, each a match of the pattern or a gap (the crate's
// Pattern::find_matches; [(0,0), false] for an empty text).
struct Match {
  uint32_t b, e;
  bool is_match;
};
using Matches = std::vector<Match>;
Matches matches_of_chars(std::string_view s, bool (*pred)(char32_t));   // each matching char its own match
Matches matches_of_ranges(std::string_view s, const std::vector<Range>& found);  // regex-like matches
void invert(Matches& m);
// The pieces of `n` that `behavior` keeps, empty pieces dropped, appended to `out`.
void split_into(const Normalized& n, const Matches& matches, SplitBehavior behavior, std::vector<Normalized>& out);

struct Token {
  int32_t id;
  std::string value;
  uint32_t b, e;  // bytes of the piece's normalized text
};

// A piece and, once the model (or an added token) has run on it, its tokens.
struct Split {
  Normalized n;
  std::vector<Token> tokens;
  bool tokenized = false;
};
using PreTokenized = std::vector<Split>;

// Splits each untokenized piece with `f(const Normalized&, std::vector<Normalized>& out)`.
template <class F>
void split_pieces(PreTokenized& pre, F f) {
  PreTokenized next;
  next.reserve(pre.size() * 2);
  std::vector<Normalized> parts;
  for (auto& s : pre) {
    if (s.tokenized) { next.push_back(std::move(s)); continue; }
    parts.clear();
    f(s.n, parts);
    for (auto& p : parts)
      if (!p.text.empty()) next.push_back(Split{std::move(p), {}, false});
  }
  pre = std::move(next);
}

template <class F>
void Normalized::map_chars(F f) {
  std::string out;
  std::vector<Range> out_align;
  out.reserve(text.size() + 8);
  out_align.reserve(text.size() + 8);
  size_t i = 0;
  while (i < text.size()) {
    int len = 0;
    const char32_t c = decode_utf8(text, i, &len);
    const size_t before = out.size();
    f(c, out);
    out_align.insert(out_align.end(), out.size() - before, align[i]);
    i += len;
  }
  text = std::move(out);
  align = std::move(out_align);
}

}  // namespace spread::hf
