#include "spread/interchange/hf_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string_view>
#include <tuple>

#include "spread/data/hf_run_tokenizer.h"
#include "spread/data/special_tokens.h"
#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_depth.h"
#include "spread/util/protobuf_wire.h"

namespace fs = std::filesystem;

namespace spread {
namespace {

// SentencePiece{1 piece, 2 score, 3 type}.
SentencePieceEntry read_piece(std::string_view message) {
  SentencePieceEntry e;
  for (WireReader r(message); r.next();) {
    if (r.field() == 1 && r.wire_type() == 2) e.piece = std::string(r.bytes());
    else if (r.field() == 2 && r.wire_type() == 5) e.score = r.fixed32_float();
    else if (r.field() == 3 && r.wire_type() == 0) e.type = int(r.varint());
  }
  return e;
}

// Byte offsets where a UTF-8 piece may be split (code point boundaries inside it).
std::vector<size_t> split_points(const std::string& s) {
  std::vector<size_t> out;
  for (size_t i = 1; i < s.size(); ++i)
    if ((uint8_t(s[i]) & 0xc0) != 0x80) out.push_back(i);
  return out;
}

// transformers' SentencePieceExtractor: (left, right) for every normal piece that splits into two pieces, ranked by
// the merged piece's id (sentencepiece BPE merges the pair whose piece scores highest, and scores fall with the
// id), then by the halves' ids.
nlohmann::json bpe_merges(const std::vector<SentencePieceEntry>& pieces, const std::map<std::string, int64_t>& ids) {
  std::vector<std::tuple<int64_t, int64_t, int64_t>> merges;
  for (size_t id = 0; id < pieces.size(); ++id) {
    if (pieces[id].type != 1) continue;
    const std::string& p = pieces[id].piece;
    for (size_t at : split_points(p)) {
      auto l = ids.find(p.substr(0, at)), r = ids.find(p.substr(at));
      if (l != ids.end() && r != ids.end()) merges.emplace_back(int64_t(id), l->second, r->second);
    }
  }
  std::sort(merges.begin(), merges.end());
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [merged, l, r] : merges) out.push_back({pieces[size_t(l)].piece, pieces[size_t(r)].piece});
  return out;
}

// The reserved ids the tokenizer has, in id order: [PAD] [CLS] [SEP] [MASK], then [Q] [D] where it has them (runs
// made before the markers were reserved have four).
std::vector<int32_t> reserved_ids(const Tokenizer& tokenizer) {
  const SpecialIds s = tokenizer.special_ids();
  if (!s.present()) return {};
  std::vector<int32_t> ids = {s.pad, s.cls, s.sep, s.mask};
  if (s.has_markers()) ids.insert(ids.end(), {s.query, s.document});
  return ids;
}

nlohmann::json added_special_tokens(const Tokenizer& tokenizer) {
  nlohmann::json out = nlohmann::json::array();
  const auto ids = reserved_ids(tokenizer);
  for (size_t i = 0; i < ids.size(); ++i)
    out.push_back({{"id", ids[i]}, {"content", kSpecialTokenNames[i]}, {"single_word", false}, {"lstrip", false},
                   {"rstrip", false}, {"normalized", false}, {"special", true}});
  return out;
}

// "[CLS] text [SEP]", as encode_for_encoder frames a text (HF tokenizers' TemplateProcessing, BERT's template; the
// pair template is BERT's too, for completeness: spread never encodes pairs). Null when there are no reserved ids.
nlohmann::json encoder_post_processor(const Tokenizer& tokenizer) {
  const SpecialIds s = tokenizer.special_ids();
  if (!s.present()) return nullptr;
  auto piece = [](const char* kind, const char* id, int type_id) {
    return nlohmann::json{{kind, {{"id", id}, {"type_id", type_id}}}};
  };
  auto special = [&](const char* name, int type_id) { return piece("SpecialToken", name, type_id); };
  auto sequence = [&](const char* name, int type_id) { return piece("Sequence", name, type_id); };
  return {{"type", "TemplateProcessing"},
          {"single", {special("[CLS]", 0), sequence("A", 0), special("[SEP]", 0)}},
          {"pair", {special("[CLS]", 0), sequence("A", 0), special("[SEP]", 0), sequence("B", 1), special("[SEP]", 1)}},
          {"special_tokens",
           {{"[CLS]", {{"id", "[CLS]"}, {"ids", {s.cls}}, {"tokens", {"[CLS]"}}}},
            {"[SEP]", {{"id", "[SEP]"}, {"ids", {s.sep}}, {"tokens", {"[SEP]"}}}}}}};
}

nlohmann::json bpe_model(const nlohmann::json& vocab, const nlohmann::json& merges, bool byte_fallback) {
  return {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", byte_fallback ? nlohmann::json("<unk>") : nlohmann::json(nullptr)},
          {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr},
          {"fuse_unk", byte_fallback},
          {"byte_fallback", byte_fallback},
          {"ignore_merges", false},
          {"vocab", vocab},
          {"merges", merges}};
}

nlohmann::json tokenizer_file(const Tokenizer& tokenizer, const nlohmann::json& normalizer,
                              const nlohmann::json& decoder, const nlohmann::json& model) {
  return {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr},
          {"added_tokens", added_special_tokens(tokenizer)}, {"normalizer", normalizer}, {"pre_tokenizer", nullptr},
          {"post_processor", encoder_post_processor(tokenizer)}, {"decoder", decoder}, {"model", model}};
}

