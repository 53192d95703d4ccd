#include "spread/data/text_check.h"

#include <algorithm>
#include <fmt/format.h>

#include "spread/data/tokenizer.h"
#include "spread/util/error.h"

namespace spread {
namespace {

// The first NUL byte or invalid UTF-8 sequence of `text`; offset -1 when there is none.
struct BadTextByte {
  int64_t offset = -1;
  bool nul = false;
  std::string problem() const {
    return fmt::format("{} at byte offset {}", nul ? "a NUL byte" : "invalid UTF-8", offset);
  }
};

BadTextByte first_bad_text_byte(const std::string& text) {
  const int64_t invalid = first_invalid_utf8(text);
  const size_t nul = text.find('\0');
  if (nul != std::string::npos && (invalid < 0 || int64_t(nul) < invalid)) return {int64_t(nul), true};
  return {invalid, false};
}

std::string hint(const BadTextByte& bad) {
  return bad.nul ? "text holds no NUL bytes: is it a binary or UTF-16 file? save it as UTF-8"
                 : "re-encode the file as UTF-8";
}

}  // namespace

void check_text_file(const std::string& text, const std::string& file, const std::string& key) {
  const BadTextByte bad = first_bad_text_byte(text);
  if (bad.offset < 0) return;
  const auto line = int(1 + std::count(text.begin(), text.begin() + bad.offset, '\n'));
  throw user_error(file, line, key, bad.problem() + " of the file", hint(bad));
}

void check_text_line(const std::string& line, const std::string& file, int line_no, const std::string& key) {
  const BadTextByte bad = first_bad_text_byte(line);
  if (bad.offset < 0) return;
  throw user_error(file, line_no, key, bad.problem() + " of the line", hint(bad));
}

void check_option_text(const std::string& text, const std::string& option) {
  const BadTextByte bad = first_bad_text_byte(text);
  if (bad.offset < 0) return;
  throw UserError(fmt::format("{}: {} of its text (pass UTF-8 text: the shell's locale, or a file's bytes given as "
                              "an argument, may not be)",
                              option, bad.problem()));
}

}  // namespace spread
