#include "spread/data/wordnet.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "spread/util/error.h"
#include "spread/util/file.h"

namespace spread {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::string lemma_text(std::string word) {
  if (auto paren = word.find('('); paren != std::string::npos) word = word.substr(0, paren);  // "(a)", "(p)"
  std::replace(word.begin(), word.end(), '_', ' ');
  return word;
}

// "offset lex_filenum ss_type w_cnt(hex) word lex_id [word lex_id...] ... | gloss"
bool parse_synset_line(const std::string& line, WordnetSynset& out) {
  if (line.empty() || line[0] == ' ') return false;  // licence header lines start with two spaces
  auto bar = line.find(" | ");
  if (bar == std::string::npos) return false;
  std::istringstream head(line.substr(0, bar));
  std::string offset, lex_filenum, ss_type, w_cnt_hex;
  if (!(head >> offset >> lex_filenum >> ss_type >> w_cnt_hex)) return false;
  int w_cnt = std::stoi(w_cnt_hex, nullptr, 16);
  out.lemmas.clear();
  for (int i = 0; i < w_cnt; ++i) {
    std::string word, lex_id;
    if (!(head >> word >> lex_id)) return false;
    out.lemmas.push_back(lemma_text(word));
  }
  std::string gloss = trim(line.substr(bar + 3));
  // Definitions come first, then examples in double quotes, all separated by "; ".
  auto quote = gloss.find('"');
  out.definition = trim(gloss.substr(0, quote));
  while (!out.definition.empty() && out.definition.back() == ';') out.definition = trim(out.definition.substr(0, out.definition.size() - 1));
  out.examples.clear();
  while (quote != std::string::npos) {
    auto close = gloss.find('"', quote + 1);
    if (close == std::string::npos) break;
    out.examples.push_back(gloss.substr(quote + 1, close - quote - 1));
    quote = gloss.find('"', close + 1);
  }
  return true;
}

}  // namespace

std::vector<WordnetSynset> load_wordnet(const std::string& dir) {
  // Only the default folder missing means WordNet is not installed; a folder the recipe names is the user's path.
  const bool default_dir = dir == kWordnetDir;
  if (std::error_code ec; !default_dir && !std::filesystem::exists(dir, ec))
    throw user_error(dir, 0, "data.path", "does not exist",
                     "name the folder that holds WordNet's data.noun, data.verb, ... (or leave data.path empty for " +
                         std::string(kWordnetDir) + ")");
  std::vector<WordnetSynset> synsets;
  for (const char* pos : {"noun", "verb", "adj", "adv"}) {
    auto path = std::filesystem::path(dir) / (std::string("data.") + pos);
    std::ifstream in = open_input_file(path.string(), std::ios::in);
    if (!in && default_dir)
      throw user_error(path.string(), 0, "data.source", "WordNet is not installed",
                       "apt-get install wordnet-base, or use data.source = \"text\" with your own files");
    if (!in)
      throw user_error(path.string(), 0, "data.path", "cannot read this WordNet file",
                       "name a folder that holds WordNet's data.noun, data.verb, data.adj and data.adv");
    std::string line;
    WordnetSynset s;
    while (std::getline(in, line))
      if (parse_synset_line(line, s)) synsets.push_back(s);
  }
  return synsets;
}

std::vector<std::string> load_wordnet_texts(size_t max_texts, uint64_t seed) {
  std::vector<std::string> texts;
  for (const auto& s : load_wordnet()) {
    std::string text;
    for (size_t i = 0; i < s.lemmas.size(); ++i) text += (i ? ", " : "") + s.lemmas[i];
    text += ": " + s.definition;
    for (const auto& e : s.examples) text += "; \"" + e + "\"";
    texts.push_back(std::move(text));
  }
  std::mt19937_64 rng(seed ^ 0x5eed5eedULL);
  std::shuffle(texts.begin(), texts.end(), rng);
  if (max_texts > 0 && texts.size() > max_texts) texts.resize(max_texts);
  return texts;
}

}  // namespace spread
