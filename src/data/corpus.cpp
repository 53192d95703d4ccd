#include "spread/data/corpus.h"

#include <fstream>
#include <sstream>

#include "spread/data/wordnet.h"
#include "spread/util/error.h"
#include "spread/util/file.h"

namespace spread {
namespace {

std::string read_text_file(const std::string& path, const std::string& recipe_file) {
  auto bytes = read_whole_file(path);
  if (!bytes) throw user_error(recipe_file, 0, "data.path", "cannot read '" + path + "'", "check the path");
  std::string text = std::move(*bytes);
  if (text.empty()) throw user_error(recipe_file, 0, "data.path", "'" + path + "' is empty");
  return text;
}

}  // namespace

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
