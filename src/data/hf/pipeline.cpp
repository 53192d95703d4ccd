// The encode and decode pipeline of a tokenizer.json (the crate's tokenizer/mod.rs, encode_single_sequence,
// post_process, decode). Offsets: each token's bytes of its piece's normalized text, taken back to the original
// through the piece's alignment. Truncation (LongestFirst's split between a pair as the crate's) leaves room for
// the post-processor's tokens when special tokens are added; padding follows the post-processor.
#include "pipeline.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "spread/util/error.h"
#include "unicode.h"

namespace spread::hf {
namespace {

// The longest encoding a tokenizer.json may ask for by truncation or padding: 2^24 tokens, beyond any model's
// positions. A padding of 1e10 tokens asked for 100 GB per text and ended in an uncaught allocation failure.
constexpr int64_t kMaxLength = int64_t(1) << 24;

// A length field of the truncation or padding: an integer in [0, kMaxLength].
size_t length_field(const Json& j, const char* name, int64_t fallback, const Where& w) {
  const int64_t n = get_int(j, name, fallback, w);
  if (n < 0 || n > kMaxLength)
    w.at(name).fail("is " + std::to_string(n) + ", outside 0 to " + std::to_string(kMaxLength) + " tokens");
  return size_t(n);
}

void truncate(Encoding& e, size_t n, bool left) {
  if (e.ids.size() <= n) return;
  auto cut = [&](auto& v) {
    if (left) v.erase(v.begin(), v.end() - static_cast<std::ptrdiff_t>(n));
    else v.resize(n);
  };
  cut(e.ids);
  cut(e.type_ids);
  cut(e.tokens);
  cut(e.offsets);
  cut(e.attention_mask);
  cut(e.special_tokens_mask);
}

void pad(Encoding& e, size_t n, const Padding& p) {
  if (e.ids.size() >= n) return;
  const size_t k = n - e.ids.size();
  auto grow = [&](auto& v, auto value) {
    if (p.left) v.insert(v.begin(), k, value);
    else v.insert(v.end(), k, value);
  };
  grow(e.ids, p.pad_id);
  grow(e.type_ids, p.pad_type_id);
  grow(e.tokens, p.pad_token);
  grow(e.offsets, std::pair<int64_t, int64_t>{0, 0});
  grow(e.attention_mask, uint8_t{0});
  grow(e.special_tokens_mask, uint8_t{1});
}

class Pipeline : public Tokenizer {
 public:
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Model> model;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;
  AddedVocabulary added;
  std::optional<Truncation> truncation;
  std::optional<Padding> padding;
  std::string json_text;

  Encoding encode(std::string_view text, bool add_special) const override {
    std::vector<Encoding> seqs{encode_sequence(text)};
    Encoding e = post_process(seqs, add_special);
    if (padding) pad(e, padded_length(e.ids.size()), *padding);
    return e;
  }

  Encoding encode_pair(std::string_view a, std::string_view b, bool add_special) const override {
    std::vector<Encoding> seqs{encode_sequence(a), encode_sequence(b)};
    Encoding e = post_process(seqs, add_special);
    if (padding) pad(e, padded_length(e.ids.size()), *padding);
    return e;
  }

