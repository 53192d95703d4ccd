#pragma once
// A Hugging Face tokenizer (data/hf/tokenizer.h) as a run's tokenizer: the recipe's [tokenizer] kind = "hf" with
// path = a tokenizer.json, vocab.txt, vocab.json (+ merges.txt) or a folder of them, so that LM and encoder runs
// train on a real vocabulary (GPT-2's, BERT's) instead of one trained on the run's text.
//   encode   the reference's encode(text, add_special_tokens = false).ids: spread frames encoder texts itself
//            (encode_for_encoder), so the post-processor's [CLS] ... [SEP] would come twice. The file's truncation
//            and padding settings are left out (they would cut an LM's training text at max_length tokens); its
//            added tokens stay, so a text that spells "[MASK]" gets the [MASK] id, as in the reference.
//   decode   the reference's decode(ids, skip_special_tokens = false), so generated special tokens stay visible.
//   vocab    vocab_size() with the added tokens.
//   special_ids()  the vocabulary's own [PAD] [CLS] [SEP] [MASK] (BERT's 0, 101, 102, 103) when it has all four,
//            none otherwise (encoder objectives then refuse the vocabulary instead of appending new ids, which the
//            HF file would not know). [Q] / [D] only where the run has markers: a Hugging Face vocabulary has no
//            late-interaction markers of its own, so they are added to it as PyLate adds its "[Q] " and "[D] "
//            prefixes (hf::add_tokens: new ids after the vocabulary's; the model gets a row for each), or name
//            entries it has (ColBERT used BERT's [unused0] and [unused1]).
//   entry_id the vocabulary's token_to_id (added tokens included).
// In a run directory: tokenizer.hf.json (the HF file exactly as read; the legacy layouts converted to it) beside
// spread's tokenizer.json {"kind": "hf", "vocab_size", "file": "tokenizer.hf.json", "source", and the markers as
// "query_marker" / "document_marker" when there are any, "lowercase": true when set}, so that resume,
// eval, generate and export need no access to the original path; it lists the added markers. Export writes
// tokenizer.hf.json as the folder's tokenizer.json, byte for byte.
#include <memory>
#include <string>

#include "spread/data/tokenizer.h"

namespace spread {

inline constexpr const char* kHfTokenizerFile = "tokenizer.hf.json";

struct HfRunOptions {
  std::string query, document;  // the tokens used as [Q] / [D] (added when the vocabulary has none); empty = none
  bool lowercase = false;       // each text through Python's str.lower() first (sentence-transformers'
                                // do_lower_case; recipe key tokenizer.lowercase)
};

// Loads `path` (any layout hf::Tokenizer::load reads) and adds the markers to it. UserError naming the file for
// anything it cannot read.
std::unique_ptr<Tokenizer> load_hf_run_tokenizer(const std::string& path, const HfRunOptions& options = {});

}  // namespace spread
