// Sentencepiece `bpe` / `unigram` tokenizers, run through the shim library (include/spread/data/sp_shim.h).
//
// Why dlmopen: Debian's libsentencepiece exports its bundled protobuf 3.14 and LibTorch links the system's 3.21;
// one process linking both crashes at start or aborts on protobuf's version check. dlmopen(LM_ID_NEWLM) loads
// the shim, sentencepiece and their own libc/libstdc++ into a separate linker namespace, where symbol lookup
// never sees LibTorch's protobuf. Only C data crosses: pointers, integers and byte buffers the shim frees.
#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "spread/data/sp_shim.h"
#include "spread/data/tokenizer.h"
#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/protobuf_wire.h"

namespace spread {
namespace fs = std::filesystem;

namespace {

constexpr const char* kShimFile = "libspread_sp_shim.so";
// Training options (see src/shim/sentencepiece_shim.cpp for the fixed ones). The thread count is fixed rather
// than taken from the machine because unigram scores depend on it (measured on tiny shakespeare: 1 and 2
// threads give scores that differ in the 5th digit), and a model should depend only on its data.
constexpr int32_t kTrainThreads = 2;
constexpr uint32_t kTrainSeed = 1;
constexpr int32_t kMaxSentences = 2000000;  // sentencepiece samples this many lines of a larger corpus
constexpr size_t kMaxLineBytes = 1 << 16;   // longer lines are cut (sentencepiece skips over-long lines)
constexpr size_t kEncodeChunkBytes = 2048;  // measured: 0.1-4 KiB pieces encode ~2x faster than 64 KiB ones
constexpr size_t kMinThreadBytes = 1 << 18;
constexpr size_t kMaxEncodeThreads = 8;

// --- loading the shim ------------------------------------------------------------------------------------------

std::string executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

// Where to look, in order. $SPREAD_SP_SHIM, when set, is the only candidate: an explicit path that is wrong
// should fail loudly rather than silently fall back to another build.
std::vector<std::string> shim_candidates() {
  if (const char* env = std::getenv("SPREAD_SP_SHIM"); env != nullptr && *env != '\0') return {env};
  std::vector<std::string> out;
  if (const std::string dir = executable_dir(); !dir.empty()) {
    out.push_back((fs::path(dir) / kShimFile).string());
    out.push_back((fs::path(dir) / ".." / "lib" / kShimFile).lexically_normal().string());
  }
#ifdef SPREAD_SHIM_BUILD_DIR
  out.push_back((fs::path(SPREAD_SHIM_BUILD_DIR) / kShimFile).string());
#endif
  return out;
}

UserError shim_not_found(const std::vector<std::string>& searched) {
  std::string list;
  for (const auto& path : searched) list += (list.empty() ? "" : ", ") + path;
  return user_error("", 0, "", "the sentencepiece shim " + std::string(kShimFile) + " was not found (looked at " +
                                   list + ")",
                    "build it with `cmake --build <build dir> --target spread_sp_shim`, or set SPREAD_SP_SHIM "
                    "to its full path");
}

struct Shim {
  std::string path;
  const SpreadSpApi* api = nullptr;
};

Shim open_shim() {
  const std::string path = find_sentencepiece_shim();
  // Never dlclose'd: the shim lives as long as the process.
  void* handle = dlmopen(LM_ID_NEWLM, path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr)
    throw user_error(path, 0, "", std::string("cannot load the sentencepiece shim: ") + dlerror(),
                     "rebuild the spread_sp_shim target");
  dlerror();
  auto get_api = reinterpret_cast<SpreadSpGetApiFn>(dlsym(handle, "spread_sp_get_api"));
  if (get_api == nullptr) throw user_error(path, 0, "", std::string("not a sentencepiece shim: ") + dlerror());
  const SpreadSpApi* api = get_api();
  if (api == nullptr || api->abi_version != SPREAD_SP_SHIM_ABI_VERSION)
    throw user_error(path, 0, "", "the sentencepiece shim was built from another version of spread",
                     "rebuild the spread_sp_shim target");
  return Shim{path, api};
}

// Loaded once per process; a failed load throws and is retried by the next call.
const Shim& shim() {
  static const Shim loaded = open_shim();
  return loaded;
}

std::string shim_error() {
  char buffer[2048];
  shim().api->last_error(buffer, sizeof buffer);
  return buffer;
}

// --- reading a few fields of sentencepiece's ModelProto --------------------------------------------------------

struct ModelFacts {
  int model_type = 1;  // TrainerSpec.model_type: UNIGRAM = 1, BPE = 2, WORD = 3, CHAR = 4
  // Whether encoding a text piece by piece, cut after newlines, gives the ids of encoding it whole: true when the
  // normalizer leaves the text alone (identity, no dummy prefix, whitespace kept) and no piece holds a newline
  // next to other characters.
  bool newline_cuts_are_exact = true;
};

// Field numbers from sentencepiece_model.proto: ModelProto{1 pieces, 2 trainer_spec, 3 normalizer_spec},
// SentencePiece{1 piece}, TrainerSpec{3 model_type}, NormalizerSpec{1 name, 3 add_dummy_prefix,
// 4 remove_extra_whitespaces}; the two booleans default to true.
ModelFacts read_model_facts(std::string_view model) {
  ModelFacts facts;
  std::string normalizer_name;
  bool dummy_prefix = true, remove_whitespace = true, newline_piece = false;
  for (WireReader top(model); top.next();) {
    WireReader inner(top.bytes());
    if (top.field() == 1) {
      while (inner.next())
        if (inner.field() == 1 && inner.bytes().size() > 1 && inner.bytes().find('\n') != std::string_view::npos)
          newline_piece = true;
    } else if (top.field() == 2) {
      while (inner.next())
        if (inner.field() == 3) facts.model_type = static_cast<int>(inner.varint());
    } else if (top.field() == 3) {
      while (inner.next()) {
        if (inner.field() == 1) normalizer_name = std::string(inner.bytes());
        if (inner.field() == 3) dummy_prefix = inner.varint() != 0;
        if (inner.field() == 4) remove_whitespace = inner.varint() != 0;
      }
    }
  }
  facts.newline_cuts_are_exact = normalizer_name == "identity" && !dummy_prefix && !remove_whitespace && !newline_piece;
  return facts;
}

std::string kind_of(const ModelFacts& facts, const std::string& path) {
  if (facts.model_type == 1) return "unigram";
  if (facts.model_type == 2) return "bpe";
  throw user_error(path, 0, "", "a sentencepiece word or char model; spread uses bpe and unigram models",
                   "for characters use tokenizer.kind = \"char\"");
}

// [begin, end) byte ranges covering `text`, each cut just after the first newline at or beyond `min_bytes`
// from its start (a range without such a newline runs to the end). An empty text gives one empty range.
std::vector<std::pair<size_t, size_t>> cut_after_newlines(std::string_view text, size_t min_bytes) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t begin = 0;
  do {
    size_t end = text.size();
    if (text.size() - begin > min_bytes) {
      const size_t newline = text.find('\n', begin + min_bytes - 1);
      if (newline != std::string_view::npos) end = newline + 1;
    }
    out.emplace_back(begin, end);
    begin = end;
  } while (begin < text.size());
  return out;
}

// Bytes per encoding thread: the text split evenly over the cores, but no thread gets less than
// kMinThreadBytes (starting a thread costs more than encoding a few lines).
size_t thread_share(size_t text_bytes) {
  const size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, kMaxEncodeThreads);
  return std::max(kMinThreadBytes, text_bytes / threads + 1);
}

