// Token shards from text (data/shard_writer.h): inputs -> chunks of whole lines -> ids on the worker threads ->
// shards, in input order.
#include "spread/data/shard_writer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <glob.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <thread>

#include "hf/unicode.h"
#include "spread/data/hf/tokenizer.h"
#include "spread/data/token_file.h"
#include "spread/data/tokenize_file.h"
#include "spread/data/tokenizer.h"
#include "spread/log/progress.h"
#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_depth.h"

namespace fs = std::filesystem;

namespace spread {
namespace {

using Clock = std::chrono::steady_clock;

// A shard's token count is the header's int32.
constexpr int64_t kMaxShardTokens = std::numeric_limits<int32_t>::max();
constexpr double kProgressSeconds = 2.0;
// The tokenizer's own end of text, in this order of preference: GPT-2's, Llama 2's and T5's, Llama 3's,
// Gemma's, and BERT's separator (what BERT's pretraining put between documents' sentences).
constexpr const char* kEndOfTextTokens[] = {"<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>", "[SEP]"};

// --- inputs --------------------------------------------------------------------------------------------------

struct InputFile {
  std::string path;
  bool jsonl = false;
  std::optional<uint64_t> size;  // none for a pipe
};

std::vector<std::string> glob_matches(const std::string& pattern) {
  glob_t found{};
  std::vector<std::string> paths;
  if (::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &found) == 0)
    paths.assign(found.gl_pathv, found.gl_pathv + found.gl_pathc);
  ::globfree(&found);
  std::sort(paths.begin(), paths.end());  // byte order, whatever the locale
  return paths;
}

// Each --in in order: an existing path as it is (a name may hold '[' or '*'), else the pattern's matches.
std::vector<InputFile> input_files(const std::vector<std::string>& patterns) {
  if (patterns.empty()) throw UserError("give the text to tokenize: --in FILE_OR_GLOB (repeatable)");
  std::vector<InputFile> files;
  for (const auto& pattern : patterns) {
    std::error_code ec;
    const bool literal = fs::exists(pattern, ec) || pattern.find_first_of("*?[") == std::string::npos;
    const std::vector<std::string> paths = literal ? std::vector<std::string>{pattern} : glob_matches(pattern);
    if (paths.empty())
      throw user_error(pattern, 0, "--in", "matches no file",
                       "check the pattern, and quote it so that the shell leaves it to spread");
    for (const auto& path : paths) {
      if (!fs::exists(path, ec)) throw user_error(path, 0, "--in", "does not exist", "check the path");
      refuse_non_file(path);
      InputFile file{path, fs::path(path).extension() == ".jsonl", std::nullopt};
      if (fs::is_regular_file(path, ec)) file.size = fs::file_size(path, ec);
      files.push_back(std::move(file));
    }
  }
  return files;
}

// --- the tokenizer -------------------------------------------------------------------------------------------

// A document's ids, then the end of text, through whichever tokenizer --tokenizer named.
class DocumentEncoder {
 public:
  DocumentEncoder(TokenizerAtPath tokenizer, const std::string& eot)
      : tokenizer_(std::move(tokenizer)), eot_id_(eot.empty() ? own_end_of_text() : named_end_of_text(eot)) {}

  void append(std::string_view text, std::vector<int32_t>& ids) const {
    const std::vector<int32_t> own = ids_of(text);
    ids.insert(ids.end(), own.begin(), own.end());
    ids.push_back(eot_id_);
  }
  int32_t eot_id() const { return eot_id_; }
  int64_t vocab_size() const { return tokenizer_.hf ? tokenizer_.hf->vocab_size() : tokenizer_.run->vocab_size(); }
  const std::string& source() const { return tokenizer_.source; }

 private:
  std::vector<int32_t> ids_of(std::string_view text) const {
    if (tokenizer_.hf) return tokenizer_.hf->encode(text, /*add_special_tokens=*/false).ids;
    return tokenizer_.run->encode(std::string(text));
  }

