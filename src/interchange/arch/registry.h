#pragma once
// The architecture files' entries for the table (registry.cpp), and the two shape tests others need: a model that
// is exactly a Llama or a ModernBERT is written in that layout, not GPT-2's or MegatronBert's.
#include "spread/interchange/architecture.h"

namespace spread::arch {

Architecture bert_architecture();
Architecture megatron_bert_architecture();
Architecture distilbert_architecture();
Architecture roberta_architecture();
Architecture gpt2_architecture();
Architecture llama_architecture();
Architecture modernbert_architecture();

bool is_llama_shaped(const TransformerConfig& cfg);       // arch/llama.cpp
bool is_modernbert_shaped(const TransformerConfig& cfg);  // arch/modernbert.cpp

}  // namespace spread::arch
