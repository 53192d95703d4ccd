#pragma once
// The recipe's text, read once and split by position: the last `val_fraction` of it is the validation split.
#include <string>
#include <vector>

#include "spread/config/recipe.h"

namespace spread {

struct Corpus {
  std::string train;
  std::string val;
};

// data.source = "text": the files of data.path concatenated (a newline between files that lack one); a .jsonl file
// contributes its documents (see load_documents), one per line, not its JSON;
// data.source = "wordnet": one synset per line, in a fixed shuffled order. Throws UserError for unreadable or
// empty files and invalid UTF-8 is left to the tokenizer.
Corpus load_corpus(const DataConfig& data, const std::string& recipe_file);

// The same sources as single documents, for encoders (and probes): wordnet = one synset per document; a text file
// = its blank-line-separated paragraphs when it has blank lines, else its lines; a .jsonl file = one document per
// line from its "text" field ("title" prepended with a space when present, as BEIR corpora). Empty documents are
// dropped. The last val_fraction of the documents (in file order; wordnet's is already shuffled) is validation.
struct Documents {
  std::vector<std::string> train;
  std::vector<std::string> val;
};
Documents load_documents(const DataConfig& data, const std::string& recipe_file);

// The document of one JSONL line: its "text", with "title" and a space before it when the title is not empty.
// Throws UserError naming `file`, `line_no` and `key` when the line is not an object with a string "text".
std::string jsonl_document(const std::string& line, const std::string& file, int line_no, const std::string& key);

// Splits at the byte closest to (1 - val_fraction) * size that starts a UTF-8 character.
Corpus split_text(std::string text, double val_fraction);

}  // namespace spread