  int32_t own_end_of_text() const {
    if (tokenizer_.run && tokenizer_.run->eos_id() >= 0) return tokenizer_.run->eos_id();
    for (const char* name : kEndOfTextTokens)
      if (const auto id = special_token(name)) return *id;
    throw user_error("", 0, "--eot", tokenizer_.source + " has no end-of-text token of its own",
                     "name the token that ends each document with --eot TOKEN");
  }

  // A run's Hugging Face vocabulary answers entry_id; sentencepiece and char runs have their eos_id or nothing.
  std::optional<int32_t> special_token(const std::string& name) const {
    if (tokenizer_.run) return tokenizer_.run->entry_id(name);
    for (const int32_t id : tokenizer_.hf->special_token_ids())
      if (tokenizer_.hf->id_to_token(id) == name) return id;
    return std::nullopt;
  }

  int32_t named_end_of_text(const std::string& token) const {
    const auto entry = tokenizer_.hf ? tokenizer_.hf->token_to_id(token) : tokenizer_.run->entry_id(token);
    if (entry) return *entry;
    try {
      const std::vector<int32_t> ids = ids_of(token);
      if (ids.size() == 1) return ids[0];
    } catch (const UserError&) {  // e.g. a character outside a char vocabulary: no token either way
    }
    throw user_error("", 0, "--eot", fmt::format("'{}' is no token of the {}", token, tokenizer_.source),
                     "give a token of its vocabulary, e.g. <|endoftext|> for GPT-2's or [SEP] for BERT's");
  }

  TokenizerAtPath tokenizer_;
  int32_t eot_id_;
};

// --- reading: chunks of whole lines --------------------------------------------------------------------------

struct Chunk {
  size_t file = 0;         // index into the inputs
  int64_t first_line = 1;  // the line number of its first line
  std::string text;        // whole lines, each ended by "\n" but the file's last
};

// Cuts the inputs, in order, into chunks of about `chunk_bytes` that end at a line's end; a chunk never spans two
// files, and a line longer than a chunk is one chunk.
class ChunkReader {
 public:
  ChunkReader(const std::vector<InputFile>& files, int64_t chunk_bytes, int64_t threads)
      : files_(files), chunk_bytes_(size_t(chunk_bytes)), threads_(threads) {}

  std::optional<Chunk> next() {
    while (file_ < files_.size()) {
      if (!in_.is_open()) open(files_[file_].path);
      std::string text = std::move(carry_);
      carry_.clear();
      size_t searched = text.size();  // carry_ holds no line end
      while (read_some(text)) {
        const size_t cut = std::string_view(text).substr(searched).rfind('\n');
        if (cut != std::string_view::npos) return cut_after(std::move(text), searched + cut);
        searched = text.size();
        refuse_text_beyond_memory(double(text.size()), threads_, where());  // one line longer than a chunk
      }
      // The end of the file: what is left is its last line, without a "\n".
      in_.close();
      Chunk last{file_, line_, std::move(text)};
      ++file_;
      line_ = 1;
      if (!last.text.empty()) return last;
    }
    return std::nullopt;
  }

 private:
  void open(const std::string& path) {
    in_ = open_input_file(path);
    if (!in_) throw user_error(path, 0, "--in", "cannot read the file", "check its permissions");
  }

  // Appends up to a chunk's bytes of the file to `text`; false at the end of the file.
  bool read_some(std::string& text) {
    const size_t before = text.size();
    const size_t want = before < chunk_bytes_ ? chunk_bytes_ - before : chunk_bytes_;
    text.resize(before + want);
    in_.read(&text[before], std::streamsize(want));
    text.resize(before + size_t(in_.gcount()));
    if (in_.bad()) throw user_error(files_[file_].path, 0, "--in", "cannot read the file", "check the disk");
    return text.size() > before;
  }

  Chunk cut_after(std::string text, size_t newline) {
    carry_.assign(text, newline + 1);
    text.resize(newline + 1);
    const int64_t first = line_;
    line_ += std::count(text.begin(), text.end(), '\n');
    return Chunk{file_, first, std::move(text)};
  }