  std::vector<Encoding> encode_batch(const std::vector<std::string>& texts, bool add_special,
                                     int threads) const override {
    std::vector<Encoding> out(texts.size());
    const int n = threads > 0 ? threads : at::get_num_threads();
    std::exception_ptr failure;
    std::mutex failure_mutex;
    auto work = [&](int64_t begin, int64_t end) {
      try {
        for (int64_t i = begin; i < end; ++i) {
          std::vector<Encoding> seqs{encode_sequence(texts[i])};
          out[i] = post_process(seqs, add_special);
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
    };
    run_chunks(static_cast<int64_t>(texts.size()), n, work);
    if (failure) std::rethrow_exception(failure);
    if (padding) {
      size_t longest = 0;
      for (const auto& e : out) longest = std::max(longest, e.ids.size());
      const size_t target = padding->fixed ? padded_length(0) : padded_length(longest);
      // Padding is a fair share of the work when the batch pads to 256 (BERT's file): on the threads too.
      run_chunks(static_cast<int64_t>(out.size()), n, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) pad(out[i], target, *padding);
      });
    }
    return out;
  }

  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override {
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (int32_t id : ids) {
      const AddedToken* a = added.by_id(id);
      if (a) {
        if (!(skip_special && a->special)) tokens.push_back(a->content);
        continue;
      }
      const std::string* t = model->id_to_token(id);
      if (!t) throw UserError("tokenizer decode: id " + std::to_string(id) + " is outside the vocabulary (0.." +
                              std::to_string(vocab_size() - 1) + ")");
      tokens.push_back(*t);
    }
    if (!decoder) {
      std::string s;
      for (size_t i = 0; i < tokens.size(); ++i) s += (i ? " " : "") + tokens[i];
      return s;
    }
    decoder->decode_chain(tokens);
    std::string s;
    for (const auto& t : tokens) s += t;
    return s;
  }

  int64_t vocab_size() const override {
    int64_t n = model->vocab_size();
    for (const auto& t : added.tokens())
      if (model->token_to_id(t.content) < 0) ++n;
    return n;
  }
  std::optional<int32_t> token_to_id(std::string_view token) const override {
    if (const AddedToken* a = added.by_content(token)) return a->id;
    const int32_t id = model->token_to_id(token);
    return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
  }
  std::optional<std::string> id_to_token(int32_t id) const override {
    if (const AddedToken* a = added.by_id(id)) return a->content;
    const std::string* t = model->id_to_token(id);
    return t ? std::optional<std::string>(*t) : std::nullopt;
  }
  std::vector<int32_t> special_token_ids() const override {
    std::vector<int32_t> ids;
    for (const auto& t : added.tokens())
      if (t.special) ids.push_back(t.id);
    std::sort(ids.begin(), ids.end());
    return ids;
  }
  std::string to_json() const override { return json_text; }

 private:
  // `threads` contiguous chunks of [0, count): on LibTorch's intra-op threads (at::parallel_for, OpenMP) when
  // that many are set, so no second set of threads competes with them; more than that get plain threads.
  // Texts differ in length by orders of magnitude and files group them (a corpus of short lines, then one of
  // abstracts): equal shares in file order left one thread most of the work (2 threads ran 1.1x one). Each worker
  // takes the next block of texts from a shared counter instead; every text still lands at its own index.
  static void run_chunks(int64_t count, int threads, const std::function<void(int64_t, int64_t)>& work) {
    const int64_t workers = std::min<int64_t>(std::max(threads, 1), count);
    if (workers <= 1) { work(0, count); return; }
    constexpr int64_t kBlock = 32;
    std::atomic<int64_t> next{0};
    auto worker = [&] {
      for (int64_t begin; (begin = next.fetch_add(kBlock)) < count;) work(begin, std::min(count, begin + kBlock));
    };
    if (workers <= at::get_num_threads() && !at::in_parallel_region()) {
      at::parallel_for(0, workers, 1, [&](int64_t begin, int64_t end) {
        for (int64_t w = begin; w < end; ++w) worker();
      });
      return;
    }
    std::vector<std::thread> pool;
    for (int64_t w = 1; w < workers; ++w) pool.emplace_back(worker);
    worker();
    for (auto& t : pool) t.join();
  }

  size_t padded_length(size_t longest) const {
    size_t n = padding->fixed ? *padding->fixed : longest;
    if (padding->multiple_of > 0 && n % padding->multiple_of != 0) n += padding->multiple_of - n % padding->multiple_of;
    return n;
  }

