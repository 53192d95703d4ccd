#pragma once
// Post-processors (tokenizers/src/processors/): TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel,
// Sequence, chosen by the "type" of tokenizer.json's "post_processor". They take the encoded sequence (and pair)
// and give the pieces of the final encoding, in order, which the tokenizer concatenates.
#include <memory>
#include <vector>

#include "json_fields.h"
#include "spread/data/hf/tokenizer.h"

namespace spread::hf {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // How many tokens process() adds (truncation leaves room for them).
  virtual size_t added_tokens(bool is_pair) const = 0;
  virtual void process(std::vector<Encoding>& pieces, bool add_special_tokens) const = 0;
};

std::unique_ptr<PostProcessor> make_post_processor(const Json& j, const Where& w);

// One token the post-processor adds: offsets (0, 0), special.
Encoding special_encoding(const std::vector<int32_t>& ids, const std::vector<std::string>& tokens, int32_t type_id);
void append(Encoding& to, const Encoding& from);
void set_type_ids(Encoding& e, int32_t type_id);

}  // namespace spread::hf
