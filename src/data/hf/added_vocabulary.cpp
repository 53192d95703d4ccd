// Added-token splitting as the crate's AddedVocabulary::extract_and_normalize and find_matches (see the header).
// An added token's Token carries the matched text (with any lstrip/rstrip whitespace), as the crate's does.
#include "added_vocabulary.h"

#include <algorithm>

namespace spread::hf {
namespace {

bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t p = s.size() - 1;
  while (p > 0 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
  int len = 0;
  return is_alphanumeric(decode_utf8(s, p, &len));
}

bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  int len = 0;
  return is_alphanumeric(decode_utf8(s, 0, &len));
}

// Start of the whitespace run that ends `s`.
size_t space_leftmost_at_end(std::string_view s) {
  size_t e = s.size();
  while (e > 0) {
    size_t p = e - 1;
    while (p > 0 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
    int len = 0;
    if (!is_whitespace(decode_utf8(s, p, &len))) break;
    e = p;
  }
  return e;
}

// Length of the whitespace run that starts `s`.
size_t space_rightmost_at_start(std::string_view s) {
  size_t b = 0;
  while (b < s.size()) {
    int len = 0;
    if (!is_whitespace(decode_utf8(s, b, &len))) break;
    b += len;
  }
  return b;
}

}  // namespace

void AddedVocabulary::Matcher::add(std::string text, size_t token) {
  if (text.empty()) return;
  first_byte[static_cast<unsigned char>(text[0])] = true;
  patterns.emplace_back(std::move(text), token);
}

// Once, after every add: sorting after each one made a load of 200k added tokens quadratic (over a minute).
void AddedVocabulary::Matcher::finish() {
  std::stable_sort(patterns.begin(), patterns.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

void AddedVocabulary::build(std::vector<AddedToken> tokens, const Normalizer* normalizer) {
  tokens_ = std::move(tokens);
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& t = tokens_[i];
    by_id_.emplace(t.id, i);
    if (!t.normalized) {
      raw_.add(t.content, i);
    } else {
      Normalized n = Normalized::from_original(t.content, 0);
      if (normalizer) normalizer->normalize(n);
      normalized_.add(n.text, i);
    }
  }
  raw_.finish();
  normalized_.finish();
}

std::vector<std::pair<Range, int>> AddedVocabulary::find_matches(std::string_view s, const Matcher& m) const {
  std::vector<std::pair<Range, int>> out;  // (range, token index or -1)
  if (s.empty()) return {{{0, 0}, -1}};
  size_t start_offset = 0;
  size_t i = 0;
  while (i < s.size()) {
    if (!m.first_byte[static_cast<unsigned char>(s[i])]) { ++i; continue; }
    const std::pair<std::string, size_t>* hit = nullptr;
    for (const auto& p : m.patterns)
      if (s.compare(i, p.first.size(), p.first) == 0) { hit = &p; break; }
    if (!hit) { ++i; continue; }
    size_t start = i, stop = i + hit->first.size();
    i = stop;  // matches never overlap
    const AddedToken& t = tokens_[hit->second];
    if (t.single_word && (ends_with_word(s.substr(0, start)) || starts_with_word(s.substr(stop)))) continue;
    if (t.lstrip) start = std::max(space_leftmost_at_end(s.substr(0, start)), start_offset);
    if (t.rstrip) stop += space_rightmost_at_start(s.substr(stop));
    if (start_offset < start) out.push_back({{static_cast<uint32_t>(start_offset), static_cast<uint32_t>(start)}, -1});
    out.push_back({{static_cast<uint32_t>(start), static_cast<uint32_t>(stop)}, static_cast<int>(hit->second)});
    start_offset = stop;
    i = std::max(i, stop);
  }
  if (start_offset != s.size()) out.push_back({{static_cast<uint32_t>(start_offset), static_cast<uint32_t>(s.size())}, -1});
  return out;
}

void AddedVocabulary::split_with(PreTokenized& pre, const Matcher& m) const {
  PreTokenized next;
  for (auto& piece : pre) {
    if (piece.tokenized) { next.push_back(std::move(piece)); continue; }
    for (const auto& [r, token] : find_matches(piece.n.text, m)) {
      Split s{piece.n.slice(r.first, r.second), {}, false};
      if (s.n.text.empty()) continue;
      if (token >= 0) {
        s.tokens.push_back(Token{tokens_[token].id, s.n.text, 0, static_cast<uint32_t>(s.n.text.size())});
        s.tokenized = true;
      }
      next.push_back(std::move(s));
    }
  }
  pre = std::move(next);
}

PreTokenized AddedVocabulary::extract_and_normalize(std::string_view text, const Normalizer* normalizer) const {
  PreTokenized pre;
  pre.push_back(Split{Normalized::from_original(text, 0), {}, false});
  if (!raw_.patterns.empty()) split_with(pre, raw_);
  if (normalizer)
    for (auto& s : pre)
      if (!s.tokenized) normalizer->normalize(s.n);
  if (!normalized_.patterns.empty()) split_with(pre, normalized_);
  return pre;
}

const AddedToken* AddedVocabulary::by_id(int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::by_content(std::string_view content) const {
  for (const auto& t : tokens_)
    if (t.content == content) return &t;
  return nullptr;
}

}  // namespace spread::hf