  Encoding encode_sequence(std::string_view text) const {
    const int64_t bad = first_invalid_utf8(text);
    if (bad >= 0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(text[bad]));
      throw UserError("tokenizer input: invalid UTF-8 at byte offset " + std::to_string(bad) + " (byte " + hex +
                      "); the text must be UTF-8");
    }
    PreTokenized pre = added.extract_and_normalize(text, normalizer.get());
    if (pre_tokenizer) pre_tokenizer->pre_tokenize(pre);
    Encoding e;
    std::vector<Token> tokens;
    for (auto& s : pre) {
      if (!s.tokenized) {
        s.tokens.clear();
        model->tokenize(s.n.text, s.tokens);
      }
      for (auto& t : s.tokens) {
        const Range r = s.n.original_range(t.b, t.e);
        e.ids.push_back(t.id);
        e.tokens.push_back(std::move(t.value));
        e.offsets.push_back({r.first, r.second});
      }
    }
    e.type_ids.assign(e.ids.size(), 0);
    e.attention_mask.assign(e.ids.size(), 1);
    e.special_tokens_mask.assign(e.ids.size(), 0);
    return e;
  }

  void truncate_pair(std::vector<Encoding>& seqs, bool add_special) const {
    size_t max_length = truncation->max_length;
    const size_t added_n = post_processor ? post_processor->added_tokens(seqs.size() > 1) : 0;
    if (add_special && added_n > 0) max_length = max_length > added_n ? max_length - added_n : 0;
    const bool left = truncation->left;
    if (seqs.size() == 1) { truncate(seqs[0], max_length, left); return; }
    size_t n1 = seqs[0].ids.size(), n2 = seqs[1].ids.size();
    if (n1 + n2 <= max_length) return;
    switch (truncation->strategy) {
      case Truncation::Strategy::LongestFirst: {
        const bool swap = n1 > n2;
        if (swap) std::swap(n1, n2);
        n2 = n1 > max_length ? n1 : std::max(n1, max_length - n1);
        if (n1 + n2 > max_length) { n1 = max_length / 2; n2 = n1 + max_length % 2; }
        if (swap) std::swap(n1, n2);
        truncate(seqs[0], n1, left);
        truncate(seqs[1], n2, left);
        break;
      }
      case Truncation::Strategy::OnlyFirst:
      case Truncation::Strategy::OnlySecond: {
        const size_t i = truncation->strategy == Truncation::Strategy::OnlyFirst ? 0 : 1;
        const size_t other = seqs[1 - i].ids.size();
        if (other >= max_length)
          throw UserError("tokenizer: truncation " + std::string(i == 0 ? "only_first" : "only_second") +
                          " cannot fit the pair in max_length " + std::to_string(truncation->max_length));
        truncate(seqs[i], max_length - other, left);
        break;
      }
    }
  }

