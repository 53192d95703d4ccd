#pragma once
// What `spread eval` and `spread encode` do with a trained run, as library calls (the CLI only parses arguments).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include <torch/types.h>

#include "spread/eval/encoder_eval.h"
#include "spread/eval/multiple_choice.h"
#include "spread/eval/perplexity.h"
#include "spread/interchange/loaded_run.h"

namespace spread {

// How `run` embeds texts: its length (data.max_length, else the block size), `pooling` ("" = the run's), batch
// size and device. UserError naming --pooling for an unknown pooling.
EncoderSpec spec_of(const LoadedRun& run, const std::string& pooling, int64_t batch_size);

// The texts of a .txt file (one a line) or a .jsonl file ("text", "title" prepended when present). UserError naming
// the file and `option` when it is unreadable, not UTF-8 or empty.
std::vector<std::string> read_input_texts(const std::string& path, const std::string& option = "--in");

// Embeddings [N, C] (float32, CPU) of `texts` as sentence-transformers' encode makes them: `prompt` prepended (and
// left out of the pooling when the folder's include_prompt is false), L2-normalised when `normalize` and the run
// has no sentence-transformers folder or one with a Normalize module. Progress lines name `what`.
torch::Tensor embed_with_prompt(LoadedRun& run, std::vector<std::string> texts, const EncoderSpec& spec,
                                const std::string& prompt, bool normalize, const std::string& what);

struct EmbeddingEvalRequest {
  std::string sts;           // STS CSV or SICK.txt ("" = none)
  std::string beir;          // BEIR folder ("" = none)
  std::string qrels;         // its qrels/<qrels>.tsv ("" = train.tsv when present, else the only one)
  std::string pooling;       // "" = the run's loss.contrastive.pooling
  int64_t batch_size = 64;   // texts per forward pass
  bool per_query = false;    // also each query's BEIR metrics
};

// {"run", "step", "pooling", "sts": {"file", "pairs", "spearman"}, "beir": {"dir", "queries", "documents",
// "ndcg@10", "mrr@10", "recall@100"}}; with per_query, "beir" also holds "per_query": {query id: {"ndcg@10",
// "mrr@10", "recall@100"}} (pytrec_eval's layout). Progress lines go to stderr.
nlohmann::json evaluate_embeddings(LoadedRun& run, const EmbeddingEvalRequest& request);

// The result above as an aligned text table.
std::string format_embedding_eval(const nlohmann::json& result);

// Late interaction (a maxsim run): retrieval with MaxSim over the token vectors, documents Ward-pooled at each
// factor (1 = unpooled; the run's loss.pooling_aware ward_distance and protected_tokens).
struct LateInteractionEvalRequest {
  std::string beir;                      // BEIR folder
  std::string qrels;                     // its split qrels/<qrels>.tsv ("" = train.tsv when present, else the only one)
  std::vector<double> pool_factors{1.0};
  int64_t batch_size = 32;
  bool per_query = false;  // also each query's metrics, per pool factor
};

// {"run", "step", "beir": {"dir", "qrels", "queries", "documents", "results": [{"pool_factor", "ndcg@10",
// "mrr@10", "recall@100", "vectors_per_doc", "kept"}, ...]}}; "kept" = nDCG@10 / the unpooled nDCG@10 (when pool
// factor 1 is among them); with per_query, each result also holds "per_query" as evaluate_embeddings writes it.
// Progress lines go to stderr.
nlohmann::json evaluate_late_interaction(LoadedRun& run, const LateInteractionEvalRequest& request);
std::string format_late_interaction_eval(const nlohmann::json& result);

// spread calibrate: the Ward distance threshold whose mean output count over the documents is target_tokens
// (pooling/ward.h, calibrate_ward_threshold), documents encoded by the run's model.
struct CalibrateRequest {
  std::string docs;          // .txt (one per line), .jsonl, or a BEIR folder (its corpus.jsonl)
  double target_tokens = 16;
  int64_t max_docs = 1000;   // the first this many documents
  int64_t batch_size = 32;
};
// {"run", "step", "documents", "target_tokens", "threshold", "achieved_mean", "unpooled_mean", "ward_distance",
// "protected_tokens"}
nlohmann::json calibrate_run(LoadedRun& run, const CalibrateRequest& request);

struct EncodeRequest {
  std::string in;    // .txt (one text per line) or .jsonl ("text", with "title" prepended when present)
  std::string out;   // .npy, float32 [texts, width]
  bool normalize = true;  // a sentence-transformers folder normalises only when it has a Normalize module
  std::string pooling;
  int64_t batch_size = 64;
  // A sentence-transformers folder's prompt, prepended to every text as the library does ("" = its
  // default_prompt_name, if any); prompt_text instead gives the text itself.
  std::string prompt_name;
  std::optional<std::string> prompt_text;
};

// The prompt `request` asks for on `run` ("" = none): UserError naming the prompt and the folder's prompts when
// it has no such prompt, or when a prompt is asked of a run (runs have none).
std::string encode_prompt(const LoadedRun& run, const EncodeRequest& request);

// An LM's loss, perplexity and bits per byte on a text file instead of the run's validation split (a model
// folder has none): the whole file tokenised as one text and cut into consecutive windows of block_size tokens,
// as evaluate_split cuts the split. UserError naming the file when it is unreadable, not UTF-8, or shorter than
// one window.
EvalResult evaluate_text_file(LoadedRun& run, const std::string& path, int64_t batch_size, int64_t max_batches);

// Zero-shot multiple-choice scores (eval/multiple_choice.h) of an LM run or folder on a choices file:
// {"run", "step", "choices": {"file", "items", "acc", "acc_norm"}}; with per_item, "choices" also holds "per_item":
// [{"loglik": [..], "tokens": [..], "label"}]. UserError naming the file for a bad file, and naming --choices for
// a run that is not a causal LM.
nlohmann::json evaluate_choices_file(LoadedRun& run, const std::vector<ChoiceItem>& items, const std::string& path,
                                     int64_t batch_size, bool per_item);
std::string format_choices_eval(const nlohmann::json& result);

// Returns the number of texts written. Throws UserError for unreadable input or an empty file.
int64_t encode_file(LoadedRun& run, const EncodeRequest& request);

}  // namespace spread
