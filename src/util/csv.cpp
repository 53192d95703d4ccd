// CSV and TSV row readers (see csv.h for the dialects). The CSV reader is a small state machine over the whole
// text, so quoted fields may span lines and line numbers stay those of the file.
#include "spread/util/csv.h"

#include <utility>

#include "spread/util/error.h"

namespace spread {
namespace {

std::string_view without_bom(std::string_view text) {
  if (text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  return text;
}

}  // namespace

LineReader::LineReader(std::string_view text) : text_(without_bom(text)) {}

bool LineReader::next(std::string_view& line, int64_t& line_number) {
  if (pos_ >= text_.size()) return false;
  const size_t end = text_.find('\n', pos_);
  line = text_.substr(pos_, end == std::string_view::npos ? std::string_view::npos : end - pos_);
  pos_ = end == std::string_view::npos ? text_.size() : end + 1;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  line_number = ++line_;
  return true;
}

RowReader::RowReader(std::string_view text, RowFormat format)
    : text_(without_bom(text)), format_(format), lines_(text_) {}

bool RowReader::next(TextRow& row) {
  row.fields.clear();
  row.error.clear();
  return format_ == RowFormat::csv ? next_csv(row) : next_tsv(row);
}

bool RowReader::next_tsv(TextRow& row) {
  std::string_view line;
  while (lines_.next(line, row.line)) {
    if (line.empty()) continue;
    size_t start = 0;
    while (true) {
      const size_t tab = line.find('\t', start);
      row.fields.emplace_back(line.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start));
      if (tab == std::string_view::npos) break;
      start = tab + 1;
    }
    return true;
  }
  return false;
}

bool RowReader::next_csv(TextRow& row) {
  const size_t n = text_.size();
  // Blank lines are no rows.
  while (pos_ < n && (text_[pos_] == '\n' || (text_[pos_] == '\r' && (pos_ + 1 == n || text_[pos_ + 1] == '\n')))) {
    if (text_[pos_] == '\n') ++line_;
    ++pos_;
  }
  if (pos_ >= n) return false;
  row.line = line_;

  // One field per iteration; returns at the end of the record.
  while (true) {
    if (pos_ >= n) {  // the record ended with ',' at the end of the text
      row.fields.emplace_back();
      return true;
    }
    if (text_[pos_] != '"') {
      const size_t stop = text_.find_first_of(",\n", pos_);
      std::string_view field =
          text_.substr(pos_, stop == std::string_view::npos ? std::string_view::npos : stop - pos_);
      if (stop == std::string_view::npos || text_[stop] == '\n') {
        if (!field.empty() && field.back() == '\r') field.remove_suffix(1);
        row.fields.emplace_back(field);
        pos_ = stop == std::string_view::npos ? n : stop + 1;
        if (stop != std::string_view::npos) ++line_;
        return true;
      }
      row.fields.emplace_back(field);
      pos_ = stop + 1;
      continue;
    }

    // A quoted field: up to the next '"' that is not doubled.
    const int64_t opened = line_;
    std::string field;
    ++pos_;
    while (true) {
      if (pos_ >= n) {
        row.error = "quoted field " + std::to_string(row.fields.size() + 1) + " (opened on line " +
                    std::to_string(opened) + ") is never closed";
        return true;
      }
      const char c = text_[pos_];
      if (c == '"') {
        if (pos_ + 1 < n && text_[pos_ + 1] == '"') {
          field += '"';
          pos_ += 2;
          continue;
        }
        ++pos_;
        break;
      }
      if (c == '\n') ++line_;
      field += c;
      ++pos_;
    }
    row.fields.push_back(std::move(field));
    if (pos_ >= n) return true;
    if (text_[pos_] == ',') {
      ++pos_;
      continue;
    }
    if (text_[pos_] == '\n' || (text_[pos_] == '\r' && pos_ + 1 < n && text_[pos_ + 1] == '\n')) {
      pos_ += text_[pos_] == '\n' ? 1 : 2;
      ++line_;
      return true;
    }
    // `"a"b`: RFC 4180 has no reading of it, so the rest of the line is one bad row.
    row.error = "text after the closing quote of field " + std::to_string(row.fields.size()) +
                " (a quote inside a quoted field must be doubled)";
    const size_t eol = text_.find('\n', pos_);
    pos_ = eol == std::string_view::npos ? n : eol + 1;
    if (eol != std::string_view::npos) ++line_;
    return true;
  }
}

std::vector<TextRow> read_rows(std::string_view text, RowFormat format) {
  std::vector<TextRow> rows;
  RowReader reader(text, format);
  TextRow row;
  while (reader.next(row)) rows.push_back(row);
  return rows;
}

BadRows::BadRows(bool strict, std::string key, std::string hint)
    : strict_(strict), key_(std::move(key)), hint_(std::move(hint)) {}

void BadRows::add(const std::string& file, int64_t line, const std::string& problem) {
  if (strict_) throw user_error(file, static_cast<int>(line), key_, problem, hint_);
  ++count_;
  if (messages_.size() < kKeptMessages)
    messages_.push_back(file + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": " + problem);
}

}  // namespace spread