  std::string where() const { return fmt::format("{}:{}", files_[file_].path, line_); }

  const std::vector<InputFile>& files_;
  size_t chunk_bytes_;
  int64_t threads_;
  size_t file_ = 0;
  std::ifstream in_;
  std::string carry_;  // the start of a line whose end is not read yet
  int64_t line_ = 1;   // the line number of carry_
};

// --- encoding: a chunk's documents to ids --------------------------------------------------------------------

struct DocumentSize {
  int64_t tokens = 0;  // its ids and the end of text
  uint64_t bytes = 0;  // of its UTF-8 text
};

struct EncodedChunk {
  std::vector<int32_t> ids;  // each document's, in order
  std::vector<DocumentSize> documents;
  uint64_t input_bytes = 0;
};


// Every document of the chunk, in order; UserError naming FILE:LINE of the first bad one.
EncodedChunk encode_chunk(const Chunk& chunk, const InputFile& file, const DocumentEncoder& encoder,
                          const std::string& column) {
  EncodedChunk out;
  out.input_bytes = chunk.text.size();
  out.ids.reserve(chunk.text.size() / 3);  // English text: about 4 bytes per token
  std::string_view rest(chunk.text);
  for (int64_t line = chunk.first_line; !rest.empty(); ++line) {
    const size_t end = std::min(rest.find('\n'), rest.size());
    const std::string_view text = rest.substr(0, end);
    rest.remove_prefix(std::min(end + 1, rest.size()));
    if (text.empty()) continue;
    const auto where = [&] { return fmt::format("{}:{}", file.path, line); };
    if (const int64_t bad = hf::first_invalid_utf8(text); bad >= 0)
      throw user_error(where(), 0, "", fmt::format("invalid UTF-8 at byte {} of the line", bad),
                       "convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8), or remove the line");
    const std::string json_text = file.jsonl ? jsonl_document(text, column, where()) : std::string();
    const std::string_view document = file.jsonl ? std::string_view(json_text) : text;
    if (document.empty()) continue;
    const size_t before = out.ids.size();
    try {
      encoder.append(document, out.ids);
    } catch (const UserError& e) {
      throw user_error(where(), 0, "", e.what());
    }
    out.documents.push_back({int64_t(out.ids.size() - before), uint64_t(document.size())});
  }
  return out;
}

// `threads` workers that run the submitted tasks in order of submission; each result is the caller's through its
// future, so the caller takes them in input order however the workers finish.
class WorkerPool {
 public:
  explicit WorkerPool(int threads) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  // Tasks not started are dropped (an error stopped the caller); running ones finish first.
  ~WorkerPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      queue_.clear();
    }
    ready_.notify_all();
    for (auto& w : workers_) w.join();
  }
  template <class Task>
  std::future<EncodedChunk> submit(Task task) {
    std::packaged_task<EncodedChunk()> packaged(std::move(task));
    auto result = packaged.get_future();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(packaged));
    }
    ready_.notify_one();
    return result;
  }

 private:
  void work() {
    for (;;) {
      std::packaged_task<EncodedChunk()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();  // an exception lands in the future
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::packaged_task<EncodedChunk()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// --- writing: shards -----------------------------------------------------------------------------------------

// Renames `from` to `to` unless something is at `to` already (another writer into the same folder): the check
// at the start is no guarantee an hour later. Where the filesystem cannot refuse a replacement itself, the check
// is made again just before.
void rename_without_replacing(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return;
  const int error = errno;
  std::error_code ec;
  if (error == EEXIST || ((error == EINVAL || error == ENOSYS) && fs::exists(to, ec)))
    throw user_error(to, 0, "--shards", "appeared while this shard was written; it is left as it is",
                     "is another `spread tokenize --shards` writing into the same folder?");
  if (error != EINVAL && error != ENOSYS)
    throw filesystem_user_error(to, "rename the shard", std::error_code(error, std::generic_category()));
  rename_file(from, to);
}

// One shard, under its temporary name (util/file.h) until commit(); the header, which holds the count, goes in
// last. Destroyed uncommitted (an error between), it removes the temporary.
class ShardFile {
 public:
  ShardFile(std::string path, uint32_t width)
      : path_(std::move(path)), tmp_(temporary_name(path_).string()), width_(width) {
    file_ = std::fopen(tmp_.c_str(), "wb");
    if (!file_) fail("create the shard");
    write(shard_header(width_, 0, 0));  // room for the header
  }
  ~ShardFile() {
    if (file_) std::fclose(file_);
    if (!committed_) std::remove(tmp_.c_str());
  }
  ShardFile(const ShardFile&) = delete;
  ShardFile& operator=(const ShardFile&) = delete;

  void append(const int32_t* ids, int64_t n, uint64_t bytes) {
    if (width_ == 2) {
      narrow_.assign(ids, ids + n);
      write(std::string_view(reinterpret_cast<const char*>(narrow_.data()), narrow_.size() * 2));
    } else {
      write(std::string_view(reinterpret_cast<const char*>(ids), size_t(n) * 4));
    }
    tokens_ += n;
    bytes_ += bytes;
  }

  // The header written, the file flushed, synced and closed.
  void close() {
    if (std::fseek(file_, 0, SEEK_SET) != 0) fail("write the shard's header");
    write(shard_header(width_, tokens_, bytes_));
    if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0) fail("write the shard");
    const int closed = std::fclose(file_);
    file_ = nullptr;
    if (closed != 0) fail("write the shard");
  }

  void commit() {
    rename_without_replacing(tmp_, path_);
    committed_ = true;
    sync_folder(fs::path(path_).parent_path().string());
  }

  int64_t tokens() const { return tokens_; }
  bool closed() const { return file_ == nullptr; }
  const std::string& path() const { return path_; }

 private:
  void write(std::string_view bytes) {
    if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) fail("write the shard");
  }
  [[noreturn]] void fail(const std::string& doing) {
    throw filesystem_user_error(path_, doing, std::error_code(errno ? errno : EIO, std::generic_category()));
  }

  std::string path_, tmp_;
  uint32_t width_;
  std::FILE* file_ = nullptr;
  int64_t tokens_ = 0;
  uint64_t bytes_ = 0;
  bool committed_ = false;
  std::vector<uint16_t> narrow_;
};

