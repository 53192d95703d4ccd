#pragma once
// The bytes of a user's text file, checked where its name and lines are still known: tokenizers read UTF-8, and
// text holds no NUL bytes. A NUL marks a binary or UTF-16 file (UTF-16 of ASCII is valid UTF-8 with a NUL after
// every letter, which would train silently on garbage), and it would end the text early in C strings.
#include <string>

namespace spread {

// Throws UserError "FILE:LINE: invalid UTF-8 at byte offset N of the file (HINT)", or "...: a NUL byte at byte
// offset N...", for the first bad byte of `text`, the contents of `file`; `key` names the recipe key or option that
// gave the file ("" for none).
void check_text_file(const std::string& text, const std::string& file, const std::string& key = "");

// The same for one line of such a file (line_no counted from 1): "FILE:LINE: ... at byte N of the line".
void check_text_line(const std::string& line, const std::string& file, int line_no, const std::string& key = "");

// The same for the text of a command-line option (`--prompt`): UserError "--prompt: invalid UTF-8 at byte offset N
// of its text (HINT)".
void check_option_text(const std::string& text, const std::string& option);

}  // namespace spread
