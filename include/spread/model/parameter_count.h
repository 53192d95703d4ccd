#pragma once
// The size of a model, known before it is built.
#include "spread/model/transformer.h"

namespace spread {

// The number of values in every tensor Transformer(cfg) registers, counted without building it: what a model of
// this shape allocates (train/memory_estimate.h; a model folder's config.json checked against its weights). A
// double, so that sizes from a hostile file cannot overflow it.
double parameter_count(const TransformerConfig& cfg);

}  // namespace spread