// The part of a document's `bytes` that its tokens [0, k) of `n` carry: shares in proportion to tokens, whose
// differences add up to `bytes` exactly however the document is cut.
uint64_t bytes_before(uint64_t bytes, int64_t k, int64_t n) {
  return uint64_t(static_cast<unsigned __int128>(bytes) * uint64_t(k) / uint64_t(n));
}

// The shards of OUT_DIR, filled with whole documents in input order: the validation shard first, then training
// shards of shard_tokens each. The validation shard is renamed only once a training token follows it, so that an
// input too short for both leaves nothing behind.
class ShardSet {
 public:
  ShardSet(std::string dir, int64_t shard_tokens, int64_t val_tokens, uint32_t width)
      : dir_(std::move(dir)), shard_tokens_(shard_tokens), val_target_(val_tokens), width_(width) {
    if (val_target_ > 0) val_ = std::make_unique<ShardFile>(shard_path("val", 0), width_);
  }
  // Unfinished (an error stopped the run): the shards it completed go too, so that the folder is as it was and a
  // rerun after the fix is not refused over them. The open shards' temporaries go with their ShardFile.
  ~ShardSet() {
    if (finished_) return;
    for (const auto& path : written_) std::remove(path.c_str());
  }
  ShardSet(const ShardSet&) = delete;
  ShardSet& operator=(const ShardSet&) = delete;

