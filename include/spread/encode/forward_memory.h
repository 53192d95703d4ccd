#pragma once
// The memory of one batched forward pass without gradients (encode, eval, diagnose, the trainer's evaluations), so
// that a --batch-size the machine cannot hold is refused with exit code 2 before the first batch, instead of an
// allocation failure or the kernel's OOM killer. Batches go longest first, so the first one is the largest.
//
// Bytes = 4 (float32) x B T x (8 C + 2 I + 3 H T + 3 V with logits), for B texts or windows of T tokens, width C,
// MLP width I, H heads, vocabulary V: inside one block the residual stream and its norm, the fused q/k/v, the
// attention's scores and probabilities of one layer, its output, the MLP's hidden layer before and after its
// activation; an LM's logits, their log-softmax and the loss's gather. Measured against the peak RSS of eval and
// encode (2 layers; C 256, H 4, T 128 and C 128, H 2, T 256; batches of 1024), the estimate is 1.15x and 1.5x the
// memory a batch adds (tests/test_reliability_system.cpp holds it between 1x and 2x).
#include <cstdint>

#include "spread/model/transformer.h"

namespace spread {

double forward_pass_bytes(const TransformerConfig& config, int64_t batch, int64_t length, bool logits);

// UserError when forward_pass_bytes is above available_memory() (runtime/memory.h): the estimate, the memory
// available, and the batch size that would fit. SPREAD_MEMORY_CHECK=0 skips it.
void check_forward_memory(const TransformerConfig& config, int64_t batch, int64_t length, bool logits);

}  // namespace spread
