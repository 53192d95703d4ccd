#pragma once
// The memory a training run will need, estimated from its recipe before anything is allocated, so that a shape
// the machine cannot hold is refused with exit code 2 instead of being killed by the kernel minutes later.
//
// Peak = runtime + data + states + max(activations, checkpoint), per rank, in bytes (float32 everywhere):
//   states       P parameters: weights, gradients and AdamW's two moments, 16 P (flat buffers, train/optimizer.h)
//   checkpoint   saving copies the weights and serialises weights and moments twice (archive and file): 28 P
//   activations  one micro-step's graph over N tokens of width C, L layers, vocabulary V:
//                  L N C (14 with model.recompute, 18 without; +3 with dropout; +4 with bf16 copies)
//                  + 8 N C (the backward pass's live gradients and the final norm)
//                  + 3 N V (logits, their log-softmax and its gradient; lm and mlm only)
//                  + L B H T^2 without recompute off the fused CPU attention (the probabilities)
//                N per objective: lm B T; mlm B L_text; contrastive B (2 + negatives) L_text, or one chunk of
//                loss.contrastive.mini_batch texts in the cached mode; maxsim B q_len + B (1 + negatives) d_len,
//                plus its [B, B (1 + negatives), q_len, d_len] score tensor (x3, again for the pooled scores);
//                negatives from data.columns or the pair file's header, every text taken at its full length
//   data         6 bytes per byte of the data files (text, its ids, the token files being written)
//   runtime      LibTorch, BLAS and the thread pools: 400 MiB; 300 MiB more in a CUDA build (its libraries)
// Tested against the peak RSS of real runs of every objective (tests/test_reliability_system.cpp): measured on a
// 2-core VM, the estimate was 1.29-1.49x the peak of runs of 1.6-3.2M parameters and 200-540 MB of activations
// (whose runtime was 172 MiB); the test holds it between 1x and 2x.
#include <cstdint>
#include <string>

#include "spread/config/recipe.h"
#include "spread/runtime/memory.h"

namespace spread {

struct MemoryEstimate {
  int64_t parameters = 0;
  double runtime = 0, data = 0, states = 0, activations = 0, checkpoint = 0;  // bytes
  double peak() const;
  // What to change to need less, for the message of a refusal: "lower model.n_embd or model.n_layer".
  std::string keys_to_change;
};

// `vocab_size`: the tokenizer's, or estimated_vocab_size before it exists; `world`: the ranks of the run (the
// all-gathered negatives of loss.*.gather).
MemoryEstimate estimate_training_memory(const Recipe& recipe, int64_t vocab_size, int64_t world = 1);

// The model's vocabulary as the recipe gives it: tokenizer.vocab_size (+ the six reserved ids of encoders), or 256
// for a char tokenizer, whose size is known only after reading the data (it matters little beside the width).
int64_t estimated_vocab_size(const Recipe& recipe);

// UserError (exit code 2) when `ranks_on_host` ranks of this recipe need more than available_memory(): the
// estimate, the memory available and the keys to change. SPREAD_MEMORY_CHECK=0 turns the check off (an estimate
// that is wrong for this machine, swap). Returns the estimate for the run header.
MemoryEstimate check_training_memory(const Recipe& recipe, int64_t vocab_size, int64_t world, int64_t ranks_on_host);

}  // namespace spread
