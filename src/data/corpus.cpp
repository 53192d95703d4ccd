#include "spread/data/corpus.h"
#include "spread/data/text_check.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "spread/data/tokenizer.h"
#include "spread/data/wordnet.h"
#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_depth.h"

namespace spread {
namespace {

// Tokenizers read UTF-8 without NUL bytes only; checked here, where the file and line are still known.
std::string read_text_file(const std::string& path, const std::string& recipe_file) {
  if (std::error_code ec; std::filesystem::is_directory(path, ec))
    throw user_error(recipe_file, 0, "data.path", "'" + path + "' is a directory", "list the text files in it");
  auto bytes = read_whole_file(path);
  if (!bytes) throw user_error(recipe_file, 0, "data.path", "cannot read '" + path + "'", "check the path");
  std::string text = std::move(*bytes);
  if (text.empty()) throw user_error(recipe_file, 0, "data.path", "'" + path + "' is empty");
  check_text_file(text, path);
  return text;
}

std::string trim_copy(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void append_jsonl_documents(const std::string& path, const std::string& text, std::vector<std::string>& out) {
  std::istringstream lines(text);
  std::string line;
  for (int line_no = 1; std::getline(lines, line); ++line_no) {
    if (trim_copy(line).empty()) continue;
    std::string body = trim_copy(jsonl_document(line, path, line_no, "data.path"));
    if (!body.empty()) out.push_back(std::move(body));
  }
}

void append_text_documents(const std::string& text, std::vector<std::string>& out) {
  const bool paragraphs = text.find("\n\n") != std::string::npos || text.find("\n\r\n") != std::string::npos;
  std::istringstream lines(text);
  std::string line, current;
  while (std::getline(lines, line)) {
    if (!paragraphs) {
      if (!trim_copy(line).empty()) out.push_back(trim_copy(line));
    } else if (trim_copy(line).empty()) {
      if (!trim_copy(current).empty()) out.push_back(trim_copy(current));
      current.clear();
    } else {
      current += line + "\n";
    }
  }
  if (!trim_copy(current).empty()) out.push_back(trim_copy(current));
}

}  // namespace

std::string jsonl_document(const std::string& line, const std::string& file, int line_no, const std::string& key) {
  refuse_deep_json(line, file, line_no);
  nlohmann::json doc = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("text") || !doc["text"].is_string())
    throw user_error(file, line_no, key, "not a JSON object with a string field \"text\"",
                     "one {\"text\": ...} object per line (\"title\" optional)");
  std::string text = doc["text"].get<std::string>();
  if (text.find('\0') != std::string::npos)  // a \u0000 escape
    throw user_error(file, line_no, key, "a NUL character in \"text\"", "texts hold no NUL characters");
  if (doc.contains("title") && doc["title"].is_string() && !doc["title"].get<std::string>().empty())
    text = doc["title"].get<std::string>() + " " + text;
  return text;
}

Documents load_documents(const DataConfig& data, const std::string& recipe_file) {
  std::vector<std::string> docs;
  if (data.source == "wordnet") {
    docs = load_wordnet_texts();
  } else {
    for (const auto& path : data.path) {
      std::string text = read_text_file(path, recipe_file);
      if (ends_with(path, ".jsonl")) append_jsonl_documents(path, text, docs);
      else append_text_documents(text, docs);
    }
  }
  const auto n_val = size_t(std::ceil(double(docs.size()) * data.val_fraction));
  if (docs.size() < 2 || n_val >= docs.size())
    throw user_error(recipe_file, 0, "data.path", fmt::format("{} documents are too few to split", docs.size()),
                     "add more text or lower data.val_fraction");
  Documents out;
  out.val.assign(docs.end() - std::ptrdiff_t(n_val), docs.end());
  docs.resize(docs.size() - n_val);
  out.train = std::move(docs);
  return out;
}

Corpus split_text(std::string text, double val_fraction) {
  size_t cut = size_t(double(text.size()) * (1.0 - val_fraction));
  while (cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) ++cut;  // continuation byte
  Corpus c;
  c.val = text.substr(cut);
  text.resize(cut);
  c.train = std::move(text);
  return c;
}

Corpus load_corpus(const DataConfig& data, const std::string& recipe_file) {
  std::string text;
  if (data.source == "wordnet") {
    for (const auto& line : load_wordnet_texts()) text += line + "\n";
  } else {
    for (const auto& path : data.path) {
      if (ends_with(path, ".jsonl")) {
        std::vector<std::string> docs;
        append_jsonl_documents(path, read_text_file(path, recipe_file), docs);
        for (const auto& d : docs) text += d + "\n";
        continue;
      }
      text += read_text_file(path, recipe_file);
      if (text.back() != '\n') text += '\n';
    }
  }
  Corpus c = split_text(std::move(text), data.val_fraction);
  if (c.val.empty() || c.train.empty())
    throw user_error(recipe_file, 0, "data.val_fraction", "the corpus is too small to split", "add more text");
  return c;
}

}  // namespace spread
