#pragma once
// Debian's wordnet-base (/usr/share/wordnet) as a corpus: one line per synset, "lemma, lemma: gloss" where the
// gloss holds the definitions and the quoted example sentences. The default data of the quickstart.
#include <cstdint>
#include <string>
#include <vector>

namespace spread {

inline constexpr const char* kWordnetDir = "/usr/share/wordnet";

struct WordnetSynset {
  std::vector<std::string> lemmas;    // underscores replaced by spaces, adjective markers "(a)" removed
  std::string definition;             // the gloss before the first quoted example
  std::vector<std::string> examples;  // quoted example sentences, without quotes
};

// All synsets of data.{noun,verb,adj,adv} in file order. Throws UserError when wordnet-base is not installed.
std::vector<WordnetSynset> load_wordnet(const std::string& dir = kWordnetDir);

// One text per synset ("lemma, lemma: definition; \"example\""), shuffled with a fixed seed so that a split by
// position is a random split; `max_texts` = 0 means all.
std::vector<std::string> load_wordnet_texts(size_t max_texts = 0, uint64_t seed = 0);

}  // namespace spread
