#pragma once
// What `spread eval` and `spread encode` do with a trained run, as library calls (the CLI only parses arguments).
#include <cstdint>
#include <string>
#include <nlohmann/json.hpp>

#include "spread/train/run.h"

namespace spread {

struct EmbeddingEvalRequest {
  std::string sts;           // STS CSV or SICK.txt ("" = none)
  std::string beir;          // BEIR folder ("" = none)
  std::string pooling;       // "" = the run's loss.contrastive.pooling
  int64_t batch_size = 64;   // texts per forward pass
};

// {"run", "step", "pooling", "sts": {"file", "pairs", "spearman"}, "beir": {"dir", "queries", "documents",
// "ndcg@10", "mrr@10", "recall@100"}}; progress lines go to stderr.
nlohmann::json evaluate_embeddings(LoadedRun& run, const EmbeddingEvalRequest& request);

// The result above as an aligned text table.
std::string format_embedding_eval(const nlohmann::json& result);

struct EncodeRequest {
  std::string in;    // .txt (one text per line) or .jsonl ("text", with "title" prepended when present)
  std::string out;   // .npy, float32 [texts, width]
  bool normalize = true;
  std::string pooling;
  int64_t batch_size = 64;
};

// Returns the number of texts written. Throws UserError for unreadable input or an empty file.
int64_t encode_file(LoadedRun& run, const EncodeRequest& request);

}  // namespace spread
