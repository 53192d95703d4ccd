#pragma once
// The user patterns of Split and Replace: a "Regex" compiled with ICU's regex engine, a "String" matched
// literally. The crate uses Oniguruma; the two agree on the syntax tokenizer.json files use (classes, \p{..},
// alternation, quantifiers, lookahead). Where they can differ: Oniguruma's Ruby syntax has \h (hex digit; ICU:
// horizontal space), \A/\z and (?m) meaning dot-all; possessive/atomic groups and \p{..} names outside Unicode's
// are accepted by one and not the other (an ICU compile error is a UserError naming the pattern).
// A match that backtracks without end (`(a+)+$` on "aaa...ab") stops after a bounded number of steps, as
// Oniguruma's retry limit stops the crate's: a UserError naming the file, the component and the pattern.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "normalized.h"

namespace spread::hf {

class Pattern {
 public:
  Pattern(const std::string& pattern, bool is_regex, const std::string& file, const std::string& key);
  ~Pattern();
  // The non-overlapping, non-empty matches in `s`, leftmost first, as byte ranges.
  std::vector<Range> find_all(std::string_view s) const;

 private:
  std::string literal_;
  std::string source_, file_, key_;  // for the error of a match that gives up
  struct Compiled;
  std::unique_ptr<Compiled> regex_;
};

}  // namespace spread::hf
