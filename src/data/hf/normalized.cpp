// The crate's NormalizedString operations (tokenizers/src/tokenizer/normalizer.rs) over per-byte original ranges.
// Measured against tokenizers 0.22: offsets agree on every line of the equivalence test (tests/test_hf_tokenizer.cpp).
#include "normalized.h"

#include <algorithm>

namespace spread::hf {

Normalized Normalized::from_original(std::string_view s, uint32_t shift) {
  Normalized n;
  n.text.assign(s);
  n.align.resize(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const int len = utf8_lead_len(static_cast<unsigned char>(s[i]));
    const Range r{static_cast<uint32_t>(shift + i), static_cast<uint32_t>(shift + i + len)};
    for (int k = 0; k < len; ++k) n.align[i + k] = r;
    i += len;
  }
  n.orig_begin = shift;
  n.orig_end = static_cast<uint32_t>(shift + s.size());
  return n;
}

Range Normalized::original_range(uint32_t b, uint32_t e) const {
  if (b >= e) return {orig_begin + b, orig_begin + b};  // the crate returns the empty range as is, plus the shift
  return {align[b].first, align[e - 1].second};
}

Normalized Normalized::slice(uint32_t b, uint32_t e) const {
  Normalized n;
  n.text.assign(text, b, e - b);
  n.align.assign(align.begin() + b, align.begin() + e);
  const Range r = original_range(b, e);
  n.orig_begin = r.first;
  n.orig_end = r.second;
  return n;
}

void Normalized::prepend(std::string_view s) {
  if (text.empty()) return;
  const Range first = align[0];
  text.insert(0, s);
  align.insert(align.begin(), s.size(), first);
}

void Normalized::replace(const std::vector<Range>& matches, std::string_view content) {
  if (matches.empty()) return;
  std::string out;
  std::vector<Range> out_align;
  out.reserve(text.size());
  out_align.reserve(text.size());
  uint32_t last = 0;
  for (const auto& [b, e] : matches) {
    out.append(text, last, b - last);
    out_align.insert(out_align.end(), align.begin() + last, align.begin() + b);
    out.append(content);
    out_align.insert(out_align.end(), content.size(), align[e - 1]);
    last = e;
  }
  out.append(text, last, std::string::npos);
  out_align.insert(out_align.end(), align.begin() + last, align.end());
  text = std::move(out);
  align = std::move(out_align);
}

void Normalized::strip(bool left, bool right) {
  size_t b = 0, e = text.size();
  if (left) {
    while (b < e) {
      int len = 0;
      if (!is_whitespace(decode_utf8(text, b, &len))) break;
      b += len;
    }
  }
  if (right) {
    while (e > b) {
      size_t p = e - 1;
      while (p > b && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
      int len = 0;
      if (!is_whitespace(decode_utf8(text, p, &len))) break;
      e = p;
    }
  }
  if (b == 0 && e == text.size()) return;
  text = text.substr(b, e - b);
  align = std::vector<Range>(align.begin() + b, align.begin() + e);
}

Matches matches_of_chars(std::string_view s, bool (*pred)(char32_t)) {
  if (s.empty()) return {{0, 0, false}};
  Matches m;
  uint32_t last = 0;
  size_t i = 0;
  while (i < s.size()) {
    int len = 0;
    const char32_t c = decode_utf8(s, i, &len);
    if (pred(c)) {
      if (last < i) m.push_back({last, static_cast<uint32_t>(i), false});
      m.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(i + len), true});
      last = static_cast<uint32_t>(i + len);
    }
    i += len;
  }
  if (last < s.size()) m.push_back({last, static_cast<uint32_t>(s.size()), false});
  return m;
}

Matches matches_of_ranges(std::string_view s, const std::vector<Range>& found) {
  if (s.empty()) return {{0, 0, false}};
  Matches m;
  uint32_t prev = 0;
  for (const auto& [b, e] : found) {
    if (prev != b) m.push_back({prev, b, false});
    m.push_back({b, e, true});
    prev = e;
  }
  if (prev != s.size()) m.push_back({prev, static_cast<uint32_t>(s.size()), false});
  return m;
}

void invert(Matches& m) {
  for (auto& x : m) x.is_match = !x.is_match;
}

// The crate merges a match into its neighbour with folds over (range, is_match); the same folds here.
static std::vector<std::pair<Range, bool>> apply_behavior(const Matches& matches, SplitBehavior behavior) {
  std::vector<std::pair<Range, bool>> out;  // (range, remove)
  out.reserve(matches.size());
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (const auto& m : matches) out.push_back({{m.b, m.e}, false});
      break;
    case SplitBehavior::Removed:
      for (const auto& m : matches) out.push_back({{m.b, m.e}, m.is_match});
      break;
    case SplitBehavior::Contiguous:
      for (const auto& m : matches) {
        if (m.is_match == previous_match && !out.empty()) out.back().first.second = m.e;
        else out.push_back({{m.b, m.e}, false});
        previous_match = m.is_match;
      }
      break;
    case SplitBehavior::MergedWithPrevious:
      for (const auto& m : matches) {
        if (m.is_match && !previous_match && !out.empty()) out.back().first.second = m.e;
        else out.push_back({{m.b, m.e}, false});
        previous_match = m.is_match;
      }
      break;
    case SplitBehavior::MergedWithNext:
      for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty()) out.back().first.first = it->b;
        else out.push_back({{it->b, it->e}, false});
        previous_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
  }
  return out;
}

void split_into(const Normalized& n, const Matches& matches, SplitBehavior behavior, std::vector<Normalized>& out) {
  for (const auto& [r, remove] : apply_behavior(matches, behavior))
    if (!remove && r.first < r.second) out.push_back(n.slice(r.first, r.second));
}

}  // namespace spread::hf
