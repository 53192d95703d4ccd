// Pre-tokenizers, each as the crate's (tokenizers/src/pre_tokenizers/*.rs), over the split behaviours of
// normalized.h. ByteLevel's GPT-2 pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// is matched by hand over ICU's categories (gpt2_matches), alternative by alternative as Oniguruma tries them:
// a regex engine costs several times more per character here.
#include "pre_tokenizers.h"

#include <array>

#include "regex.h"

namespace spread::hf {
namespace {

std::array<char32_t, 256> make_byte_map() {
  std::array<char32_t, 256> m{};
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    m[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
  }
  return m;
}
const std::array<char32_t, 256> kByteMap = make_byte_map();

const std::array<std::string, 256> kByteUtf8 = [] {
  std::array<std::string, 256> s;
  for (int b = 0; b < 256; ++b) append_utf8(s[b], kByteMap[b]);
  return s;
}();

char32_t at(std::string_view s, size_t i, int* len) { return decode_utf8(s, i, len); }

// Length of the run from i of characters satisfying pred.
template <class P>
size_t run(std::string_view s, size_t i, P pred) {
  size_t j = i;
  while (j < s.size()) {
    int len = 0;
    if (!pred(at(s, j, &len))) break;
    j += len;
  }
  return j - i;
}

bool is_other_class(char32_t c) { return !is_whitespace(c) && !is_letter(c) && !is_number(c); }

// The length of GPT-2's pattern match at i (never 0: some alternative matches any character).
size_t gpt2_match_at(std::string_view s, size_t i) {
  int len = 0;
  const char32_t c = at(s, i, &len);
  if (c == '\'' && i + 1 < s.size()) {
    const char n1 = s[i + 1];
    if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') return 2;
    if (i + 2 < s.size()) {
      const char n2 = s[i + 2];
      if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) return 3;
    }
  }
  size_t start = i;
  char32_t first = c;
  if (c == ' ' && i + 1 < s.size()) {
    int l2 = 0;
    first = at(s, i + 1, &l2);
    start = i + 1;
  }
  if (first != ' ' || start == i) {
    if (is_letter(first)) return start - i + run(s, start, is_letter);
    if (is_number(first)) return start - i + run(s, start, is_number);
    if (is_other_class(first)) return start - i + run(s, start, is_other_class);
  }
  // Whitespace: \s+(?!\S), else \s+. `c` is whitespace here.
  const size_t ws = run(s, i, is_whitespace);
  if (i + ws >= s.size()) return ws;
  if (ws > static_cast<size_t>(len)) {
    // Back off the last whitespace character so that the one before a non-space is left for the next match.
    size_t last = i + ws - 1;
    while ((static_cast<unsigned char>(s[last]) & 0xC0) == 0x80) --last;
    return last - i;
  }
  return ws;
}

std::vector<Range> gpt2_matches(std::string_view s) {
  std::vector<Range> out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = gpt2_match_at(s, i);
    out.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(i + n)});
    i += n;
  }
  return out;
}

class ByteLevel : public PreTokenizer {
 public:
  ByteLevel(bool prefix, bool use_regex) : prefix_(prefix), use_regex_(use_regex) {}
  void pre_tokenize(PreTokenized& pre) const override {
    split_pieces(pre, [&](const Normalized& n, std::vector<Normalized>& out) {
      Normalized p = n;
      if (prefix_ && p.text[0] != ' ') p.prepend(" ");
      if (!use_regex_) { out.push_back(std::move(p)); return; }
      split_into(p, matches_of_ranges(p.text, gpt2_matches(p.text)), SplitBehavior::Isolated, out);
    });
    for (auto& s : pre) {
      if (s.tokenized) continue;
      to_byte_chars(s.n);
    }
  }
  // Each byte of each character becomes its visible character, all sharing the character's original range.
  static void to_byte_chars(Normalized& n) {
    std::string out;
    std::vector<Range> out_align;
    out.reserve(n.text.size() * 2);
    out_align.reserve(n.text.size() * 2);
    for (size_t i = 0; i < n.text.size(); ++i) {
      const std::string& c = kByteUtf8[static_cast<unsigned char>(n.text[i])];
      out += c;
      out_align.insert(out_align.end(), c.size(), n.align[i]);
    }
    n.text = std::move(out);
    n.align = std::move(out_align);
  }

 private:
  bool prefix_, use_regex_;
};

// Splits every piece on the characters `pred` picks, with `behavior`.
class CharSplit : public PreTokenizer {
 public:
  CharSplit(bool (*pred)(char32_t), SplitBehavior behavior) : pred_(pred), behavior_(behavior) {}
  void pre_tokenize(PreTokenized& pre) const override {
    split_pieces(pre, [&](const Normalized& n, std::vector<Normalized>& out) {
      split_into(n, matches_of_chars(n.text, pred_), behavior_, out);
    });
  }

 private:
  bool (*pred_)(char32_t);
  SplitBehavior behavior_;
};

class BertPreTokenizer : public PreTokenizer {
 public:
  void pre_tokenize(PreTokenized& pre) const override {
    split_pieces(pre, [&](const Normalized& n, std::vector<Normalized>& out) {
      std::vector<Normalized> words;
      split_into(n, matches_of_chars(n.text, is_whitespace), SplitBehavior::Removed, words);
      for (const auto& w : words) split_into(w, matches_of_chars(w.text, is_bert_punctuation), SplitBehavior::Isolated, out);
    });
  }
};