  Encoding post_process(std::vector<Encoding>& seqs, bool add_special) const {
    if (truncation) truncate_pair(seqs, add_special);
    if (post_processor) post_processor->process(seqs, add_special);
    Encoding out;
    for (const auto& s : seqs) append(out, s);
    return out;
  }
};

Truncation read_truncation(const Json& j, const Where& w) {
  Truncation t;
  t.max_length = length_field(j, "max_length", 512, w);
  const std::string s = get_string(j, "strategy", "LongestFirst", w);
  if (s == "LongestFirst") t.strategy = Truncation::Strategy::LongestFirst;
  else if (s == "OnlyFirst") t.strategy = Truncation::Strategy::OnlyFirst;
  else if (s == "OnlySecond") t.strategy = Truncation::Strategy::OnlySecond;
  else w.at("strategy").fail("unknown truncation strategy '" + s + "'");
  const std::string d = get_string(j, "direction", "Right", w);
  if (d != "Left" && d != "Right") w.at("direction").fail("unknown direction '" + d + "'");
  t.left = d == "Left";
  return t;
}

Padding read_padding(const Json& j, const Where& w) {
  Padding p;
  const Json& strategy = field(j, "strategy", w);
  if (strategy.is_object() && strategy.contains("Fixed"))
    p.fixed = length_field(strategy, "Fixed", 0, w.at("strategy"));
  else if (strategy != "BatchLongest") w.at("strategy").fail("expected \"BatchLongest\" or {\"Fixed\": n}");
  const std::string d = get_string(j, "direction", "Right", w);
  if (d != "Left" && d != "Right") w.at("direction").fail("unknown direction '" + d + "'");
  p.left = d == "Left";
  p.multiple_of = length_field(j, "pad_to_multiple_of", 0, w);
  p.pad_id = static_cast<int32_t>(get_count(j, "pad_id", 0, INT32_MAX, w));
  p.pad_type_id = static_cast<int32_t>(get_count(j, "pad_type_id", 0, INT32_MAX, w));
  p.pad_token = get_string(j, "pad_token", "[PAD]", w);
  return p;
}

std::vector<AddedToken> read_added_tokens(const Json& doc, const Model& model, const Where& w) {
  std::vector<AddedToken> out;
  if (!doc.contains("added_tokens") || doc["added_tokens"].is_null()) return out;
  const Json& list = get_array(doc, "added_tokens", w);
  const int32_t model_size = static_cast<int32_t>(model.vocab_size());
  int32_t max_added = -1;
  std::unordered_set<std::string> seen;  // a scan of the earlier ones made a load of 200k quadratic
  for (size_t i = 0; i < list.size(); ++i) {
    const Where wi = w.at("added_tokens").index(i);
    AddedToken t;
    t.content = get_string(list[i], "content", "", wi);
    if (t.content.empty()) wi.at("content").fail("missing or empty");
    t.single_word = get_bool(list[i], "single_word", false, wi);
    t.lstrip = get_bool(list[i], "lstrip", false, wi);
    t.rstrip = get_bool(list[i], "rstrip", false, wi);
    t.special = get_bool(list[i], "special", false, wi);
    t.normalized = get_bool(list[i], "normalized", !t.special, wi);
    // As the crate's add_tokens: a token the model knows keeps the model's id; a new one gets the next free id.
    const int32_t known = model.token_to_id(t.content);
    if (!seen.insert(t.content).second) wi.fail("added token '" + t.content + "' is listed twice");
    // The crate's new id: one past the highest added id when that is past the model's, else the model's size.
    t.id = known >= 0 ? known : (max_added >= model_size ? max_added + 1 : model_size);
    max_added = std::max(max_added, t.id);
    const int64_t given = get_int(list[i], "id", t.id, wi);
    if (given != t.id)
      wi.at("id").fail("added token '" + t.content + "' has id " + std::to_string(given) + " but is " +
                       (known >= 0 ? "id " + std::to_string(known) + " in the vocabulary"
                                   : "the next new id, " + std::to_string(t.id)));
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

std::unique_ptr<Tokenizer> build_tokenizer(const Json& doc, std::string json_text, const std::string& file,
                                           bool truncation_and_padding) {
  const Where root{file, ""};
  if (!doc.is_object()) root.fail("a tokenizer.json must be a JSON object");
  if (!doc.contains("model")) root.at("model").fail("missing: this is not a tokenizer.json");
  auto t = std::make_unique<Pipeline>();
  auto get = [&](const char* key) -> const Json& {
    static const Json null;
    auto it = doc.find(key);
    return it == doc.end() ? null : *it;
  };
  t->normalizer = make_normalizer(get("normalizer"), root.at("normalizer"));
  t->pre_tokenizer = make_pre_tokenizer(get("pre_tokenizer"), root.at("pre_tokenizer"));
  t->model = make_model(doc["model"], root.at("model"));
  t->post_processor = make_post_processor(get("post_processor"), root.at("post_processor"));
  t->decoder = make_decoder(get("decoder"), root.at("decoder"));
  if (truncation_and_padding && !get("truncation").is_null())
    t->truncation = read_truncation(get("truncation"), root.at("truncation"));
  if (truncation_and_padding && !get("padding").is_null())
    t->padding = read_padding(get("padding"), root.at("padding"));
  t->added.build(read_added_tokens(doc, *t->model, root), t->normalizer.get());
  t->json_text = std::move(json_text);
  return t;
}

}  // namespace spread::hf