int64_t base_vocab_size(const Tokenizer& tokenizer) {
  return tokenizer.vocab_size() - int64_t(reserved_ids(tokenizer).size());
}

// The run's sentencepiece pieces, one per base id (UserError naming the file when they do not fit the tokenizer).
std::vector<SentencePieceEntry> run_pieces(const std::string& run_dir, const Tokenizer& tokenizer) {
  const std::string path = (fs::path(run_dir) / "tokenizer.model").string();
  auto bytes = read_whole_file(path);
  if (!bytes) throw user_error(path, 0, "", "cannot read the run's sentencepiece model");
  auto pieces = read_sentencepiece_pieces(*bytes, path);
  if (int64_t(pieces.size()) != base_vocab_size(tokenizer))
    throw user_error(path, 0, "", fmt::format("holds {} pieces but the run's tokenizer has {} ids", pieces.size(),
                                              base_vocab_size(tokenizer)));
  return pieces;
}

// spread's sentencepiece settings (identity normalisation, no dummy prefix, whitespace kept) as HF's normalizer
// and decoder: spaces are "\u2581" in pieces, byte pieces decode to their bytes.
nlohmann::json sentencepiece_normalizer() {
  return {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}};
}
nlohmann::json sentencepiece_decoder() {
  return {{"type", "Sequence"},
          {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                        {{"type", "ByteFallback"}},
                        {{"type", "Fuse"}}}}};
}

nlohmann::json sentencepiece_bpe_json(const std::string& run_dir, const Tokenizer& tokenizer) {
  const auto pieces = run_pieces(run_dir, tokenizer);
  std::map<std::string, int64_t> ids;
  nlohmann::json vocab = nlohmann::json::object();
  for (size_t i = 0; i < pieces.size(); ++i) {
    ids.emplace(pieces[i].piece, int64_t(i));
    vocab[pieces[i].piece] = int64_t(i);
  }
  return tokenizer_file(tokenizer, sentencepiece_normalizer(), sentencepiece_decoder(),
                        bpe_model(vocab, bpe_merges(pieces, ids), /*byte_fallback=*/true));
}

// Sentencepiece's Viterbi matches only normal and user-defined pieces in text; HF's Unigram matches every vocabulary
// entry, so "<s>" or "<0x41>" typed as text would become a control or byte piece there (transformers' converter keeps
// their score 0, the best of all). Giving them a score no path can afford keeps them out of every segmentation while
// byte fallback and the decoder still find them by name. One case no score can cover: HF scores an unknown
// character below every piece, so a name typed next to a character the tokenizer never saw ("<s>" when "<" is
// unseen) still comes out as that piece there, where spread keeps it text.
constexpr double kUnreachableScore = -1e9;

