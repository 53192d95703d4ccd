#pragma once
// spread mine: hard negatives for (anchor, positive) pairs from a model's embeddings, written as a pairs file with
// columns anchor, positive, negative_1..negative_n that `data.source = "pairs"` trains on. The data is laid out as
// sentence-transformers' mine_hard_negatives lays it out, so that the same model and options give the same rows:
// - the corpus: the given documents in file order, then every positive not already among them (exact text);
// - the queries: the distinct anchors in first-seen order, each with its distinct positives (so a query's other
//   positives are never its negatives);
// - one output row per (query, positive), queries in that order, rows without a full set of negatives left out.
// Queries are embedded with the folder's "query" prompt and documents with its "document" prompt when it defines
// them (as encode_query / encode_document do), both L2-normalised.
#include <cstdint>
#include <string>
#include <nlohmann/json.hpp>

#include "spread/eval/hard_negatives.h"
#include "spread/interchange/loaded_run.h"

namespace spread {

struct MineRequest {
  std::string beir, qrels;  // a BEIR folder: the pairs of qrels/<qrels>.tsv ("" = train.tsv or the only one) and
                            // its corpus; or
  std::string pairs;        // a pairs file (.tsv .csv .jsonl with anchor and positive columns), and
  std::string corpus;       // optionally its documents (.txt, .jsonl or a BEIR folder); "" = the positives alone
  std::string out;          // the .jsonl written (atomically)
  HardNegativeOptions options;
  int64_t batch_size = 32;
};

// Mines and writes request.out. Returns {"queries", "pairs", "documents", "rows", "left_out", "range_max",
// "negative_score_mean", "positive_score_mean", "encode_seconds", "search_seconds"}. UserError for bad input.
nlohmann::json mine_to_file(LoadedRun& run, const MineRequest& request);

}  // namespace spread
