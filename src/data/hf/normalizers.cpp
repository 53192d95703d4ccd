// Normalizers, each as the crate's (tokenizers/src/normalizers/{bert,unicode,strip,replace,prepend,utils}.rs).
// BertNormalizer: clean_text drops NUL, U+FFFD and the "other" categories except \t \n \r and turns whitespace
// into ' '; handle_chinese_chars puts a space on each side of a CJK ideograph (all three share its offsets);
// strip_accents (null: follows lowercase) is NFD then removing non-spacing marks (Mn); lowercase is char::to_lowercase.
// The Unicode normal forms take ICU's Normalizer2 data (decompositions, combining classes, composePair); their
// offsets follow the crate's alignment-tracking normaliser: "é" -> "e" + U+0301 both map to "é"; "a" + U+0308 +
// U+0301 -> "ä" + U+0301 maps "ä" to the "a" and the acute to itself (measured against tokenizers 0.22).
#include "normalizers.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>

#include <algorithm>

#include "regex.h"

namespace spread::hf {
namespace {

class BertNormalizer : public Normalizer {
 public:
  BertNormalizer(bool clean, bool chinese, bool strip, bool lower)
      : clean_(clean), chinese_(chinese), strip_(strip), lower_(lower) {}
  void normalize(Normalized& n) const override;

 private:
  bool clean_, chinese_, strip_, lower_;
};

// One of ICU's four normal forms with the crate's offsets (see the header comment).
class UnicodeForm : public Normalizer {
 public:
  explicit UnicodeForm(const char* form) {
    UErrorCode status = U_ZERO_ERROR;
    const bool compose = form[2] == 'C' || form[3] == 'C';
    const bool compat = form[2] == 'K';
    norm_ = compat ? (compose ? icu::Normalizer2::getNFKCInstance(status) : icu::Normalizer2::getNFKDInstance(status))
                   : (compose ? icu::Normalizer2::getNFCInstance(status) : icu::Normalizer2::getNFDInstance(status));
    decomposer_ = compat ? icu::Normalizer2::getNFKDInstance(status) : icu::Normalizer2::getNFDInstance(status);
    compose_ = compose;
  }
  void normalize(Normalized& n) const override;

