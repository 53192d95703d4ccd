// Decoders as the crate's (tokenizers/src/decoders/*.rs, pre_tokenizers/{byte_level,metaspace}.rs).
// WordPiece: a token with the prefix loses it, any other but the first gets a leading space; cleanup then undoes
// the spaces before punctuation and contractions, token by token. ByteLevel: the characters of all tokens back to
// bytes (a token with a character outside the byte map keeps its own bytes), read as lossy UTF-8. Metaspace:
// '▁' to ' ', except that the first token loses all of its '▁' unless prepend_scheme is "never". ByteFallback:
// runs of <0xXX> tokens to their bytes, or one U+FFFD per byte when those are not valid UTF-8.
#include "decoders.h"

#include <cctype>

#include "pre_tokenizers.h"
#include "regex.h"
#include "unicode.h"

namespace spread::hf {

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) { out.push_back(static_cast<char>(b)); ++i; continue; }
    int need = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) need = 1;
    else if (b == 0xE0) { need = 2; lo = 0xA0; }
    else if (b >= 0xE1 && b <= 0xEC) need = 2;
    else if (b == 0xED) { need = 2; hi = 0x9F; }
    else if (b >= 0xEE && b <= 0xEF) need = 2;
    else if (b == 0xF0) { need = 3; lo = 0x90; }
    else if (b >= 0xF1 && b <= 0xF3) need = 3;
    else if (b == 0xF4) { need = 3; hi = 0x8F; }
    if (need == 0) { out += "\xEF\xBF\xBD"; ++i; continue; }
    size_t j = i + 1;
    int got = 0;
    while (got < need && j < s.size()) {
      const auto c = static_cast<unsigned char>(s[j]);
      const unsigned char l = got == 0 ? lo : 0x80, h = got == 0 ? hi : 0xBF;
      if (c < l || c > h) break;
      ++j;
      ++got;
    }
    if (got == need) out.append(s.substr(i, j - i));
    else out += "\xEF\xBF\xBD";
    i = j;
  }
  return out;
}

namespace {

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  size_t last = 0, at = 0;
  bool any = false;
  while ((at = s.find(from, last)) != std::string::npos) {
    out.append(s, last, at - last);
    out.append(to);
    last = at + from.size();
    any = true;
  }
  if (!any) return;
  out.append(s, last, std::string::npos);
  s = std::move(out);
}

void cleanup(std::string& t) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."},   {" ?", "?"},   {" !", "!"},   {" ,", ","},   {" ' ", "'"},        {" n't", "n't"},
      {" 'm", "'m"}, {" do not", " don't"},      {" 's", "'s"},  {" 've", "'ve"},     {" 're", "'re"}};
  for (const auto& [from, to] : kRules) replace_all(t, from, to);
}

class WordPieceDecoder : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i != 0) {
        if (t.compare(0, prefix_.size(), prefix_) == 0) t.erase(0, prefix_.size());
        else t.insert(0, " ");
      }
      if (cleanup_) cleanup(t);
    }
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const auto& t : tokens) {
      const size_t mark = bytes.size();
      bool ok = true;
      for (size_t k = 0; k < t.size();) {
        int len = 0;
        const int b = char_byte(decode_utf8(t, k, &len));
        if (b < 0) { ok = false; break; }
        bytes.push_back(static_cast<char>(b));
        k += len;
      }
      if (!ok) {
        bytes.resize(mark);
        bytes += t;
      }
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(std::string rep, bool prepend) : rep_(std::move(rep)), prepend_(prepend) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) replace_all(tokens[i], rep_, i == 0 && prepend_ ? "" : " ");
  }

 private:
  std::string rep_;
  bool prepend_;
};