// --- the tokenizer ---------------------------------------------------------------------------------------------

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(SpreadSpModel* model, std::string kind, std::string model_bytes, bool cut_at_newlines)
      : model_(model),
        kind_(std::move(kind)),
        model_bytes_(std::move(model_bytes)),
        cut_at_newlines_(cut_at_newlines),
        vocab_size_(api().vocab_size(model)) {}
  ~SentencePieceTokenizer() override { api().free_model(model_); }
  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

  // Texts go to sentencepiece in pieces of about kEncodeChunkBytes cut after a newline, which gives the ids of
  // one call (see ModelFacts) but runs faster: BPE encoding slows down on long inputs and sentencepiece builds a
  // protobuf for every output piece of a call. Long texts are split across threads the same way.
  std::vector<int32_t> encode(const std::string& text) const override {
    if (const int64_t bad = first_invalid_utf8(text); bad >= 0)
      throw user_error("text to encode", 0, "", fmt::format("invalid UTF-8 at byte offset {}", bad),
                       "tokenizers read UTF-8 text; re-encode the file as UTF-8");
    std::vector<int32_t> out;
    if (!cut_at_newlines_) {
      encode_piece(text, &out);
      return out;
    }
    const std::string_view all(text);
    const auto ranges = cut_after_newlines(all, thread_share(text.size()));
    std::vector<std::vector<int32_t>> parts(ranges.size());
    std::vector<std::exception_ptr> errors(ranges.size());
    auto work = [&](size_t i) {
      try {
        for (const auto& [b, e] : cut_after_newlines(all.substr(ranges[i].first, ranges[i].second - ranges[i].first),
                                                     kEncodeChunkBytes))
          encode_piece(all.substr(ranges[i].first + b, e - b), &parts[i]);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    };
    std::vector<std::thread> workers;
    for (size_t i = 1; i < ranges.size(); ++i) workers.emplace_back(work, i);
    work(0);
    for (auto& worker : workers) worker.join();
    for (const auto& error : errors)
      if (error) std::rethrow_exception(error);
    for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
    return out;
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    char* text = nullptr;
    size_t length = 0;
    if (api().decode(model_, ids.data(), ids.size(), &text, &length) != 0)
      throw user_error("", 0, "", "cannot decode ids: " + shim_error());
    std::string out(text, length);
    api().free_text(text);
    return out;
  }

  int64_t vocab_size() const override { return vocab_size_; }
  std::string kind() const override { return kind_; }
  int32_t bos_id() const override { return api().bos_id(model_); }
  int32_t eos_id() const override { return api().eos_id(model_); }

  void save(const std::string& run_dir) const override {
    write_tokenizer_files(run_dir, kind_, vocab_size_, "tokenizer.model", model_bytes_);
  }

 private:
  static const SpreadSpApi& api() { return *shim().api; }

  void encode_piece(std::string_view piece, std::vector<int32_t>* out) const {
    int32_t* ids = nullptr;
    size_t count = 0;
    if (api().encode(model_, piece.data(), piece.size(), &ids, &count) != 0)
      throw user_error("", 0, "", "sentencepiece could not encode the text: " + shim_error());
    out->insert(out->end(), ids, ids + count);
    api().free_ids(ids);
  }

  SpreadSpModel* model_;
  std::string kind_;
  std::string model_bytes_;  // the .model file, written back verbatim by save()
  bool cut_at_newlines_;
  int64_t vocab_size_;
};

