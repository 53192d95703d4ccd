#pragma once
// Multi-vector (late-interaction) encoding (docs/design.md §6.1): queries read as "[CLS] [Q] text [SEP]", documents as
// "[CLS] [D] text [SEP]", each token a unit vector of the model's head (TransformerImpl::token_vectors). Shared by
// the maxsim training task, retrieval (eval/multi_vector_retrieval.h), `spread calibrate` and export.
//
// Query expansion (ColBERT, PyLate's default): a query is padded to query_length with [MASK] ids that no token
// attends to (attention sees the real tokens only) but that score like real tokens; without it queries are padded
// with [PAD] and only real tokens score. Skiplist (PyLate's, off by default): document tokens whose text is
// punctuation only are attended to but take no part in MaxSim.
#include <functional>
#include <string>
#include <vector>
#include <torch/types.h>

#include "spread/data/tokenizer.h"
#include "spread/model/transformer.h"
#include "spread/pooling/ward.h"

namespace spread {

struct MultiVectorSpec {
  int64_t query_length = 32;      // tokens, markers included
  int64_t document_length = 180;  // tokens, markers included
  bool query_expansion = true;
  std::vector<bool> skip;         // by token id: excluded from documents' vectors (empty = none)
  int64_t batch_size = 32;
  torch::Device device{torch::kCPU};
};

// Ids of the base vocabulary whose decoded text is non-empty punctuation only (ASCII ispunct, spaces ignored).
std::vector<bool> punctuation_ids(const Tokenizer& tokenizer);

// Token ids of one query / document. UserError when the tokenizer has no [Q] / [D] (a run made before they existed).
std::vector<int32_t> query_tokens(const Tokenizer& tokenizer, const std::string& text, const MultiVectorSpec& spec);
std::vector<int32_t> document_tokens(const Tokenizer& tokenizer, const std::string& text, const MultiVectorSpec& spec);

// A padded batch: ids and attention (key padding) as the encoder reads them, and which positions score.
struct TokenBatch {
  torch::Tensor ids;     // [B, T] int64
  torch::Tensor attend;  // [B, T] bool
  torch::Tensor score;   // [B, T] bool
};
TokenBatch query_batch(const std::vector<const std::vector<int32_t>*>& seqs, const SpecialIds& special,
                       const MultiVectorSpec& spec);
TokenBatch document_batch(const std::vector<const std::vector<int32_t>*>& seqs, const SpecialIds& special,
                          const MultiVectorSpec& spec);

// [B, T, head_dim] unit token vectors of one batch, in the model's current mode, with autograd as the caller has it.
torch::Tensor encode_tokens(Transformer& model, const TokenBatch& batch);

// Queries' vectors [N, query_length, head_dim] (float32, CPU) and scoring masks [N, query_length], every batch
// padded to query_length; in eval mode, the caller holding no_grad.
std::pair<torch::Tensor, torch::Tensor> encode_queries(Transformer& model, const Tokenizer& tokenizer,
                                                       const std::vector<std::string>& texts,
                                                       const MultiVectorSpec& spec);

// The scoring vectors of each document ([n_i, head_dim] float64, CPU, in token order), eval mode, no gradients,
// batched longest first. `progress(done, total)` after each batch.
std::vector<RowMatrixXd> encode_documents(Transformer& model, const Tokenizer& tokenizer,
                                          const std::vector<std::string>& texts, const MultiVectorSpec& spec,
                                          const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace spread
