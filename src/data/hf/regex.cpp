// Pattern matching for Split and Replace (see regex.h). ICU runs on a UText over the UTF-8 text, so match
// positions come back as byte offsets with no UTF-16 copy.
#include "regex.h"

#include <unicode/regex.h>
#include <unicode/utext.h>

#include "spread/util/error.h"

namespace spread::hf {
namespace {

// ICU counts a match's time in steps of about 10,000 iterations of its engine: 1,000 steps are some 10 million
// iterations, Oniguruma's default retry limit (ONIG_DEFAULT_RETRY_LIMIT_IN_MATCH), and tens of milliseconds. A
// pattern of a real tokenizer.json needs a handful of steps per match.
constexpr int32_t kMatchStepLimit = 1000;

}  // namespace

struct Pattern::Compiled {
  std::unique_ptr<icu::RegexPattern> pattern;
};

Pattern::Pattern(const std::string& pattern, bool is_regex, const std::string& file, const std::string& key)
    : source_(pattern), file_(file), key_(key) {
  if (!is_regex) {
    literal_ = pattern;
    if (literal_.empty()) throw user_error(file, 0, key, "empty pattern");
    return;
  }
  UErrorCode status = U_ZERO_ERROR;
  UParseError parse{};
  regex_ = std::make_unique<Compiled>();
  regex_->pattern.reset(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(pattern), 0, parse, status));
  if (U_FAILURE(status))
    throw user_error(file, 0, key, "regex '" + pattern + "' does not compile with ICU (" + u_errorName(status) +
                                       " at offset " + std::to_string(parse.offset) + ")");
}

Pattern::~Pattern() = default;

std::vector<Range> Pattern::find_all(std::string_view s) const {
  std::vector<Range> out;
  if (!regex_) {
    size_t at = 0;
    while ((at = s.find(literal_, at)) != std::string_view::npos) {
      out.push_back({static_cast<uint32_t>(at), static_cast<uint32_t>(at + literal_.size())});
      at += literal_.size();
    }
    return out;
  }
  UErrorCode status = U_ZERO_ERROR;
  UText* text = utext_openUTF8(nullptr, s.data(), static_cast<int64_t>(s.size()), &status);
  std::unique_ptr<icu::RegexMatcher> m(regex_->pattern->matcher(status));
  m->reset(text);
  m->setTimeLimit(kMatchStepLimit, status);
  while (U_SUCCESS(status) && m->find(status)) {
    const int64_t b = m->start64(status), e = m->end64(status);
    if (e > b) out.push_back({static_cast<uint32_t>(b), static_cast<uint32_t>(e)});
  }
  m.reset();
  utext_close(text);
  if (status == U_REGEX_TIME_OUT || status == U_REGEX_STACK_OVERFLOW)
    throw user_error(file_, 0, key_, "regex '" + source_ + "' backtracks without end on a text of " +
                                         std::to_string(s.size()) + " bytes (stopped after " +
                                         std::to_string(kMatchStepLimit) + " ICU time steps)",
                     "the crate stops at Oniguruma's retry limit too: fix the pattern (e.g. (a+)+ is a+)");
  return out;
}

}  // namespace spread::hf