 private:
  const icu::Normalizer2* norm_;        // the form, for the quick check and composePair
  const icu::Normalizer2* decomposer_;  // NFD or NFKD: full decompositions
  bool compose_ = false;
};

struct RangedChar {
  char32_t c;
  Range r;
};

// Full decompositions (canonical or compatibility, as `decomposer` is NFD or NFKD), each character carrying its
// source's range.
std::vector<RangedChar> decompose(const Normalized& n, const icu::Normalizer2& decomposer) {
  std::vector<RangedChar> chars;
  chars.reserve(n.text.size());
  icu::UnicodeString decomposition;
  for (size_t i = 0; i < n.text.size();) {
    int len = 0;
    const char32_t c = decode_utf8(n.text, i, &len);
    const Range r = n.align[i];
    i += len;
    if (c < 0x80 || !decomposer.getDecomposition(static_cast<UChar32>(c), decomposition)) {
      chars.push_back({c, r});
      continue;
    }
    for (int32_t k = 0; k < decomposition.length();) {
      const UChar32 d = decomposition.char32At(k);
      chars.push_back({static_cast<char32_t>(d), r});
      k += U16_LENGTH(d);
    }
  }
  return chars;
}

int combining_class(char32_t c) { return u_getCombiningClass(static_cast<UChar32>(c)); }

// Canonical order: each run of non-starters sorted by combining class, stably.
void reorder(std::vector<RangedChar>& chars) {
  for (size_t i = 0; i < chars.size();) {
    if (combining_class(chars[i].c) == 0) { ++i; continue; }
    size_t j = i;
    while (j < chars.size() && combining_class(chars[j].c) != 0) ++j;
    std::stable_sort(chars.begin() + i, chars.begin() + j, [](const RangedChar& a, const RangedChar& b) {
      return combining_class(a.c) < combining_class(b.c);
    });
    i = j;
  }
}

// Canonical composition (UAX #15): a character not blocked from the last starter and forming a primary
// composite with it merges into the starter, which keeps its range.
void compose(std::vector<RangedChar>& chars, const icu::Normalizer2& form) {
  std::vector<RangedChar> out;
  out.reserve(chars.size());
  int64_t starter = -1;
  int last_cc = -1;  // combining class of the last character kept since the starter; -1: none
  for (const RangedChar& ch : chars) {
    const int cc = combining_class(ch.c);
    const bool blocked = last_cc != -1 && (last_cc == 0 || last_cc >= cc);
    if (starter >= 0 && !blocked) {
      const UChar32 composite = form.composePair(static_cast<UChar32>(out[starter].c), static_cast<UChar32>(ch.c));
      if (composite >= 0) {
        out[starter].c = static_cast<char32_t>(composite);
        continue;
      }
    }
    if (cc == 0) {
      starter = static_cast<int64_t>(out.size());
      last_cc = -1;
    } else {
      last_cc = cc;
    }
    out.push_back(ch);
  }
  chars = std::move(out);
}

// Decomposition, canonical reordering and (for NFC/NFKC) canonical composition, each character carrying its
// original range: decomposed characters share their source's, a composite keeps its starter's and the marks
// composed into it vanish (the crate's unicode-normalization-alignments does the same bookkeeping).
void UnicodeForm::normalize(Normalized& n) const {
  UErrorCode status = U_ZERO_ERROR;
  if (norm_->isNormalizedUTF8(n.text, status) && U_SUCCESS(status)) return;
  std::vector<RangedChar> chars = decompose(n, *decomposer_);
  reorder(chars);
  if (compose_) compose(chars, *norm_);
  std::string text;
  std::vector<Range> align;
  text.reserve(n.text.size() + 8);
  align.reserve(n.text.size() + 8);
  for (const RangedChar& ch : chars) {
    const size_t before = text.size();
    append_utf8(text, ch.c);
    align.insert(align.end(), text.size() - before, ch.r);
  }
  n.text = std::move(text);
  n.align = std::move(align);
}

void BertNormalizer::normalize(Normalized& n) const {
  if (clean_) {
    n.map_chars([](char32_t c, std::string& out) {
      if (c == 0 || c == 0xFFFD) return;
      if (c == '\t' || c == '\n' || c == '\r') { out.push_back(' '); return; }
      if (c >= 0x20 && c < 0x7F) { out.push_back(static_cast<char>(c)); return; }
      if (is_other(c)) return;
      if (is_whitespace(c)) out.push_back(' ');
      else append_utf8(out, c);
    });
  }
  if (chinese_) {
    n.map_chars([](char32_t c, std::string& out) {
      if (!is_chinese_char(c)) { append_utf8(out, c); return; }
      out.push_back(' ');
      append_utf8(out, c);
      out.push_back(' ');
    });
  }
  if (strip_) {
    static const UnicodeForm nfd("NFD");
    nfd.normalize(n);
    n.map_chars([](char32_t c, std::string& out) { if (!is_nonspacing_mark(c)) append_utf8(out, c); });
  }
  if (lower_) n.map_chars([](char32_t c, std::string& out) { append_lowercase(out, c); });
}

class Lowercase : public Normalizer {
 public:
  void normalize(Normalized& n) const override {
    n.map_chars([](char32_t c, std::string& out) { append_lowercase(out, c); });
  }
};

class StripAccents : public Normalizer {
 public:
  void normalize(Normalized& n) const override {
    n.map_chars([](char32_t c, std::string& out) { if (!is_mark(c)) append_utf8(out, c); });
  }
};

class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(Normalized& n) const override { n.strip(left_, right_); }

 private:
  bool left_, right_;
};

class Replace : public Normalizer {
 public:
  Replace(const std::string& pattern, bool is_regex, std::string content, const Where& w)
      : pattern_(pattern, is_regex, w.file, w.key), content_(std::move(content)) {}
  void normalize(Normalized& n) const override { n.replace(pattern_.find_all(n.text), content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string s) : s_(std::move(s)) {}
  void normalize(Normalized& n) const override { n.prepend(s_); }

 private:
  std::string s_;
};

class Sequence : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(Normalized& n) const override {
    for (const auto& p : parts_) p->normalize(n);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const Json& j, const Where& w) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, w);
  if (type == "BertNormalizer") {
    const bool lower = get_bool(j, "lowercase", true, w);
    return std::make_unique<BertNormalizer>(get_bool(j, "clean_text", true, w),
                                            get_bool(j, "handle_chinese_chars", true, w),
                                            get_bool(j, "strip_accents", lower, w), lower);
  }
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD")
    return std::make_unique<UnicodeForm>(type.c_str());
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Strip")
    return std::make_unique<Strip>(get_bool(j, "strip_left", true, w), get_bool(j, "strip_right", true, w));
  if (type == "Replace") {
    bool is_regex = false;
    const std::string pattern = pattern_of(j, &is_regex, w);
    return std::make_unique<Replace>(pattern, is_regex, get_string(j, "content", "", w), w.at("pattern"));
  }
  if (type == "Prepend") return std::make_unique<Prepend>(get_string(j, "prepend", "", w));
  if (type == "Sequence") {
    const Json& list = get_array(j, "normalizers", w);
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto p = make_normalizer(list[i], w.at("normalizers").index(i));
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<Sequence>(std::move(parts));
  }
  w.unknown_type("normalizer", type);
}

}  // namespace spread::hf