// \w+|[^\w\s]+ with Rust regex's Unicode classes, the matches kept and the gaps (whitespace) removed.
class Whitespace : public PreTokenizer {
 public:
  void pre_tokenize(PreTokenized& pre) const override {
    split_pieces(pre, [&](const Normalized& n, std::vector<Normalized>& out) {
      std::vector<Range> found;
      const std::string& s = n.text;
      size_t i = 0;
      while (i < s.size()) {
        int len = 0;
        const char32_t c = at(s, i, &len);
        size_t k = 0;
        if (is_word_char(c)) k = run(s, i, is_word_char);
        else if (!is_whitespace(c)) k = run(s, i, [](char32_t x) { return !is_word_char(x) && !is_whitespace(x); });
        if (k == 0) { i += len; continue; }
        found.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(i + k)});
        i += k;
      }
      Matches m = matches_of_ranges(s, found);
      invert(m);
      split_into(n, m, SplitBehavior::Removed, out);
    });
  }
};

class Metaspace : public PreTokenizer {
 public:
  Metaspace(std::string replacement, std::string scheme, bool split)
      : rep_(std::move(replacement)), scheme_(std::move(scheme)), split_(split), space_(" ", false, "", "") {}
  void pre_tokenize(PreTokenized& pre) const override {
    split_pieces(pre, [&](const Normalized& n, std::vector<Normalized>& out) {
      Normalized p = n;
      p.replace(space_.find_all(p.text), rep_);
      const bool starts = p.text.compare(0, rep_.size(), rep_) == 0;
      if (!starts && (scheme_ == "always" || (scheme_ == "first" && p.orig_begin == 0))) p.prepend(rep_);
      if (!split_) { out.push_back(std::move(p)); return; }
      std::vector<Range> found;
      for (size_t at = 0; (at = p.text.find(rep_, at)) != std::string::npos; at += rep_.size())
        found.push_back({static_cast<uint32_t>(at), static_cast<uint32_t>(at + rep_.size())});
      split_into(p, matches_of_ranges(p.text, found), SplitBehavior::MergedWithNext, out);
    });
  }

 private:
  std::string rep_;
  std::string scheme_;
  bool split_;
  Pattern space_;
};

class SplitPattern : public PreTokenizer {
 public:
  SplitPattern(const std::string& pattern, bool is_regex, SplitBehavior behavior, bool inv, const Where& w)
      : pattern_(pattern, is_regex, w.file, w.key), behavior_(behavior), invert_(inv) {}
  void pre_tokenize(PreTokenized& pre) const override {
    split_pieces(pre, [&](const Normalized& n, std::vector<Normalized>& out) {
      Matches m = matches_of_ranges(n.text, pattern_.find_all(n.text));
      if (invert_) invert(m);
      split_into(n, m, behavior_, out);
    });
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class Sequence : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void pre_tokenize(PreTokenized& pre) const override {
    for (const auto& p : parts_) p->pre_tokenize(pre);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

SplitBehavior behavior_of(const Json& j, const char* fallback, const Where& w) {
  const std::string b = get_string(j, "behavior", fallback, w);
  if (b == "Removed") return SplitBehavior::Removed;
  if (b == "Isolated") return SplitBehavior::Isolated;
  if (b == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (b == "Contiguous") return SplitBehavior::Contiguous;
  w.at("behavior").fail("unknown split behavior '" + b + "'",
                        "one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
}

std::string prepend_scheme_of(const Json& j, const Where& w) {
  if (j.contains("prepend_scheme")) {
    const std::string s = get_string(j, "prepend_scheme", "always", w);
    if (s != "always" && s != "first" && s != "never") w.at("prepend_scheme").fail("unknown scheme '" + s + "'");
    return s;
  }
  // Files older than tokenizers 0.14 say add_prefix_space instead.
  return get_bool(j, "add_prefix_space", true, w) ? "always" : "never";
}

}  // namespace

const std::string& byte_char(unsigned char b) { return kByteUtf8[b]; }

int char_byte(char32_t c) {
  static const std::array<int, 512> inverse = [] {
    std::array<int, 512> inv{};
    inv.fill(-1);
    for (int b = 0; b < 256; ++b) inv[kByteMap[b]] = b;
    return inv;
  }();
  return c < 512 ? inverse[c] : -1;
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& j, const Where& w) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, w);
  if (type == "BertPreTokenizer") return std::make_unique<BertPreTokenizer>();
  if (type == "ByteLevel")
    return std::make_unique<ByteLevel>(get_bool(j, "add_prefix_space", true, w), get_bool(j, "use_regex", true, w));
  if (type == "Whitespace") return std::make_unique<Whitespace>();
  if (type == "WhitespaceSplit") return std::make_unique<CharSplit>(is_whitespace, SplitBehavior::Removed);
  if (type == "Punctuation")
    return std::make_unique<CharSplit>(is_bert_punctuation, behavior_of(j, "Isolated", w));
  if (type == "Digits")
    return std::make_unique<CharSplit>(is_numeric, get_bool(j, "individual_digits", false, w)
                                                       ? SplitBehavior::Isolated : SplitBehavior::Contiguous);
  if (type == "Metaspace")
    return std::make_unique<Metaspace>(get_string(j, "replacement", "\xE2\x96\x81", w), prepend_scheme_of(j, w),
                                       get_bool(j, "split", true, w));
  if (type == "Split") {
    bool is_regex = false;
    const std::string pattern = pattern_of(j, &is_regex, w);
    return std::make_unique<SplitPattern>(pattern, is_regex, behavior_of(j, "Removed", w), get_bool(j, "invert", false, w),
                                   w.at("pattern"));
  }
  if (type == "Sequence") {
    const Json& list = get_array(j, "pretokenizers", w);
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto p = make_pre_tokenizer(list[i], w.at("pretokenizers").index(i));
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<Sequence>(std::move(parts));
  }
  w.unknown_type("pre_tokenizer", type);
}

}  // namespace spread::hf
