// Post-processors as the crate's (tokenizers/src/processors/{template,bert,roberta,sequence}.rs and
// pre_tokenizers/byte_level.rs). ByteLevel's trim_offsets moves a token's offsets past its leading and trailing
// spaces ('Ġ' or whitespace, counted in characters), except one leading space of the first token when
// add_prefix_space put it there. Without add_special_tokens, Template still sets each sequence's type id;
// Bert and Roberta leave the type ids as they are.
#include "post_processors.h"

#include <algorithm>

#include "unicode.h"

namespace spread::hf {

Encoding special_encoding(const std::vector<int32_t>& ids, const std::vector<std::string>& tokens, int32_t type_id) {
  Encoding e;
  for (size_t i = 0; i < ids.size(); ++i) {
    e.ids.push_back(ids[i]);
    e.tokens.push_back(tokens[i]);
    e.type_ids.push_back(type_id);
    e.offsets.push_back({0, 0});
    e.attention_mask.push_back(1);
    e.special_tokens_mask.push_back(1);
  }
  return e;
}

void append(Encoding& to, const Encoding& from) {
  to.ids.insert(to.ids.end(), from.ids.begin(), from.ids.end());
  to.type_ids.insert(to.type_ids.end(), from.type_ids.begin(), from.type_ids.end());
  to.tokens.insert(to.tokens.end(), from.tokens.begin(), from.tokens.end());
  to.offsets.insert(to.offsets.end(), from.offsets.begin(), from.offsets.end());
  to.attention_mask.insert(to.attention_mask.end(), from.attention_mask.begin(), from.attention_mask.end());
  to.special_tokens_mask.insert(to.special_tokens_mask.end(), from.special_tokens_mask.begin(),
                                from.special_tokens_mask.end());
}

void set_type_ids(Encoding& e, int32_t type_id) { e.type_ids.assign(e.ids.size(), type_id); }

namespace {

struct Special {
  std::vector<int32_t> ids;
  std::vector<std::string> tokens;
};

class Template : public PostProcessor {
 public:
  Template(const Json& j, const Where& w) {
    const Json& specials = field(j, "special_tokens", w);
    for (auto it = specials.begin(); it != specials.end(); ++it) {
      const Where ws = w.at("special_tokens").at(it.key());
      Special s;
      for (const auto& id : get_array(*it, "ids", ws)) s.ids.push_back(id.get<int32_t>());
      for (const auto& t : get_array(*it, "tokens", ws)) s.tokens.push_back(t.get<std::string>());
      if (s.ids.size() != s.tokens.size()) ws.fail("\"ids\" and \"tokens\" differ in length");
      specials_.emplace_back(it.key(), std::move(s));
    }
    single_ = read_template(j, "single", w);
    pair_ = read_template(j, "pair", w);
  }
  size_t added_tokens(bool is_pair) const override {
    size_t n = 0;
    for (const auto& p : is_pair ? pair_ : single_)
      if (p.special >= 0) n += specials_[p.special].second.ids.size();
    return n;
  }
  void process(std::vector<Encoding>& pieces, bool add_special) const override {
    std::vector<Encoding> out;
    for (const auto& p : pieces.size() > 1 ? pair_ : single_) {
      if (p.special >= 0) {
        if (add_special) out.push_back(special_encoding(specials_[p.special].second.ids, specials_[p.special].second.tokens, p.type_id));
      } else if (p.sequence < static_cast<int>(pieces.size())) {
        Encoding e = pieces[p.sequence];
        set_type_ids(e, p.type_id);
        out.push_back(std::move(e));
      }
    }
    pieces = std::move(out);
  }

