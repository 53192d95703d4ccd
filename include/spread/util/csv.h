#pragma once
// Row readers for delimited data files, and the bookkeeping of their bad rows.
//
// CSV (RFC 4180, as Excel and Python's csv module write it): fields are separated by ','. A field that starts
// with '"' is quoted: it runs to the next '"' that is not doubled, may hold ',', '\n' and '\r', and "" inside it
// stands for one '"'. A '"' inside an unquoted field is an ordinary character (Excel reads `5" pipe` so).
// A record ends at "\n" or "\r\n" outside quotes, so a quoted field may span lines; a row's line number is the
// line where it starts. Malformed rows are reported, never guessed at: text between a closing quote and the next
// ',' (`"a"b`) makes the rest of that line one bad row; a quote still open at the end of the text makes the rest of
// the text one bad row.
//
// TSV (as BEIR, SICK and most tools write it, no quoting): one row per line, fields split on '\t', one trailing
// '\r' of each line removed (CRLF files), '"' an ordinary character.
//
// Both: a UTF-8 byte order mark at the start is skipped, blank lines are skipped (they are no rows), the last
// line needs no newline. Bytes are passed through unchecked: callers check UTF-8 on the fields they use.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spread {

// The lines of a text, '\n' separated, each without its '\n' and one trailing '\r'; blank lines included, a UTF-8
// byte order mark at the start skipped. (TSV rows and JSONL files are read with it.)
class LineReader {
 public:
  explicit LineReader(std::string_view text);  // `text` must outlive the reader
  // The next line and its 1-based number; false at the end of the text.
  bool next(std::string_view& line, int64_t& line_number);

 private:
  std::string_view text_;
  size_t pos_ = 0;
  int64_t line_ = 0;
};

struct TextRow {
  std::vector<std::string> fields;
  int64_t line = 0;   // 1-based line where the row starts
  std::string error;  // empty for a well-formed row; else what is wrong with it (and `fields` is incomplete)
};

enum class RowFormat { csv, tsv };

class RowReader {
 public:
  RowReader(std::string_view text, RowFormat format);  // `text` must outlive the reader
  // The next non-blank row; false at the end of the text.
  bool next(TextRow& row);

 private:
  bool next_csv(TextRow& row);
  bool next_tsv(TextRow& row);

  std::string_view text_;
  RowFormat format_;
  size_t pos_ = 0;
  int64_t line_ = 1;  // line number at pos_
  LineReader lines_;  // for tsv
};

// All rows of `text` (convenience for small files; RowReader streams).
std::vector<TextRow> read_rows(std::string_view text, RowFormat format);

// Counts the bad rows of a load. Strict: the first one is a UserError "FILE:LINE: key 'KEY': PROBLEM (HINT)".
// Otherwise each is counted and the first kKeptMessages are kept as "FILE:LINE: PROBLEM".
class BadRows {
 public:
  static constexpr size_t kKeptMessages = 5;

  BadRows(bool strict, std::string key, std::string hint);
  void add(const std::string& file, int64_t line, const std::string& problem);
  int64_t count() const { return count_; }
  const std::vector<std::string>& messages() const { return messages_; }

 private:
  bool strict_;
  std::string key_, hint_;
  int64_t count_ = 0;
  std::vector<std::string> messages_;
};

}  // namespace spread