  void add(const EncodedChunk& chunk) {
    const int32_t* ids = chunk.ids.data();
    for (const DocumentSize& doc : chunk.documents) {
      if (val_ && !val_->closed()) {
        add_to_val(ids, doc);
      } else {
        add_to_train(ids, doc);
      }
      ids += doc.tokens;
      tokens_ += doc.tokens;
    }
  }

  // Closes the last training shard; UserError when no token is left for training.
  std::vector<std::string> finish() {
    if (!train_ && written_.empty()) refuse_no_training_tokens();
    if (train_) commit(*train_);
    train_.reset();
    finished_ = true;
    return written_;
  }

  int64_t val_tokens() const { return val_ ? val_->tokens() : val_tokens_written_; }
  size_t shards_written() const { return written_.size(); }

 private:
  std::string shard_path(const char* split, int64_t index) const {
    return (fs::path(dir_) / fmt::format("{}_{:06d}.bin", split, index)).string();
  }

  void add_to_val(const int32_t* ids, const DocumentSize& doc) {
    if (val_->tokens() + doc.tokens > kMaxShardTokens)
      throw user_error("", 0, "--val-tokens",
                       fmt::format("the validation shard would pass {} tokens, the most a shard's header counts",
                                   kMaxShardTokens),
                       "give a smaller --val-tokens");
    val_->append(ids, doc.tokens, doc.bytes);
    if (val_->tokens() >= val_target_) val_->close();
  }

  void add_to_train(const int32_t* ids, const DocumentSize& doc) {
    if (val_) {  // closed, waiting for this first training token
      val_->commit();
      written_.push_back(val_->path());
      val_tokens_written_ = val_->tokens();
      val_.reset();
    }
    for (int64_t done = 0; done < doc.tokens;) {
      if (!train_) train_ = std::make_unique<ShardFile>(shard_path("train", next_train_++), width_);
      const int64_t take = std::min(doc.tokens - done, shard_tokens_ - train_->tokens());
      const uint64_t bytes = bytes_before(doc.bytes, done + take, doc.tokens) - bytes_before(doc.bytes, done, doc.tokens);
      train_->append(ids + done, take, bytes);
      done += take;
      if (train_->tokens() == shard_tokens_) {
        commit(*train_);
        train_.reset();
      }
    }
  }

  void commit(ShardFile& shard) {
    shard.close();
    shard.commit();
    written_.push_back(shard.path());
  }

  [[noreturn]] void refuse_no_training_tokens() const {
    if (tokens_ == 0)
      throw user_error("", 0, "--in", "the inputs hold no document (every line is empty)", "check the --in files");
    throw user_error("", 0, "--val-tokens",
                     fmt::format("the validation shard takes all {} tokens of the inputs (--val-tokens {}), none "
                                 "is left for training", tokens_, val_target_),
                     "give a smaller --val-tokens, or more text");
  }

  std::string dir_;
  int64_t shard_tokens_, val_target_;
  uint32_t width_;
  std::unique_ptr<ShardFile> val_, train_;
  int64_t next_train_ = 0, tokens_ = 0, val_tokens_written_ = 0;
  std::vector<std::string> written_;
  bool finished_ = false;
};

// --- progress ------------------------------------------------------------------------------------------------

struct Totals {
  uint64_t bytes_done = 0;              // of the inputs
  std::optional<uint64_t> bytes_total;  // none when an input is a pipe
  uint64_t document_bytes = 0;
  int64_t documents = 0, tokens = 0;
  size_t shards = 0;
};

std::optional<uint64_t> total_size(const std::vector<InputFile>& files) {
  uint64_t total = 0;
  for (const auto& f : files) {
    if (!f.size) return std::nullopt;
    total += *f.size;
  }
  return total;
}

// The stderr line, at most every kProgressSeconds, and the same numbers as JSON lines in tokenize.jsonl.
class ShardProgress {
 public:
  ShardProgress(const std::string& log_path, bool print) : print_(print), start_(Clock::now()), last_(start_) {
    check_output_file(log_path, "--shards");
    log_.open(log_path, std::ios::app);
    if (!log_) throw user_error(log_path, 0, "--shards", "cannot write the log", "check that the folder is writable");
  }

