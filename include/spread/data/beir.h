#pragma once
// A retrieval dataset in BEIR's layout, for contrastive training (pairs.h, source "beir") and retrieval evaluation.
//   DIR/corpus.jsonl   {"_id", "title", "text", ...} per line; a document's text is title + " " + text (either
//                      alone when the other is empty)
//   DIR/queries.jsonl  {"_id", "text", ...} per line
//   DIR/qrels/NAME.tsv header "query-id corpus-id score", then one judgement per line; score > 0 is relevant
// Only the queries with at least one relevant document are kept (queries.jsonl usually holds every split's queries).
// "_id" may be a JSON string or integer. Bad lines: a line that is not a JSON object, a missing or non-string text,
// an empty document or query, a duplicate _id, a qrel row without 3 fields, with an unparsable score, or naming an
// unknown query or document.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace spread {

class BadRows;

struct BeirData {
  std::vector<std::string> corpus_ids, corpus_texts;   // file order
  std::vector<std::string> query_ids, query_texts;     // file order, only queries with a relevant document
  std::map<std::string, std::set<std::string>> qrels;  // query id -> relevant corpus ids
  std::string qrels_file;                              // the qrels file read
};

// `qrels_name`: qrels/<qrels_name>.tsv; empty = qrels/train.tsv when present, else the only .tsv in qrels/.
// Throws UserError for a missing file or folder, and for the first bad line.
BeirData load_beir(const std::string& dir, const std::string& qrels_name = "");
// The same, with bad lines going to `bad` (skipped and counted unless it is strict).
BeirData load_beir(const std::string& dir, const std::string& qrels_name, BadRows& bad);

// A qrels score field (blanks around it allowed), or nullopt when it is not a number (the header's "score").
std::optional<double> parse_qrels_score(std::string_view field);

}  // namespace spread
