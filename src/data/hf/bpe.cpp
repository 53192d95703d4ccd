// BPE (tokenizers/src/models/bpe/{model,word}.rs). A word starts as its characters (continuing_subword_prefix on
// all but the first, end_of_word_suffix on the last); a character missing from the vocabulary becomes its
// <0xXX> byte tokens under byte_fallback (the bytes of the prefixed string, each one byte long, as the crate
// does), else unk (consecutive unks fused under fuse_unk), else it is dropped. Merges then run from a heap ordered
// by (rank, position), skipping entries a previous merge made stale, exactly the crate's loop, so that ties and
// pairs that merge to the same token come out the same. ignore_merges: a word that is itself in the vocabulary
// is one token. Words up to 256 bytes are cached (as the crate's 10,000-word cache), one cache per thread so
// encode_batch takes no lock.
#include <atomic>
#include <cstdio>
#include <queue>
#include <unordered_map>

#include "models.h"
#include "spread/util/error.h"

namespace spread::hf {
namespace {

struct Symbol {
  int32_t id;
  int32_t prev, next;
  uint32_t len;
};

struct Piece {
  int32_t id;
  uint32_t len;
};
using Word = std::vector<Piece>;

struct QueuedMerge {
  int32_t pos, rank, id;
  bool operator<(const QueuedMerge& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

std::atomic<uint64_t> next_model_uid{1};

class Bpe : public Model {
 public:
  Bpe(const Json& j, const Where& w);
  void tokenize(std::string_view word, std::vector<Token>& out) const override;

 private:
  Word merge_word(std::string_view w) const;
  void merge_all(std::vector<Symbol>& s) const;
  void read_merges(const Json& merges, const Where& w);

  MergeMap merges_;
  std::optional<std::string> unk_;
  Where unk_at_;  // the file and key an unknown word's error names: the tokenizer's, not the text's
  std::string prefix_, suffix_;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  uint64_t uid_ = next_model_uid++;
};

Bpe::Bpe(const Json& j, const Where& w) {
  if (j.contains("dropout") && !j["dropout"].is_null() && j["dropout"].get<double>() != 0.0)
    w.at("dropout").fail("BPE dropout is random and not implemented", "set \"dropout\": null");
  read_vocab(field(j, "vocab", w), w.at("vocab"));
  if (j.contains("unk_token") && !j["unk_token"].is_null()) unk_ = get_string(j, "unk_token", "", w);
  unk_at_ = w.at("unk_token");
  prefix_ = get_string(j, "continuing_subword_prefix", "", w);
  suffix_ = get_string(j, "end_of_word_suffix", "", w);
  fuse_unk_ = get_bool(j, "fuse_unk", false, w);
  byte_fallback_ = get_bool(j, "byte_fallback", false, w);
  ignore_merges_ = get_bool(j, "ignore_merges", false, w);
  read_merges(get_array(j, "merges", w), w.at("merges"));
}

// Merges as "a b" strings (files before tokenizers 0.20) or [a, b] pairs; rank = position.
void Bpe::read_merges(const Json& merges, const Where& w) {
  for (size_t i = 0; i < merges.size(); ++i) {
    std::string a, b;
    const Json& m = merges[i];
    if (m.is_string()) {
      const std::string s = m;
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        w.index(i).fail("merge '" + s + "' is not two tokens separated by one space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0];
      b = m[1];
    } else {
      w.index(i).fail("expected \"a b\" or [\"a\", \"b\"], got " + m.dump());
    }
    const int32_t ia = vocab_.find(a), ib = vocab_.find(b);
    if (ia < 0 || ib < 0) w.index(i).fail("merge token '" + (ia < 0 ? a : b) + "' is not in the vocabulary");
    const std::string merged = a + b.substr(std::min(prefix_.size(), b.size()));
    const int32_t id = vocab_.find(merged);
    if (id < 0) w.index(i).fail("merged token '" + merged + "' is not in the vocabulary");
    merges_.insert(ia, ib, {static_cast<int32_t>(i), id});
  }
}

Word Bpe::merge_word(std::string_view w) const {
  std::vector<Symbol> syms;
  syms.reserve(w.size());
  auto add = [&](int32_t id, uint32_t len) {
    const int32_t n = static_cast<int32_t>(syms.size());
    syms.push_back({id, n - 1, n + 1, len});
  };
  Piece unk{-1, 0};  // a pending unk (id -1: none), fused with the next ones under fuse_unk
  const int32_t unk_id = unk_ ? vocab_.find(*unk_) : -1;
  std::string s;
  size_t i = 0;
  while (i < w.size()) {
    const uint32_t len = utf8_lead_len(static_cast<unsigned char>(w[i]));
    s.clear();
    if (i > 0) s += prefix_;
    s.append(w.substr(i, len));
    if (i + len >= w.size()) s += suffix_;
    i += len;
    const int32_t id = vocab_.find(s);
    if (id >= 0) {
      if (unk.id >= 0) { add(unk.id, unk.len); unk.id = -1; }
      add(id, len);
      continue;
    }
    if (byte_fallback_) {
      std::vector<int32_t> bytes;
      for (unsigned char b : s) {
        char code[8];
        std::snprintf(code, sizeof code, "<0x%02X>", b);
        const int32_t bid = vocab_.find(code);
        if (bid < 0) break;
        bytes.push_back(bid);
      }
      if (bytes.size() == s.size()) {
        for (int32_t bid : bytes) add(bid, 1);
        continue;
      }
    }
    if (unk_) {
      if (unk_id < 0) unk_at_.fail(missing_unk_problem(*unk_), kMissingUnkFix);
      if (unk.id >= 0 && fuse_unk_) { unk.len += len; continue; }
      if (unk.id >= 0) add(unk.id, unk.len);
      unk = Piece{unk_id, len};
    }
  }
  if (unk.id >= 0) add(unk.id, unk.len);
  if (!syms.empty()) syms.back().next = -1;
  merge_all(syms);
  Word out;
  for (const auto& sym : syms)
    if (sym.len != 0) out.push_back({sym.id, sym.len});
  return out;
}

void Bpe::merge_all(std::vector<Symbol>& s) const {
  std::priority_queue<QueuedMerge> queue;
  for (size_t i = 0; i + 1 < s.size(); ++i)
    if (const MergeValue* m = merges_.find(s[i].id, s[i + 1].id))
      queue.push({static_cast<int32_t>(i), m->rank, m->id});
  while (!queue.empty()) {
    const QueuedMerge top = queue.top();
    queue.pop();
    if (s[top.pos].len == 0 || s[top.pos].next == -1) continue;
    const int32_t next_pos = s[top.pos].next;
    const Symbol right = s[next_pos];
    const MergeValue* m = merges_.find(s[top.pos].id, right.id);
    if (!m || m->id != top.id) continue;  // stale: the pair changed since it was queued
    Symbol& cur = s[top.pos];
    cur.id = top.id;
    cur.len += right.len;
    cur.next = right.next;
    s[next_pos].len = 0;
    if (right.next >= 0) s[right.next].prev = top.pos;
    if (cur.prev >= 0)
      if (const MergeValue* p = merges_.find(s[cur.prev].id, cur.id)) queue.push({cur.prev, p->rank, p->id});
    if (cur.next >= 0)
      if (const MergeValue* p = merges_.find(cur.id, s[cur.next].id)) queue.push({top.pos, p->rank, p->id});
  }
}

// This thread's cache of merged words for one model (keyed by the model's uid, so a model freed and another
// allocated at its address never share entries).
std::unordered_map<std::string, Word>& thread_cache(uint64_t uid) {
  thread_local std::unordered_map<uint64_t, std::unordered_map<std::string, Word>> caches;
  thread_local uint64_t last_uid = 0;
  thread_local std::unordered_map<std::string, Word>* last = nullptr;
  if (uid == last_uid) return *last;
  if (caches.size() > 16 && !caches.count(uid)) caches.clear();
  last = &caches[uid];
  last_uid = uid;
  return *last;
}

constexpr size_t kCacheCapacity = 10000;
constexpr size_t kCacheMaxWordBytes = 256;

void Bpe::tokenize(std::string_view word, std::vector<Token>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    const int32_t id = vocab_.find(word);
    if (id >= 0) {
      out.push_back(Token{id, std::string(word), 0, static_cast<uint32_t>(word.size())});
      return;
    }
  }
  Word fresh;
  const Word* merged = nullptr;
  if (word.size() < kCacheMaxWordBytes) {
    auto& cache = thread_cache(uid_);
    std::string key(word);
    auto it = cache.find(key);
    if (it == cache.end()) {
      fresh = merge_word(word);
      if (cache.size() < kCacheCapacity) it = cache.emplace(std::move(key), std::move(fresh)).first;
      merged = it != cache.end() ? &it->second : &fresh;
    } else {
      merged = &it->second;
    }
  } else {
    fresh = merge_word(word);
    merged = &fresh;
  }
  uint32_t at = 0;
  for (const Piece& p : *merged) {
    out.push_back(Token{p.id, tokens_[p.id], at, at + p.len});
    at += p.len;
  }
}

}  // namespace

std::unique_ptr<Model> make_wordpiece(const Json& j, const Where& w);

std::unique_ptr<Model> make_model(const Json& j, const Where& w) {
  if (!j.is_object()) w.fail("expected a JSON object");
  std::string type = get_string(j, "type", "", w);
  if (type.empty()) type = j.contains("merges") ? "BPE" : j.contains("max_input_chars_per_word") ? "WordPiece" : "";
  if (type == "BPE") return std::make_unique<Bpe>(j, w);
  if (type == "WordPiece") return make_wordpiece(j, w);
  w.unknown_type("model", type.empty() ? "(none given)" : type);
}

}  // namespace spread::hf
