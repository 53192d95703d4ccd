#pragma once
// Masked-language-model pretraining of an encoder (Devlin et al. 2019, BERT).
// Corruption: each maskable position (a real token that is not [PAD]/[CLS]/[SEP]/[MASK]) is chosen with
// probability mask_prob; a chosen token becomes [MASK] (80%), a uniformly random non-special token (10%) or stays
// (10%). A sequence with maskable positions but none chosen gets one chosen position, so no batch has an empty
// loss. Decisions come from a splitmix64 stream of `seed` (no LibTorch generator: resuming stays exact).
// Loss: L = mean over chosen positions of -log softmax(h_t W^T)[y_t], with W the tied input embedding and h_t the
// final (normed) hidden state; logits are computed for the chosen positions only.
#include <cstdint>
#include <functional>
#include <torch/types.h>

#include "spread/data/tokenizer.h"

namespace spread {

struct MlmBatch {
  torch::Tensor inputs;   // [B, T] int64: the corrupted ids the model reads
  torch::Tensor targets;  // [B, T] int64: the original id at chosen positions, -1 elsewhere
};

// ids, valid: [B, T] (int64, bool) on the CPU. Random replacements are drawn from [0, special.pad): the reserved
// ids sit after the base vocabulary (data/special_tokens.h).
MlmBatch mask_tokens(const torch::Tensor& ids, const torch::Tensor& valid, const SpecialIds& special, double mask_prob,
                     uint64_t seed);

// final_hidden [B, T, C], embedding [V, C], targets [B, T] (-1 = not chosen).
torch::Tensor mlm_loss(const torch::Tensor& final_hidden, const torch::Tensor& embedding, const torch::Tensor& targets);
// The same with the vocabulary logits of the chosen rows [N, C] -> [N, V] given by `logits` (a model's output
// head, e.g. BERT's transform and decoder bias); the projection runs on the chosen positions only.
torch::Tensor mlm_loss(const torch::Tensor& final_hidden, const torch::Tensor& targets,
                       const std::function<torch::Tensor(const torch::Tensor&)>& logits);

}  // namespace spread