  void update(const Totals& t) {
    const auto now = Clock::now();
    if (std::chrono::duration<double>(now - last_).count() < kProgressSeconds) return;
    last_ = now;
    const double rate = mb_per_s(t.bytes_done);
    const std::optional<double> eta = eta_seconds(t, rate);
    if (print_)
      fmt::print(stderr, "tokenize {:.1f}{} MB | {:.2f} MB/s | {} tokens | {} shards | ETA {}\n",
                 double(t.bytes_done) / 1e6, t.bytes_total ? fmt::format("/{:.1f}", double(*t.bytes_total) / 1e6) : "",
                 rate, t.tokens, t.shards, eta ? format_duration(*eta) : "?");
    nlohmann::json line{{"event", "progress"}, {"bytes_done", t.bytes_done}, {"tokens", t.tokens},
                        {"documents", t.documents}, {"shards", t.shards}, {"seconds", seconds()}, {"mb_per_s", rate}};
    if (t.bytes_total) line["bytes_total"] = *t.bytes_total;
    if (eta) line["eta_seconds"] = *eta;
    log(line);
  }

  void log(const nlohmann::json& line) {
    log_ << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n' << std::flush;
  }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  double mb_per_s(uint64_t bytes) const { return double(bytes) / 1e6 / std::max(seconds(), 1e-9); }

 private:
  // At the rate so far; none when the total is unknown (a pipe among the inputs) or nothing is done yet.
  static std::optional<double> eta_seconds(const Totals& t, double mb_per_s) {
    if (!t.bytes_total || mb_per_s <= 0) return std::nullopt;
    return double(*t.bytes_total - std::min(*t.bytes_total, t.bytes_done)) / 1e6 / mb_per_s;
  }

  bool print_;
  Clock::time_point start_, last_;
  std::ofstream log_;
};

// --- the whole ----------------------------------------------------------------------------------------------

// llm.c's uint16 when every id fits, else spread's uint32; from the vocabulary, so that all shards agree.
uint32_t token_width(int64_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

void check_request(const ShardRequest& r) {
  if (r.shard_tokens < 1 || r.shard_tokens > kMaxShardTokens)
    throw user_error("", 0, "--shard-tokens",
                     fmt::format("{} is out of range (allowed: 1..{}, the header counts tokens in an int32)",
                                 r.shard_tokens, kMaxShardTokens));
  if (r.val_tokens < 0 || r.val_tokens > kMaxShardTokens)
    throw user_error("", 0, "--val-tokens",
                     fmt::format("{} is out of range (allowed: 0..{}, one shard)", r.val_tokens, kMaxShardTokens));
  if (r.chunk_bytes < 1) throw UserError("shard writer: chunk_bytes must be at least 1");
  if (r.out_dir.empty()) throw user_error("", 0, "--shards", "give the folder to write the shards into");
}

// OUT_DIR made when missing and writable; refused when it holds shards already (they are never overwritten or
// deleted); what killed writers left there removed.
void prepare_out_dir(const std::string& dir) {
  require_writable_directory(dir);
  std::vector<std::string> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const bool shard_name = (name.rfind("train_", 0) == 0 || name.rfind("val_", 0) == 0) &&
                            name.size() > 4 && name.compare(name.size() - 4, 4, ".bin") == 0;
    if (shard_name) found.push_back(name);
  }
  std::sort(found.begin(), found.end());
  if (!found.empty())
    throw user_error(dir, 0, "--shards",
                     fmt::format("already holds {} shard(s) ({}{}); spread never overwrites or deletes shards",
                                 found.size(), found.front(), found.size() > 1 ? ", ..." : ""),
                     "give a new or empty folder");
  remove_stale_temporaries(dir);
}

}  // namespace

