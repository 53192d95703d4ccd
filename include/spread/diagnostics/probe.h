#pragma once
// Diagnostics of a training run, measured on a fixed probe batch (seeded windows of the val split) in eval mode
// under no_grad: per layer (0 = embeddings, i = block i) mean_cos (intra-sequence, self pairs excluded),
// batch_mean_cos (tokens of different sequences) and concentration = S(X)/||mu||^2, as arrays indexed by layer;
// mean_cos_final, the intra-sequence mean cosine after the final LayerNorm (the state the LM head and pooling
// see; docs/design.md §3.4); with `socm`, SOCM and its parts over all pairs of probe sequences of that final state.
#include <nlohmann/json.hpp>

#include "spread/config/recipe.h"
#include "spread/data/loader.h"
#include "spread/model/transformer.h"

namespace spread {

nlohmann::json probe_diagnostics(Transformer& model, const Batch& probe, const DiagnosticsConfig& config,
                                 uint64_t seed, const torch::Device& device);

// The same on single texts with a padding mask (encoders): ids, valid [B, T] (valid: true = real token). Padding
// never enters a statistic (SOCM is over each text's valid rows).
nlohmann::json probe_text_diagnostics(Transformer& model, const torch::Tensor& ids, const torch::Tensor& valid,
                                      const DiagnosticsConfig& config, uint64_t seed, const torch::Device& device);

}  // namespace spread
