#pragma once
// Reserved ids for encoders: [PAD], [CLS], [SEP], [MASK], and the late-interaction markers [Q] and [D] (ColBERT's
// query and document markers; models of other objectives never see them). They are appended after the base tokenizer's vocabulary
// (ids V..V+5 for a base of V ids), so the base's own ids and files stay exactly as they are (a sentencepiece
// .model stays a plain sentencepiece model) and encode() never produces them: a text that contains "[MASK]" is
// tokenised as text, it cannot inject a special token. tokenizer.json records them ("special_tokens"), and
// load_tokenizer() restores them. Runs made before [Q] and [D] existed list four and load with four.
//
// Characters outside a char vocabulary are left out of encoder texts (evaluation and `spread encode` read texts the
// tokenizer never saw; a char vocabulary has no unknown id), instead of failing as an LM's char tokenizer does.
//
// Which runs get them: tokenizers built for encoder objectives (mlm, contrastive); an LM's tokenizer has none, so
// LM runs train exactly as before. Texts for encoders are "[CLS] text [SEP]" when the tokenizer has them.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "spread/data/tokenizer.h"

namespace spread {

inline const std::vector<std::string> kSpecialTokenNames = {"[PAD]", "[CLS]", "[SEP]", "[MASK]", "[Q]", "[D]"};

// The base tokenizer with the first `count` reserved names appended (vocab_size() = base + count); count is 6 for
// tokenizers built now, 4 for those of older runs. Throws std::invalid_argument unless count is 4 or 6.
std::unique_ptr<Tokenizer> with_special_tokens(std::unique_ptr<Tokenizer> base, int count = 6);

// "[CLS] text [SEP]" (or the text's ids alone when the tokenizer has no special tokens), truncated to max_length
// ids in all; the [SEP] is kept when the text is cut.
// With a marker id >= 0 (special_ids().query or .document): "[CLS] marker text [SEP]", as ColBERT reads queries
// and documents.
std::vector<int32_t> encode_for_encoder(const Tokenizer& tokenizer, const std::string& text, int64_t max_length,
                                        int32_t marker = -1);

}  // namespace spread
