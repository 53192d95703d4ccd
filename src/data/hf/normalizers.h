#pragma once
// Normalizers (tokenizers/src/normalizers/): BertNormalizer, NFC, NFD, NFKC, NFKD, Lowercase, StripAccents,
// Strip, Replace, Prepend, Sequence, chosen by the "type" of tokenizer.json's "normalizer".
#include <memory>

#include "json_fields.h"
#include "normalized.h"

namespace spread::hf {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(Normalized& n) const = 0;
};

// nullptr for a JSON null.
std::unique_ptr<Normalizer> make_normalizer(const Json& j, const Where& w);

}  // namespace spread::hf
