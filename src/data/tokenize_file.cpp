// spread tokenize as a library call (data/tokenize_file.h).
#include "spread/data/tokenize_file.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <vector>

#include "spread/data/hf/tokenizer.h"
#include "spread/data/text_check.h"
#include "spread/data/tokenizer.h"
#include "spread/log/progress.h"
#include "spread/runtime/memory.h"
#include "spread/util/output_over_input.h"
#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_depth.h"

namespace fs = std::filesystem;

namespace spread {
namespace {

using Ids = std::vector<int32_t>;

// A tokenizer.json's "padding": {"strategy": "BatchLongest", ...}. Each line's encode() pads it alone (a Fixed
// length, or its own length); the reference's encode_batch of the file pads every line to the file's longest.
struct BatchPadding {
  int32_t pad_id = 0;
  bool left = false;
  int64_t multiple_of = 0;
};

// One line's way in and out, whichever tokenizer is behind it.
struct LineTokenizer {
  std::function<Ids(const std::string&)> encode;
  std::function<std::string(const Ids&)> decode;
  std::string source;
  std::optional<BatchPadding> batch_padding;
};

std::optional<BatchPadding> batch_padding_of(const std::string& tokenizer_json) {
  if (json_too_deep(tokenizer_json)) return std::nullopt;  // the tokenizer's own reader refuses it
  const auto doc = nlohmann::json::parse(tokenizer_json, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("padding") || !doc["padding"].is_object()) return std::nullopt;
  const auto& p = doc["padding"];
  if (p.value("strategy", nlohmann::json()) != "BatchLongest") return std::nullopt;
  return BatchPadding{p.value("pad_id", 0), p.value("direction", std::string("Right")) == "Left",
                      p.value("pad_to_multiple_of", nlohmann::json(0)).is_number_integer()
                          ? p["pad_to_multiple_of"].get<int64_t>()
                          : 0};
}

void pad_to_longest(std::vector<Ids>& all, const BatchPadding& p) {
  size_t target = 0;
  for (const auto& ids : all) target = std::max(target, ids.size());
  const auto multiple = size_t(p.multiple_of);
  if (multiple > 0 && target % multiple != 0) target += multiple - target % multiple;
  for (auto& ids : all)
    ids.insert(p.left ? ids.begin() : ids.end(), target - ids.size(), p.pad_id);
}

// A spread run keeps its own description as tokenizer.json ({"kind", "vocab_size"}), where a Hugging Face folder
// keeps the tokenizer itself ({"model", ...}).
bool is_run_directory(const fs::path& path) {
  if (!fs::is_directory(path) || !fs::exists(path / "tokenizer.json")) return false;
  const auto bytes = read_whole_file((path / "tokenizer.json").string());
  if (!bytes) return false;
  refuse_deep_json(*bytes, (path / "tokenizer.json").string());
  const auto doc = nlohmann::json::parse(*bytes, nullptr, /*allow_exceptions=*/false);
  return doc.is_object() && doc.contains("kind") && !doc.contains("model");
}

LineTokenizer open_tokenizer(const TokenizeRequest& request) {
  const TokenizerAtPath opened = open_tokenizer_at(request.tokenizer, "--tokenizer",
                                                   /*file_truncation_and_padding=*/true);
  if (opened.run) {
    const auto t = opened.run;
    return {[t](const std::string& text) { return t->encode(text); },
            [t](const Ids& ids) { return t->decode(ids); }, opened.source};
  }
  const auto t = opened.hf;
  const bool special = request.add_special_tokens;
  return {[t, special](const std::string& text) { return t->encode(text, special).ids; },
          [t, special](const Ids& ids) { return t->decode(ids, /*skip_special_tokens=*/!special); },
          opened.source, batch_padding_of(t->to_json())};
}

std::vector<std::string> read_lines(const std::string& path) {
  const auto bytes = read_whole_file(path);
  if (!bytes) throw user_error(path, 0, "--in", "cannot read the file", "check the path");
  std::vector<std::string> lines;
  for (size_t begin = 0; begin < bytes->size();) {
    size_t end = bytes->find('\n', begin);
    if (end == std::string::npos) end = bytes->size();
    lines.emplace_back(*bytes, begin, end - begin);
    begin = end + 1;
  }
  return lines;
}

// Encoding takes memory in proportion to the text, all of it at once for one line (the normalised text with an
// alignment per byte, the pre-tokens, their offsets): measured 132 bytes per byte of a 5.7 MB line with BERT's
// tokenizer.json, 106 with GPT-2's files (peak RSS less the process's own). A line that would need more than the
// machine has is refused before any of it is tokenized, by file and line, instead of being killed half-way.
constexpr double kEncodeBytesPerTextByte = 140;

void refuse_lines_beyond_memory(const std::vector<std::string>& lines, const std::string& path) {
  if (lines.empty()) return;
  const auto longest = std::max_element(lines.begin(), lines.end(),
                                        [](const std::string& a, const std::string& b) { return a.size() < b.size(); });
  // The threads encode lines side by side: as many of the longest at once, in the worst case.
  refuse_text_beyond_memory(double(longest->size()), std::min<int64_t>(at::get_num_threads(), int64_t(lines.size())),
                            fmt::format("{}:{}", path, longest - lines.begin() + 1));
}

// "[101, 7592, 102]" of a line in decode mode; UserError (without the place, which the caller adds) otherwise.
Ids parse_ids(const std::string& line) {
  if (json_too_deep(line)) throw UserError("JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
  const auto doc = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_array()) throw UserError("not a JSON list of ids (expected e.g. [101, 7592, 102])");
  Ids ids;
  ids.reserve(doc.size());
  for (const auto& v : doc) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > std::numeric_limits<int32_t>::max())
      throw UserError("not a JSON list of ids: " + v.dump() + " is not an id");
    ids.push_back(int32_t(v.get<int64_t>()));
  }
  return ids;
}

