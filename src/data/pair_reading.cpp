// The pair sources' shared helpers (pair_reading.h).
#include "pair_reading.h"

#include <charconv>
#include <cmath>

#include "spread/data/tokenizer.h"
#include "spread/util/error.h"
#include "spread/util/file.h"

namespace spread::pair_reading {

// 1234567 -> "1,234,567"
std::string thousands(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n < 0 ? "-" : "") + out;
}

std::string count_of(int64_t n, const std::string& singular, const std::string& plural) {
  return thousands(n) + " " + (n == 1 ? singular : plural);
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

bool is_blank(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

std::optional<double> parse_number(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  double value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

// "" when `text` may be used as the text of `what`, else the problem.
std::string text_problem(const std::string& text, const std::string& what) {
  if (is_blank(text)) return what + " is empty";
  if (int64_t at = first_invalid_utf8(text); at >= 0)
    return "invalid UTF-8 in " + what + " (byte " + std::to_string(at) + " of the field)";
  if (size_t at = text.find('\0'); at != std::string::npos)  // text holds none (spread/data/text_check.h)
    return "a NUL byte in " + what + " (byte " + std::to_string(at) + " of the field)";
  return "";
}

std::string read_data_file(const std::string& path, const PairSourceSpec& spec) {
  auto text = read_whole_file(path);
  if (!text) throw user_error(spec.recipe_file, 0, "data.path", "cannot read '" + path + "'", "check the path");
  if (is_blank(*text)) throw user_error(spec.recipe_file, 0, "data.path", "'" + path + "' is empty");
  return *text;
}

SickColumns sick_columns(const std::vector<std::string>& header, const std::string& path, const std::string& recipe,
                         const std::string& key, bool need_label) {
  auto find = [&](const char* name) {
    auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end())
      throw user_error(recipe, 0, key,
                       "'" + path + "' has no column '" + name + "' (its columns: " + join(header, ", ") + ")",
                       "expected SICK.txt as released: tab-separated with a header row");
    return static_cast<size_t>(it - header.begin());
  };
  SickColumns c{};
  c.a = find("sentence_A");
  c.b = find("sentence_B");
  c.label = need_label ? find("entailment_label") : 0;
  c.ba = need_label ? find("entailment_BA") : 0;
  c.set = find("SemEval_set");
  c.count = header.size();
  return c;
}

}  // namespace spread::pair_reading