std::string jsonl_document(std::string_view line, const std::string& column, const std::string& where) {
  refuse_deep_json(line, where);
  const auto doc = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  const std::string fix = "each line of a .jsonl input must be a JSON object holding the document as a string under "
                          "--column (now '" + column + "')";
  if (doc.is_discarded()) throw user_error(where, 0, "", "not valid JSON", fix);
  if (!doc.is_object()) throw user_error(where, 0, "", std::string("a JSON ") + doc.type_name() + ", not an object", fix);
  const auto it = doc.find(column);
  if (it == doc.end()) throw user_error(where, 0, "--column", "no key '" + column + "' in the object", fix);
  if (!it->is_string())
    throw user_error(where, 0, "--column", fmt::format("'{}' is a {}, not a string", column, it->type_name()), fix);
  return it->get<std::string>();
}

ShardResult write_shards(const ShardRequest& request) {
  check_request(request);
  const std::vector<InputFile> files = input_files(request.inputs);
  prepare_out_dir(request.out_dir);
  ShardProgress progress((fs::path(request.out_dir) / "tokenize.jsonl").string(), request.print_progress);
  const DocumentEncoder encoder(open_tokenizer_at(request.tokenizer, "--tokenizer",
                                                  /*file_truncation_and_padding=*/false),
                                request.eot);
  // Every core by default: the workers run no BLAS, so LibTorch's intra-op count (1 where OpenBLAS brings its own
  // pthreads, runtime/blas.h) says nothing about them.
  const int threads = request.threads > 0 ? request.threads : int(std::max(1u, std::thread::hardware_concurrency()));

  ShardSet shards(request.out_dir, request.shard_tokens, request.val_tokens, token_width(encoder.vocab_size()));
  Totals totals;
  totals.bytes_total = total_size(files);
  ChunkReader reader(files, request.chunk_bytes, threads);
  WorkerPool pool(threads);
  // Two chunks per thread: one being encoded, one waiting, so that no worker idles while the oldest is written.
  const size_t in_flight_limit = size_t(2 * threads);
  std::deque<std::future<EncodedChunk>> in_flight;
  const auto write_oldest = [&] {
    const EncodedChunk chunk = in_flight.front().get();  // rethrows the error of a bad document in it
    in_flight.pop_front();
    shards.add(chunk);
    totals.bytes_done += chunk.input_bytes;
    totals.documents += int64_t(chunk.documents.size());
    totals.tokens += int64_t(chunk.ids.size());
    for (const auto& d : chunk.documents) totals.document_bytes += d.bytes;
    totals.shards = shards.shards_written();
    progress.update(totals);
  };
  while (std::optional<Chunk> chunk = reader.next()) {
    const InputFile& file = files[chunk->file];
    in_flight.push_back(pool.submit([&encoder, &file, &request, chunk = std::move(*chunk)] {
      return encode_chunk(chunk, file, encoder, request.column);
    }));
    if (in_flight.size() >= in_flight_limit) write_oldest();
  }
  while (!in_flight.empty()) write_oldest();

  ShardResult result;
  result.shards = shards.finish();
  result.files = int64_t(files.size());
  result.documents = totals.documents;
  result.tokens = totals.tokens;
  result.val_tokens = shards.val_tokens();
  result.input_bytes = totals.bytes_done;
  result.document_bytes = totals.document_bytes;
  result.eot_id = encoder.eot_id();
  result.tokenizer = encoder.source();
  result.seconds = progress.seconds();
  progress.log({{"event", "done"}, {"files", result.files}, {"documents", result.documents},
                {"bytes", result.input_bytes}, {"document_bytes", result.document_bytes},
                {"tokens", result.tokens}, {"val_tokens", result.val_tokens}, {"shards", result.shards.size()},
                {"seconds", result.seconds}, {"mb_per_s", progress.mb_per_s(result.input_bytes)},
                {"tokenizer", result.tokenizer}, {"eot_id", result.eot_id},
                {"token_bytes", token_width(encoder.vocab_size())}});
  return result;
}

}  // namespace spread
