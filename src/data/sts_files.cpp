// The STS evaluation file (pairs.h load_sts_csv): an STS-B CSV, or SICK.txt's TEST rows.
#include <algorithm>
#include <string_view>

#include "pair_reading.h"
#include "spread/util/error.h"
#include "spread/util/file.h"

namespace spread {
using namespace pair_reading;

std::vector<StsPair> load_sts_csv(const std::string& path) {
  auto text = read_whole_file(path);
  if (!text) throw user_error(path, 0, "", "cannot read this STS file", "check the path");
  BadRows strict(/*strict=*/true, "", "");
  std::vector<StsPair> pairs;
  const std::string_view first_line = std::string_view(*text).substr(0, text->find('\n'));
  if (first_line.find('\t') != std::string_view::npos && first_line.find("sentence_A") != std::string_view::npos) {
    // SICK.txt: relatedness of the TEST rows.
    RowReader reader(*text, RowFormat::tsv);
    TextRow row;
    reader.next(row);
    const SickColumns col = sick_columns(row.fields, path, path, "", /*need_label=*/false);
    auto score_at = std::find(row.fields.begin(), row.fields.end(), "relatedness_score");
    if (score_at == row.fields.end())
      throw user_error(path, 0, "", "no column 'relatedness_score' in the header", "expected SICK.txt as released");
    const size_t score_col = static_cast<size_t>(score_at - row.fields.begin());
    while (reader.next(row)) {
      if (row.fields.size() != col.count) {
        strict.add(
            path, row.line,
            "row has " + std::to_string(row.fields.size()) + " fields, the header has " + std::to_string(col.count));
      }
      if (row.fields[col.set] != "TEST") continue;
      std::string problem = text_problem(row.fields[col.a], "sentence_A");
      if (problem.empty()) problem = text_problem(row.fields[col.b], "sentence_B");
      const auto score = parse_number(row.fields[score_col]);
      if (problem.empty() && !score) problem = "relatedness_score '" + row.fields[score_col] + "' is not a number";
      if (!problem.empty()) strict.add(path, row.line, problem);
      pairs.push_back({row.fields[col.a], row.fields[col.b], *score, int64_t(row.line)});
    }
  } else {
    for_each_sts_row(path, *text, strict, /*check_range=*/false,
                     [&](std::string a, std::string b, double score, int64_t line) {
      pairs.push_back({std::move(a), std::move(b), score, line});
    });
  }
  if (pairs.empty()) throw user_error(path, 0, "", "no sentence pairs in this STS file");
  if (pairs.size() < 2)
    throw user_error(path, 0, "", "holds one sentence pair; Spearman's correlation needs at least 2",
                     "give the whole STS file");
  return pairs;
}

}  // namespace spread