nlohmann::json sentencepiece_unigram_json(const std::string& run_dir, const Tokenizer& tokenizer) {
  const auto pieces = run_pieces(run_dir, tokenizer);
  nlohmann::json vocab = nlohmann::json::array();
  int64_t unk_id = -1;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const bool matchable = pieces[i].type == 1 || pieces[i].type == 4;
    if (pieces[i].type == 2) unk_id = int64_t(i);
    vocab.push_back({pieces[i].piece, matchable ? double(pieces[i].score) : kUnreachableScore});
  }
  if (unk_id < 0)
    throw user_error((fs::path(run_dir) / "tokenizer.model").string(), 0, "", "has no <unk> piece",
                     "copy the run's tokenizer.model again");
  const nlohmann::json model = {{"type", "Unigram"}, {"unk_id", unk_id}, {"vocab", vocab}, {"byte_fallback", true}};
  return tokenizer_file(tokenizer, sentencepiece_normalizer(), sentencepiece_decoder(), model);
}

nlohmann::json char_json(const Tokenizer& tokenizer) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int32_t id = 0; id < int32_t(base_vocab_size(tokenizer)); ++id) vocab[tokenizer.decode({id})] = id;
  return tokenizer_file(tokenizer, nullptr, {{"type", "Fuse"}},
                        bpe_model(vocab, nlohmann::json::array(), /*byte_fallback=*/false));
}

}  // namespace

std::vector<SentencePieceEntry> read_sentencepiece_pieces(const std::string& model_bytes, const std::string& source) {
  const auto bad = [&](const std::string& what) {
    return user_error(source, 0, "", "not a sentencepiece model: " + what, "copy the run's tokenizer.model again");
  };
  std::vector<SentencePieceEntry> pieces;
  try {
    // ModelProto{1 pieces}
    for (WireReader r(model_bytes); r.next();)
      if (r.field() == 1 && r.wire_type() == 2) pieces.push_back(read_piece(r.bytes()));
  } catch (const ProtobufError& e) {
    throw bad(e.what());
  }
  if (pieces.empty()) throw bad("no pieces");
  return pieces;
}

std::string hf_tokenizer_bytes(const std::string& run_dir) {
  const std::string path = (fs::path(run_dir) / kHfTokenizerFile).string();
  auto bytes = read_whole_file(path);
  if (!bytes) throw user_error(path, 0, "", "cannot read the run's Hugging Face tokenizer");
  return *bytes;
}

std::optional<nlohmann::json> hf_tokenizer_json(const std::string& run_dir, const Tokenizer& tokenizer) {
  if (tokenizer.kind() == "char") return char_json(tokenizer);
  if (tokenizer.kind() == "bpe") return sentencepiece_bpe_json(run_dir, tokenizer);
  if (tokenizer.kind() == "unigram") return sentencepiece_unigram_json(run_dir, tokenizer);
  if (tokenizer.kind() == "hf") {
    const std::string text = hf_tokenizer_bytes(run_dir);
    refuse_deep_json(text, (fs::path(run_dir) / kHfTokenizerFile).string());
    return nlohmann::json::parse(text);
  }
  return std::nullopt;
}

nlohmann::json hf_tokenizer_config(const Tokenizer& tokenizer, int64_t max_length) {
  nlohmann::json c = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                      {"model_max_length", max_length},
                      {"clean_up_tokenization_spaces", false}};
  if (tokenizer.kind() == "bpe" || tokenizer.kind() == "unigram") {
    c["unk_token"] = "<unk>";
    if (tokenizer.bos_id() >= 0) c["bos_token"] = "<s>";
    if (tokenizer.eos_id() >= 0) c["eos_token"] = "</s>";
  }
  if (tokenizer.special_ids().present()) {
    c["pad_token"] = "[PAD]";
    c["cls_token"] = "[CLS]";
    c["sep_token"] = "[SEP]";
    c["mask_token"] = "[MASK]";
  }
  // spread's own vocabularies reserve [Q] and [D]; a Hugging Face vocabulary's markers are its own tokens, listed
  // in tokenizer.json already (naming "[Q]" here would make transformers add two new tokens).
  if (tokenizer.special_ids().has_markers() && tokenizer.kind() != "hf")
    c["additional_special_tokens"] = {"[Q]", "[D]"};
  return c;
}

}  // namespace spread