 private:
  struct Piece {
    int special = -1;   // index into specials_
    int sequence = -1;  // 0 for A, 1 for B
    int32_t type_id = 0;
  };
  std::vector<Piece> read_template(const Json& j, const char* name, const Where& w) {
    std::vector<Piece> out;
    if (!j.contains(name) || j[name].is_null()) return out;
    const Json& list = get_array(j, name, w);
    for (size_t i = 0; i < list.size(); ++i) {
      const Where wi = w.at(name).index(i);
      const Json& item = list[i];
      Piece p;
      if (item.contains("SpecialToken")) {
        const Json& s = item["SpecialToken"];
        const std::string id = get_string(s, "id", "", wi);
        for (size_t k = 0; k < specials_.size(); ++k)
          if (specials_[k].first == id) p.special = static_cast<int>(k);
        if (p.special < 0) wi.fail("special token '" + id + "' is not in \"special_tokens\"");
        p.type_id = static_cast<int32_t>(get_count(s, "type_id", 0, INT32_MAX, wi));
      } else if (item.contains("Sequence")) {
        const Json& s = item["Sequence"];
        const std::string id = get_string(s, "id", "A", wi);
        if (id != "A" && id != "B") wi.fail("sequence id '" + id + "' is neither A nor B");
        p.sequence = id == "A" ? 0 : 1;
        p.type_id = static_cast<int32_t>(get_count(s, "type_id", 0, INT32_MAX, wi));
      } else {
        wi.fail("expected {\"SpecialToken\": ...} or {\"Sequence\": ...}, got " + item.dump());
      }
      out.push_back(p);
    }
    return out;
  }
  std::vector<std::pair<std::string, Special>> specials_;
  std::vector<Piece> single_, pair_;
};

std::pair<std::string, int32_t> token_pair(const Json& j, const char* name, const Where& w) {
  const Json& p = field(j, name, w);
  if (!p.is_array() || p.size() != 2 || !p[0].is_string() || !p[1].is_number_integer())
    w.at(name).fail("expected [\"token\", id], got " + p.dump());
  return {p[0].get<std::string>(), p[1].get<int32_t>()};
}

void trim_offsets(Encoding& e, bool add_prefix_space) {
  static const char32_t kSpaceChar = 0x120;  // 'Ġ', the byte-level character of ' '
  for (size_t i = 0; i < e.tokens.size(); ++i) {
    const std::string& t = e.tokens[i];
    std::vector<char32_t> chars;
    for (size_t k = 0; k < t.size();) {
      int len = 0;
      chars.push_back(decode_utf8(t, k, &len));
      k += len;
    }
    auto space = [](char32_t c) { return c == kSpaceChar || is_whitespace(c); };
    size_t leading = 0, trailing = 0;
    while (leading < chars.size() && space(chars[leading])) ++leading;
    while (trailing < chars.size() && space(chars[chars.size() - 1 - trailing])) ++trailing;
    auto& [b, end] = e.offsets[i];
    if (leading > 0) {
      const bool is_first = i == 0 || b == 0;
      if (is_first && add_prefix_space && leading == 1) leading = 0;
      b = std::min<int64_t>(b + static_cast<int64_t>(leading), end);
    }
    if (trailing > 0 && end >= static_cast<int64_t>(trailing)) end = std::max<int64_t>(end - static_cast<int64_t>(trailing), b);
  }
}

class Bert : public PostProcessor {
 public:
  Bert(const Json& j, const Where& w) : sep_(token_pair(j, "sep", w)), cls_(token_pair(j, "cls", w)) {}
  size_t added_tokens(bool is_pair) const override { return is_pair ? 3 : 2; }
  void process(std::vector<Encoding>& pieces, bool add_special) const override {
    if (!add_special) return;
    std::vector<Encoding> out;
    out.push_back(special_encoding({cls_.second}, {cls_.first}, 0));
    set_type_ids(pieces[0], 0);
    out.push_back(pieces[0]);
    out.push_back(special_encoding({sep_.second}, {sep_.first}, 0));
    if (pieces.size() > 1) {
      set_type_ids(pieces[1], 1);
      out.push_back(pieces[1]);
      out.push_back(special_encoding({sep_.second}, {sep_.first}, 1));
    }
    pieces = std::move(out);
  }

 protected:
  std::pair<std::string, int32_t> sep_, cls_;
};

class Roberta : public PostProcessor {
 public:
  Roberta(const Json& j, const Where& w)
      : sep_(token_pair(j, "sep", w)), cls_(token_pair(j, "cls", w)), trim_(get_bool(j, "trim_offsets", true, w)),
        prefix_(get_bool(j, "add_prefix_space", true, w)) {}
  size_t added_tokens(bool is_pair) const override { return is_pair ? 4 : 2; }
  void process(std::vector<Encoding>& pieces, bool add_special) const override {
    if (trim_)
      for (auto& p : pieces) trim_offsets(p, prefix_);
    if (!add_special) return;
    std::vector<Encoding> out;
    out.push_back(special_encoding({cls_.second}, {cls_.first}, 0));
    set_type_ids(pieces[0], 0);
    out.push_back(pieces[0]);
    out.push_back(special_encoding({sep_.second}, {sep_.first}, 0));
    if (pieces.size() > 1) {
      // Unlike BertProcessing, every type id stays 0 (measured with tokenizers 0.22).
      out.push_back(special_encoding({sep_.second}, {sep_.first}, 0));
      set_type_ids(pieces[1], 0);
      out.push_back(pieces[1]);
      out.push_back(special_encoding({sep_.second}, {sep_.first}, 0));
    }
    pieces = std::move(out);
  }

 private:
  std::pair<std::string, int32_t> sep_, cls_;
  bool trim_, prefix_;
};

class ByteLevelProcessor : public PostProcessor {
 public:
  ByteLevelProcessor(const Json& j, const Where& w)
      : trim_(get_bool(j, "trim_offsets", true, w)), prefix_(get_bool(j, "add_prefix_space", true, w)) {}
  size_t added_tokens(bool) const override { return 0; }
  void process(std::vector<Encoding>& pieces, bool) const override {
    if (trim_)
      for (auto& p : pieces) trim_offsets(p, prefix_);
  }

 private:
  bool trim_, prefix_;
};

class Sequence : public PostProcessor {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PostProcessor>> parts) : parts_(std::move(parts)) {}
  size_t added_tokens(bool is_pair) const override {
    size_t n = 0;
    for (const auto& p : parts_) n += p->added_tokens(is_pair);
    return n;
  }
  void process(std::vector<Encoding>& pieces, bool add_special) const override {
    for (const auto& p : parts_) p->process(pieces, add_special);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const Json& j, const Where& w) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, w);
  if (type == "TemplateProcessing") return std::make_unique<Template>(j, w);
  if (type == "BertProcessing") return std::make_unique<Bert>(j, w);
  if (type == "RobertaProcessing") return std::make_unique<Roberta>(j, w);
  if (type == "ByteLevel") return std::make_unique<ByteLevelProcessor>(j, w);
  if (type == "Sequence") {
    const Json& list = get_array(j, "processors", w);
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto p = make_post_processor(list[i], w.at("processors").index(i));
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<Sequence>(std::move(parts));
  }
  w.unknown_type("post_processor", type);
}

}  // namespace spread::hf