// The output file under a temporary name until commit(), opened before the work so that an unwritable place fails
// first; a failure before commit() leaves no partial file behind.
class AtomicOutput {
 public:
  explicit AtomicOutput(std::string path) : path_(std::move(path)) {
    if (path_.empty()) return;
    // No link, FIFO, device or folder at the name, and what killed runs left beside it removed (util/file.h).
    prepare_output_file(path_, "--out");
    tmp_ = temporary_name(path_).string();
    file_.open(tmp_, std::ios::binary | std::ios::trunc);
    if (!file_) throw user_error(path_, 0, "--out", "cannot write here", "check that its folder exists and is writable");
  }
  ~AtomicOutput() {
    if (!tmp_.empty()) std::remove(tmp_.c_str());
  }
  std::ostream& stream() { return path_.empty() ? std::cout : file_; }
  void commit() {
    if (path_.empty()) {
      std::cout.flush();
      return;
    }
    file_.close();
    if (!file_) throw user_error(path_, 0, "--out", "cannot write the output", "check free disk space");
    rename_file(tmp_, path_);
    tmp_.clear();
  }

 private:
  std::string path_, tmp_;
  std::ofstream file_;
};

// The first failing line of a parallel pass, and its message.
class FirstError {
 public:
  void record(int64_t line, const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (line_ < 0 || line < line_) line_ = line, message_ = message;
  }
  void throw_if_any(const std::string& file) const {
    if (line_ >= 0) throw user_error(file, int(line_ + 1), "", message_);
  }

 private:
  std::mutex mutex_;
  int64_t line_ = -1;
  std::string message_;
};

constexpr int64_t kChunkLines = 8192;  // lines between progress updates

