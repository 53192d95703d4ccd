#pragma once
// tokenizer.json in Hugging Face tokenizers' format for a run's tokenizer, so that the exported folder tokenises
// as spread does without spread:
//   bpe (sentencepiece)  a BPE model over the sentencepiece pieces with byte fallback, its merges derived from the
//                        pieces as transformers' SentencePieceExtractor does (every split of a piece into two
//                        pieces, ranked by the merged piece's id, i.e. its score), the Replace(" " -> "\u2581")
//                        normalizer that reproduces spread's settings (identity normalisation, no dummy prefix,
//                        whitespace kept) and the Replace / ByteFallback / Fuse decoder
//   char                 a BPE model without merges over the code points (one id per character)
//   unigram (sentencepiece)  a Unigram model with byte fallback over the pieces and their scores (control, byte
//                        and unknown pieces unreachable from text, as in sentencepiece, except a name spelled with a
//                        character never seen in training), the same normalizer and decoder
//   hf                   the run's tokenizer.hf.json, byte for byte (data/hf_run_tokenizer.h)
// Encoder runs list their reserved ids as special added tokens ([PAD] [CLS] [SEP] [MASK], and [Q] [D] where the
// tokenizer has them, so that PyLate's convert_tokens_to_ids("[Q]") finds spread's marker) and frame texts as
// "[CLS] text [SEP]" with a TemplateProcessing post processor, as encode_for_encoder does (encode with
// add_special_tokens = false for the bare ids). Sentencepiece's <unk> <s> </s> stay ordinary vocabulary entries:
// as in spread, text that spells them is tokenised as text.
#include <optional>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "spread/data/tokenizer.h"

namespace spread {

struct SentencePieceEntry {
  std::string piece;
  float score = 0;
  int type = 1;  // sentencepiece's ModelProto.SentencePiece.Type: 1 normal, 2 unknown, 3 control, 4 user, 6 byte
};

// The pieces of a sentencepiece .model (a ModelProto: field 1 = repeated SentencePiece {1 piece, 2 score,
// 3 type}), read from the protobuf wire format. UserError naming `source` for a malformed file.
std::vector<SentencePieceEntry> read_sentencepiece_pieces(const std::string& model_bytes, const std::string& source);

// tokenizer.json for the tokenizer saved in run_dir, or nullopt for a kind that has none.
std::optional<nlohmann::json> hf_tokenizer_json(const std::string& run_dir, const Tokenizer& tokenizer);

// The bytes of a kind hf run's tokenizer.hf.json, which export writes as the folder's tokenizer.json.
std::string hf_tokenizer_bytes(const std::string& run_dir);

// tokenizer_config.json (PreTrainedTokenizerFast and its special tokens; [Q] [D] as additional_special_tokens).
nlohmann::json hf_tokenizer_config(const Tokenizer& tokenizer, int64_t max_length);

}  // namespace spread
