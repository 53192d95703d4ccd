#pragma once
// Text embeddings of an encoder: token ids -> padded batch -> transformer -> the final (normed) hidden states ->
// pooling (pooling/pooling.h). Shared by training tasks, evaluation (STS, retrieval) and `spread encode`.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>
#include <torch/types.h>

#include "spread/data/tokenizer.h"
#include "spread/model/transformer.h"
#include "spread/pooling/pooling.h"

namespace spread {

struct TextBatch {
  torch::Tensor ids;   // [B, T] int64, right-padded to the longest sequence
  torch::Tensor mask;  // [B, T] bool, true = a real token
};

// Right-pads `seqs` (each non-empty) with pad_id (0 when the tokenizer has no [PAD]: masked anyway).
TextBatch pad_batch(const std::vector<const std::vector<int32_t>*>& seqs, int32_t pad_id, const torch::Device& device);

// Pooled embeddings [B, C] of one batch in the model's current mode, with autograd as the caller has it.
// pool_skip > 0 leaves each text's first pool_skip positions out of the pooling (they still reach the model):
// sentence-transformers' include_prompt = false, where [CLS] and the prompt's tokens are not pooled.
torch::Tensor embed_batch(Transformer& model, const TextBatch& batch, Pooling pooling, int64_t pool_skip = 0);

// Embeddings [N, C] (float32, CPU, not normalised) of many texts in eval mode under no_grad: tokenised as
// "[CLS] text [SEP]" up to max_length, batched by length so little padding is computed, returned in input order.
// `progress(done, total)` is called after each batch when given.
torch::Tensor embed_texts(Transformer& model, const Tokenizer& tokenizer, const std::vector<std::string>& texts,
                          int64_t max_length, Pooling pooling, int64_t batch_size, const torch::Device& device,
                          const std::function<void(int64_t, int64_t)>& progress = {}, int64_t pool_skip = 0);

// Tokenised texts, each one sequence of encode_for_encoder (never empty: an empty text keeps one [PAD] position,
// so that every input has an embedding).
std::vector<std::vector<int32_t>> tokenize_texts(const Tokenizer& tokenizer, const std::vector<std::string>& texts,
                                                 int64_t max_length);

// The same from already tokenised sequences.
torch::Tensor embed_sequences(Transformer& model, const std::vector<std::vector<int32_t>>& seqs, int32_t pad_id,
                              Pooling pooling, int64_t batch_size, const torch::Device& device,
                              const std::function<void(int64_t, int64_t)>& progress = {}, int64_t pool_skip = 0);

}  // namespace spread