class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (first_invalid_utf8(pending) < 0) out.push_back(pending);
      else
        for (size_t k = 0; k < pending.size(); ++k) out.emplace_back("\xEF\xBF\xBD");
      pending.clear();
    };
    for (auto& t : tokens) {
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && std::isxdigit(static_cast<unsigned char>(t[3])) &&
          std::isxdigit(static_cast<unsigned char>(t[4])))
        byte = std::stoi(t.substr(3, 2), nullptr, 16);
      if (byte >= 0) { pending.push_back(static_cast<char>(byte)); continue; }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens = std::move(out);
  }
};

class Fuse : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, all);
  }
};

class StripDecoder : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      std::vector<std::pair<size_t, char32_t>> chars;  // (byte offset, char)
      for (size_t k = 0; k < t.size();) {
        int len = 0;
        chars.push_back({k, decode_utf8(t, k, &len)});
        k += len;
      }
      size_t cut_start = 0;
      while (cut_start < start_ && cut_start < chars.size() && chars[cut_start].second == content_) ++cut_start;
      size_t cut_stop = chars.size();
      for (size_t i = 0; i < stop_ && cut_stop > cut_start && chars[cut_stop - 1].second == content_; ++i) --cut_stop;
      const size_t b = cut_start < chars.size() ? chars[cut_start].first : t.size();
      const size_t e = cut_stop < chars.size() ? chars[cut_stop].first : t.size();
      t = t.substr(b, e > b ? e - b : 0);
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(const std::string& pattern, bool is_regex, std::string content, const Where& w)
      : pattern_(pattern, is_regex, w.file, w.key), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      std::string out;
      uint32_t last = 0;
      for (const auto& [b, e] : pattern_.find_all(t)) {
        out.append(t, last, b - last);
        out += content_;
        last = e;
      }
      out.append(t, last, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  Pattern pattern_;
  std::string content_;
};

// The BPE decoder of end-of-word-suffix models: the suffix becomes a space, none after the last token.
class BpeDecoder : public Decoder {
 public:
  explicit BpeDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) replace_all(tokens[i], suffix_, i + 1 == tokens.size() ? "" : " ");
  }

 private:
  std::string suffix_;
};

class Sequence : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

char32_t single_char(const std::string& s, const Where& w) {
  int len = 0;
  if (s.empty() || first_invalid_utf8(s) >= 0 || (decode_utf8(s, 0, &len), static_cast<size_t>(len) != s.size()))
    w.fail("expected a single character, got '" + s + "'");
  return decode_utf8(s, 0, &len);
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const Json& j, const Where& w) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, w);
  if (type == "WordPiece")
    return std::make_unique<WordPieceDecoder>(get_string(j, "prefix", "##", w), get_bool(j, "cleanup", true, w));
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") {
    const std::string rep = get_string(j, "replacement", "\xE2\x96\x81", w);
    single_char(rep, w.at("replacement"));
    std::string scheme = j.contains("prepend_scheme") ? get_string(j, "prepend_scheme", "always", w)
                                                      : (get_bool(j, "add_prefix_space", true, w) ? "always" : "never");
    return std::make_unique<MetaspaceDecoder>(rep, scheme != "never");
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<Fuse>();
  if (type == "Strip")
    return std::make_unique<StripDecoder>(single_char(get_string(j, "content", " ", w), w.at("content")),
                                          static_cast<size_t>(get_count(j, "start", 0, INT32_MAX, w)),
                                          static_cast<size_t>(get_count(j, "stop", 0, INT32_MAX, w)));
  if (type == "Replace") {
    bool is_regex = false;
    const std::string pattern = pattern_of(j, &is_regex, w);
    return std::make_unique<ReplaceDecoder>(pattern, is_regex, get_string(j, "content", "", w), w.at("pattern"));
  }
  if (type == "BPEDecoder") return std::make_unique<BpeDecoder>(get_string(j, "suffix", "</w>", w));
  if (type == "Sequence") {
    const Json& list = get_array(j, "decoders", w);
    std::vector<std::unique_ptr<Decoder>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto p = make_decoder(list[i], w.at("decoders").index(i));
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<Sequence>(std::move(parts));
  }
  w.unknown_type("decoder", type);
}

}  // namespace spread::hf