std::string read_bytes(const std::string& path) {
  auto bytes = read_whole_file(path);
  if (!bytes) throw user_error(path, 0, "", "cannot read the sentencepiece model", "check the path");
  return *bytes;
}

// The training text as sentencepiece reads it: one sentence per line, none longer than kMaxLineBytes (cut at
// a space when possible, else at a character boundary).
void write_training_file(const std::string& text, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    if (end - begin > kMaxLineBytes) {
      end = begin + kMaxLineBytes;
      const size_t space = text.rfind(' ', end);
      if (space != std::string::npos && space > begin) {
        end = space;
      } else {
        while ((static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;  // not inside a character
      }
      out.write(text.data() + begin, static_cast<std::streamsize>(end - begin)).put('\n');
      begin = end;
    } else {
      out.write(text.data() + begin, static_cast<std::streamsize>(end - begin)).put('\n');
      begin = end + 1;
    }
  }
  if (!out) throw user_error(path, 0, "", "cannot write the tokenizer training file");
}

struct RemoveOnExit {
  std::vector<std::string> paths;
  ~RemoveOnExit() {
    std::error_code ignored;
    for (const auto& path : paths) fs::remove(path, ignored);
  }
};

}  // namespace

std::string find_sentencepiece_shim() {
  const auto candidates = shim_candidates();
  for (const auto& path : candidates)
    if (fs::is_regular_file(path)) return path;
  throw shim_not_found(candidates);
}

std::string sentencepiece_shim_path() { return shim().path; }

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& model_path) {
  std::string bytes = read_bytes(model_path);
  ModelFacts facts;
  try {
    facts = read_model_facts(bytes);
  } catch (const std::exception& e) {
    throw user_error(model_path, 0, "", std::string("not a sentencepiece model: ") + e.what());
  }
  const std::string kind = kind_of(facts, model_path);
  SpreadSpModel* model = nullptr;
  if (shim().api->load(bytes.data(), bytes.size(), &model) != 0)
    throw user_error(model_path, 0, "", "not a sentencepiece model: " + shim_error());
  return std::make_unique<SentencePieceTokenizer>(model, kind, std::move(bytes), facts.newline_cuts_are_exact);
}

std::unique_ptr<Tokenizer> train_sentencepiece(const std::string& kind, int64_t vocab_size,
                                               const std::string& training_text, const std::string& work_dir) {
  if (kind != "bpe" && kind != "unigram")
    throw user_error("", 0, "tokenizer.kind", "sentencepiece trains bpe or unigram, not '" + kind + "'");
  if (vocab_size < 1 || vocab_size > INT32_MAX)
    throw user_error("", 0, "tokenizer.vocab_size", fmt::format("{} is not a usable vocabulary size", vocab_size));
  if (const int64_t bad = first_invalid_utf8(training_text); bad >= 0)
    throw user_error("training text", 0, "", fmt::format("invalid UTF-8 at byte offset {}", bad),
                     "tokenizers read UTF-8 text; re-encode the file as UTF-8");
  if (training_text.find_first_not_of("\r\n") == std::string::npos)
    throw user_error("", 0, "", "the training text is empty, so there is nothing to train a tokenizer on",
                     "check data.path");
  fs::create_directories(work_dir);
  const std::string input = (fs::path(work_dir) / "tokenizer_train.txt").string();
  const std::string prefix = (fs::path(work_dir) / "tokenizer_sp").string();
  // The training file is a copy of the corpus and the model lives on in memory (save() writes it), so none of
  // the files stay behind, whatever happens.
  const RemoveOnExit cleanup{{input, prefix + ".model", prefix + ".vocab"}};
  write_training_file(training_text, input);
  SpreadSpTrainOptions options{input.c_str(), prefix.c_str(), kind.c_str(), static_cast<int32_t>(vocab_size),
                               kTrainThreads, kMaxSentences, static_cast<int32_t>(kMaxLineBytes), kTrainSeed};
  if (shim().api->train(&options) != 0)
    throw user_error("", 0, "tokenizer.vocab_size",
                     fmt::format("sentencepiece could not train a {} tokenizer with {} pieces: {}", kind, vocab_size,
                                 shim_error()),
                     "the vocabulary holds 3 special pieces, 256 byte pieces and every character of the text; "
                     "choose a size between that and what the text supports");
  return load_sentencepiece(prefix + ".model");
}

}  // namespace spread
