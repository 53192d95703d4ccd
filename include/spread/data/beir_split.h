#pragma once
// A dev split carved from a BEIR folder's training queries, so that a fine-tune can be tuned and stopped on queries
// it never trains on while the folder's test split stays unseen. The folder written is a BEIR folder of its own:
// corpus.jsonl and queries.jsonl copied, qrels/train.tsv with the remaining queries' rows and qrels/dev.tsv with
// the dev queries' rows (each row as it was, in file order; no query in both).
// How the dev queries are drawn: the queries with a relevant document in the source qrels, in queries.jsonl order,
// are permuted by seeded_permutation(n, seed, kBeirSplitStream) (data/pairs.h: Fisher-Yates over std::mt19937_64,
// the same on every platform); the first round(dev_fraction * n) of the permutation are dev.
#include <cstdint>
#include <string>
#include <vector>

namespace spread {

inline constexpr uint64_t kBeirSplitStream = 0xbe125917;

struct BeirSplitRequest {
  std::string source;       // a BEIR folder
  std::string qrels;        // its qrels/<qrels>.tsv ("" = train.tsv when present, else the only one)
  std::string out;          // the folder written (made; an existing BEIR split folder is replaced file by file)
  double dev_fraction = 0.1;
  uint64_t seed = 1;
};

struct BeirSplitResult {
  std::vector<std::string> dev_queries, train_queries;  // ids, queries.jsonl order
  int64_t dev_rows = 0, train_rows = 0;                 // qrels rows written to each
};

// UserError for an unreadable or bad folder, a fraction outside (0, 1), or a split that leaves either side empty.
BeirSplitResult split_beir_queries(const BeirSplitRequest& request);

}  // namespace spread
