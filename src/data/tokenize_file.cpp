// spread tokenize as a library call (data/tokenize_file.h).
#include "spread/data/tokenize_file.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "spread/data/hf/tokenizer.h"
#include "spread/data/tokenizer.h"
#include "spread/log/progress.h"
#include "spread/util/error.h"
#include "spread/util/file.h"

namespace fs = std::filesystem;

namespace spread {
namespace {

using Ids = std::vector<int32_t>;

// One line's way in and out, whichever tokenizer is behind it.
struct LineTokenizer {
  std::function<Ids(const std::string&)> encode;
  std::function<std::string(const Ids&)> decode;
  std::string source;
};

// A spread run keeps its own description as tokenizer.json ({"kind", "vocab_size"}), where a Hugging Face folder
// keeps the tokenizer itself ({"model", ...}).
bool is_run_directory(const fs::path& path) {
  if (!fs::is_directory(path) || !fs::exists(path / "tokenizer.json")) return false;
  const auto bytes = read_whole_file((path / "tokenizer.json").string());
  if (!bytes) return false;
  const auto doc = nlohmann::json::parse(*bytes, nullptr, /*allow_exceptions=*/false);
  return doc.is_object() && doc.contains("kind") && !doc.contains("model");
}

LineTokenizer open_tokenizer(const TokenizeRequest& request) {
  if (!fs::exists(request.tokenizer))
    throw user_error(request.tokenizer, 0, "--tokenizer", "does not exist",
                     "give a tokenizer.json, vocab.txt, vocab.json, a folder holding one, or a spread run directory");
  if (is_run_directory(request.tokenizer)) {
    std::shared_ptr<const Tokenizer> t = load_tokenizer(request.tokenizer);
    return {[t](const std::string& text) { return t->encode(text); },
            [t](const Ids& ids) { return t->decode(ids); },
            fmt::format("run tokenizer ({}) of {}", t->kind(), request.tokenizer)};
  }
  std::shared_ptr<const hf::Tokenizer> t = hf::Tokenizer::load(request.tokenizer);
  const bool special = request.add_special_tokens;
  return {[t, special](const std::string& text) { return t->encode(text, special).ids; },
          [t, special](const Ids& ids) { return t->decode(ids, /*skip_special_tokens=*/!special); },
          "hf tokenizer " + request.tokenizer};
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

// "[101, 7592, 102]" of a line in decode mode; UserError (without the place, which the caller adds) otherwise.
Ids parse_ids(const std::string& line) {
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
    tmp_ = fmt::format("{}.tmp{}", path_, ::getpid());
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

constexpr int64_t kChunkLines = 8192;  // lines between progress updates and output writes

}  // namespace

TokenizeResult tokenize_file(const TokenizeRequest& request) {
  const auto lines = read_lines(request.in);
  AtomicOutput output(request.out);
  const LineTokenizer tokenizer = open_tokenizer(request);
  TokenizeResult result{int64_t(lines.size()), 0, tokenizer.source};
  CountProgress progress(request.decode ? "decoding" : "tokenizing", "lines");
  std::vector<std::string> out_lines;
  std::vector<int64_t> counts;
  for (int64_t chunk = 0; chunk < int64_t(lines.size()); chunk += kChunkLines) {
    const int64_t end = std::min<int64_t>(chunk + kChunkLines, int64_t(lines.size()));
    out_lines.assign(size_t(end - chunk), {});
    counts.assign(size_t(end - chunk), 0);
    FirstError error;
    at::parallel_for(chunk, end, 1, [&](int64_t begin, int64_t stop) {
      for (int64_t i = begin; i < stop; ++i) {
        const size_t k = size_t(i - chunk);
        try {
          if (request.decode) {
            const Ids ids = parse_ids(lines[size_t(i)]);
            counts[k] = int64_t(ids.size());
            out_lines[k] = nlohmann::json(tokenizer.decode(ids)).dump(-1, ' ', false,
                                                                        nlohmann::json::error_handler_t::replace);
          } else {
            const Ids ids = tokenizer.encode(lines[size_t(i)]);
            counts[k] = int64_t(ids.size());
            out_lines[k] = fmt::format("[{}]", fmt::join(ids, ", "));
          }
        } catch (const UserError& e) {
          error.record(i, e.what());
        }
      }
    });
    error.throw_if_any(request.in);
    for (size_t k = 0; k < out_lines.size(); ++k) {
      output.stream() << out_lines[k] << '\n';
      result.tokens += counts[k];
    }
    progress(end, int64_t(lines.size()));
  }
  output.commit();
  return result;
}

}  // namespace spread
