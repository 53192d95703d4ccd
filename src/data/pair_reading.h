#pragma once
// What the pair sources share (private to src/data): the loaders of pairs.cpp's sources, each in its file
// (pair_files.cpp: TSV / CSV / JSONL files of pairs; pair_sources.cpp: wordnet_pairs, stsb, sick, beir), the STS
// row reader that the stsb source and the STS evaluation file (sts_files.cpp) share, and the message helpers.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "spread/data/pairs.h"
#include "spread/util/csv.h"

namespace spread::pair_reading {

// What a source produced, before the split.
struct Loaded {
  std::vector<PairExample> examples;
  std::string what;  // e.g. "stsb: 1,406 pairs (score >= 4) of 5,749 rows"
};

Loaded load_pair_files(const PairSourceSpec& spec, BadRows& bad);
Loaded load_wordnet_pairs(const PairSourceSpec& spec);
Loaded load_stsb(const PairSourceSpec& spec, BadRows& bad);
Loaded load_sick(const PairSourceSpec& spec, BadRows& bad);
Loaded load_beir_pairs(const PairSourceSpec& spec, BadRows& bad);

// 1234567 -> "1,234,567"
std::string thousands(int64_t n);
// "1 pair", "1,406 pairs"
std::string count_of(int64_t n, const std::string& singular, const std::string& plural);
std::string join(const std::vector<std::string>& parts, const std::string& sep);
bool is_blank(std::string_view s);
// A finite number, blanks around it allowed; nullopt for anything else.
std::optional<double> parse_number(std::string_view s);
// "" when `text` may be used as the text of `what`, else the problem.
std::string text_problem(const std::string& text, const std::string& what);
// The whole file, refused when unreadable or blank (keys data.path of spec's recipe).
std::string read_data_file(const std::string& path, const PairSourceSpec& spec);

// SICK.txt's columns.
struct SickColumns {
  size_t a, b, label, ba, set, count;
};
SickColumns sick_columns(const std::vector<std::string>& header, const std::string& path, const std::string& recipe,
                         const std::string& key, bool need_label);

// STS-B rows (sentence1, sentence2, score) of a CSV file; a first row whose score is not a number is a header.
// Calls fn(a, b, score, line) per good row.
template <typename Fn>
void for_each_sts_row(const std::string& path, const std::string& text, BadRows& bad, bool check_range, Fn&& fn) {
  RowReader reader(text, RowFormat::csv);
  TextRow row;
  bool first = true;
  while (reader.next(row)) {
    const bool header = first && row.error.empty() && row.fields.size() == 3 && !parse_number(row.fields[2]);
    first = false;
    if (header) continue;
    if (!row.error.empty()) {
      bad.add(path, row.line, row.error);
      continue;
    }
    if (row.fields.size() != 3) {
      bad.add(path, row.line,
              "row has " + std::to_string(row.fields.size()) + " fields, expected 3 (sentence1, sentence2, score)");
      continue;
    }
    std::string problem = text_problem(row.fields[0], "sentence1");
    if (problem.empty()) problem = text_problem(row.fields[1], "sentence2");
    const auto score = parse_number(row.fields[2]);
    if (problem.empty() && !score) problem = "score '" + row.fields[2] + "' is not a number";
    if (problem.empty() && check_range && (*score < 0 || *score > 5))
      problem = "score " + row.fields[2] + " is outside [0, 5]";
    if (!problem.empty()) {
      bad.add(path, row.line, problem);
      continue;
    }
    fn(std::move(row.fields[0]), std::move(row.fields[1]), *score, row.line);
  }
}

}  // namespace spread::pair_reading