// Each line's output (ids, or the decoded text as a JSON string) on LibTorch's intra-op threads, chunk by chunk
// for the progress line; UserError naming the first bad line.
void run_lines(const std::vector<std::string>& lines, const std::string& file, const std::string& what,
               const std::function<void(size_t)>& one_line) {
  CountProgress progress(what, "lines");
  for (int64_t chunk = 0; chunk < int64_t(lines.size()); chunk += kChunkLines) {
    const int64_t end = std::min<int64_t>(chunk + kChunkLines, int64_t(lines.size()));
    FirstError error;
    at::parallel_for(chunk, end, 1, [&](int64_t begin, int64_t stop) {
      for (int64_t i = begin; i < stop; ++i) {
        try {
          one_line(size_t(i));
        } catch (const UserError& e) {
          error.record(i, e.what());
        }
      }
    });
    error.throw_if_any(file);
    progress(end, int64_t(lines.size()));
  }
}

}  // namespace

TokenizerAtPath open_tokenizer_at(const std::string& path, const std::string& option,
                                  bool file_truncation_and_padding) {
  if (!fs::exists(path))
    throw user_error(path, 0, option, "does not exist",
                     "give a tokenizer.json, vocab.txt, vocab.json, a folder holding one, or a spread run directory");
  if (is_run_directory(path)) {
    std::shared_ptr<const Tokenizer> t = load_tokenizer(path);
    const std::string source = fmt::format("run tokenizer ({}) of {}", t->kind(), path);
    return {t, nullptr, source};
  }
  return {nullptr, hf::Tokenizer::load(path, file_truncation_and_padding), "hf tokenizer " + path};
}

void refuse_text_beyond_memory(double bytes, int64_t threads, const std::string& where) {
  if (!memory_checks_enabled()) return;
  const double need = kEncodeBytesPerTextByte * bytes * double(threads);
  const AvailableMemory available = available_memory();
  if (available.bytes <= 0 || need <= available.bytes) return;
  throw user_error(where, 0, "--in",
                   fmt::format("a line of {} takes about {} to tokenize ({} bytes per byte, {} thread(s)), more than "
                               "the {} available ({})", memory_size_text(bytes), memory_size_text(need),
                               kEncodeBytesPerTextByte, threads, memory_size_text(available.bytes),
                               available.source),
                   "split the line, or use fewer threads (OMP_NUM_THREADS); SPREAD_MEMORY_CHECK=0 skips this check");
}

TokenizeResult tokenize_file(const TokenizeRequest& request) {
  refuse_output_over_input(request.out, request.in, "--out");
  const auto lines = read_lines(request.in);
  AtomicOutput output(request.out);
  const LineTokenizer tokenizer = open_tokenizer(request);
  TokenizeResult result{int64_t(lines.size()), 0, tokenizer.source};
  if (request.decode) {
    std::vector<std::string> texts(lines.size());
    std::vector<int64_t> counts(lines.size());
    run_lines(lines, request.in, "decoding", [&](size_t i) {
      const Ids ids = parse_ids(lines[i]);
      counts[i] = int64_t(ids.size());
      texts[i] = nlohmann::json(tokenizer.decode(ids)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    });
    for (size_t i = 0; i < texts.size(); ++i) {
      output.stream() << texts[i] << '\n';
      result.tokens += counts[i];
    }
  } else {
    for (size_t i = 0; i < lines.size(); ++i) check_text_line(lines[i], request.in, int(i + 1), "--in");
    refuse_lines_beyond_memory(lines, request.in);
    std::vector<Ids> all(lines.size());
    run_lines(lines, request.in, "tokenizing", [&](size_t i) { all[i] = tokenizer.encode(lines[i]); });
    if (tokenizer.batch_padding) pad_to_longest(all, *tokenizer.batch_padding);
    for (const auto& ids : all) {
      output.stream() << fmt::format("[{}]\n", fmt::join(ids, ", "));
      result.tokens += int64_t(ids.size());
    }
  }
  output.commit();
  return result;
}

}  // namespace spread
