// Source "pairs": TSV / CSV files with a header row and JSONL files of (anchor, positive, negative...) examples.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "pair_reading.h"
#include "spread/data/tokenizer.h"
#include "spread/util/error.h"
#include "spread/util/json_depth.h"

namespace spread::pair_reading {
namespace {
namespace fs = std::filesystem;

// Positions in `header` of [anchor, positive, negative...] (see PairSourceSpec::columns).
std::vector<size_t> resolve_columns(const std::vector<std::string>& header, const PairSourceSpec& spec,
                                    const std::string& file, const std::string& header_word) {
  auto missing = [&](const std::string& name) {
    std::vector<std::string> quoted;
    for (const auto& h : header) quoted.push_back("'" + h + "'");
    const std::string hint = spec.columns.empty()
                                 ? "with data.columns empty a file needs columns named anchor and positive; "
                                   "or name its columns in data.columns as [anchor, positive, negative...]"
                                 : "name columns of the file in data.columns";
    return user_error(
        spec.recipe_file, 0, "data.columns",
        "'" + file + "' has no column '" + name + "' (its " + header_word + ": " + join(quoted, ", ") + ")", hint);
  };
  auto find = [&](const std::string& name) {
    auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end()) throw missing(name);
    return static_cast<size_t>(it - header.begin());
  };
  std::vector<size_t> columns;
  if (spec.columns.empty()) {
    columns = {find("anchor"), find("positive")};
    for (size_t i = 0; i < header.size(); ++i)
      if (header[i].rfind("negative", 0) == 0) columns.push_back(i);
  } else {
    for (const auto& name : spec.columns) columns.push_back(find(name));
  }
  return columns;
}

// Text k of [anchor, positive, negative...] into `ex`.
void set_text(PairExample& ex, size_t k, std::string value) {
  if (k == 0) ex.anchor = std::move(value);
  else if (k == 1) ex.positive = std::move(value);
  else ex.negatives.push_back(std::move(value));
}

// A TSV or CSV file with a header row.
std::vector<PairExample> read_delimited_pairs(const std::string& path, RowFormat format, const PairSourceSpec& spec,
                                              BadRows& bad, std::vector<std::string>& column_names) {
  const std::string text = read_data_file(path, spec);
  RowReader reader(text, format);
  TextRow row;
  reader.next(row);  // the header (the file is not blank)
  if (!row.error.empty())
    throw user_error(path, static_cast<int>(row.line), "data.path", "bad header row: " + row.error);
  std::vector<std::string> header = row.fields;
  for (auto& h : header) {  // " positive" names the column "positive"
    const size_t b = h.find_first_not_of(" \t"), e = h.find_last_not_of(" \t");
    h = b == std::string::npos ? "" : h.substr(b, e - b + 1);
  }
  const std::vector<size_t> columns = resolve_columns(header, spec, path, "header's columns");
  column_names.clear();
  for (size_t c : columns) column_names.push_back(header[c]);

  std::vector<PairExample> examples;
  while (reader.next(row)) {
    if (!row.error.empty()) {
      bad.add(path, row.line, row.error);
      continue;
    }
    if (row.fields.size() != header.size()) {
      bad.add(
          path, row.line,
          "row has " + std::to_string(row.fields.size()) + " fields, the header has " + std::to_string(header.size()));
      continue;
    }
    PairExample ex;
    std::string problem;
    for (size_t k = 0; k < columns.size() && problem.empty(); ++k) {
      std::string& value = row.fields[columns[k]];
      problem = text_problem(value, "column '" + header[columns[k]] + "'");
      if (!problem.empty()) break;
      set_text(ex, k, std::move(value));
    }
    if (!problem.empty()) {
      bad.add(path, row.line, problem);
      continue;
    }
    examples.push_back(std::move(ex));
  }
  return examples;
}

// The first column of [anchor, positive, negative...] that `keys` lack ("" when it has them all).
std::string first_missing_column(const std::vector<std::string>& keys, const PairSourceSpec& spec) {
  const std::vector<std::string> wanted = spec.columns.empty() ? std::vector<std::string>{"anchor", "positive"}
                                                               : spec.columns;
  for (const auto& name : wanted)
    if (std::find(keys.begin(), keys.end(), name) == keys.end()) return name;
  return "";
}

// A JSONL file: one object per line with string fields; the keys of the first object that has the columns act as
// the header. Objects before it that lack one are bad rows like any other; when no object has them, the columns
// are wrong (data.columns, or the file), which is the file's error.
std::vector<PairExample> read_jsonl_pairs(const std::string& path, const PairSourceSpec& spec, BadRows& bad,
                                          std::vector<std::string>& column_names) {
  using ordered_json = nlohmann::ordered_json;  // keeps the file's key order, so negatives keep theirs
  const std::string text = read_data_file(path, spec);
  LineReader lines(text);
  std::string_view line;
  int64_t number = 0;
  column_names.clear();
  bool have_columns = false;
  std::optional<std::vector<std::string>> first_keys;  // of the first object
  std::vector<std::pair<int64_t, std::string>> before_header;  // objects without the columns, before one with them
  std::vector<PairExample> examples;
  while (lines.next(line, number)) {
    if (is_blank(line)) continue;
    if (int64_t at = first_invalid_utf8(std::string(line)); at >= 0) {
      bad.add(path, number, "invalid UTF-8 at byte " + std::to_string(at) + " of the line");
      continue;
    }
    if (json_too_deep(line)) {
      bad.add(path, number, "JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
      continue;
    }
    ordered_json obj = ordered_json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (obj.is_discarded() || !obj.is_object()) {
      bad.add(path, number, obj.is_discarded() ? "not valid JSON" : "not a JSON object");
      continue;
    }
    if (!have_columns) {
      std::vector<std::string> keys;
      for (const auto& item : obj.items()) keys.push_back(item.key());
      if (!first_keys) first_keys = keys;
      if (const std::string missing = first_missing_column(keys, spec); !missing.empty()) {
        std::string problem = "no field '" + missing + "' (its fields: " + join(keys, ", ") + ")";
        if (spec.strict) bad.add(path, number, problem);  // throws, naming this line
        before_header.emplace_back(number, std::move(problem));
        continue;
      }
      for (const auto& [line_no, problem] : before_header) bad.add(path, line_no, problem);
      for (size_t c : resolve_columns(keys, spec, path, "first object's fields")) column_names.push_back(keys[c]);
      have_columns = true;
    }
    PairExample ex;
    std::string problem;
    for (size_t k = 0; k < column_names.size() && problem.empty(); ++k) {
      const std::string& name = column_names[k];
      auto it = obj.find(name);
      if (it == obj.end()) {
        problem = "no field '" + name + "'";
      } else if (!it->is_string()) {
        problem = "field '" + name + "' is not a string";
      } else {
        std::string value = it->get<std::string>();
        problem = text_problem(value, "field '" + name + "'");
        set_text(ex, k, std::move(value));
      }
    }
    if (!problem.empty()) {
      bad.add(path, number, problem);
      continue;
    }
    examples.push_back(std::move(ex));
  }
  // No object has the columns: resolve_columns throws, naming the first object's fields.
  if (!have_columns && first_keys) resolve_columns(*first_keys, spec, path, "first object's fields");
  return examples;
}

}  // namespace

Loaded load_pair_files(const PairSourceSpec& spec, BadRows& bad) {
  if (spec.paths.empty())
    throw user_error(spec.recipe_file, 0, "data.path", "no file given", "name .tsv, .csv or .jsonl files");
  if (!spec.columns.empty() && spec.columns.size() < 2)
    throw user_error(spec.recipe_file, 0, "data.columns", "names one column",
                     "name at least the anchor and positive columns: [anchor, positive, negative...]");
  Loaded out;
  size_t negatives = 0;
  std::string negatives_file;
  for (const auto& path : spec.paths) {
    std::string ext = fs::path(path).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    std::vector<std::string> names;
    std::vector<PairExample> examples;
    if (ext == ".tsv" || ext == ".csv")
      examples = read_delimited_pairs(path, ext == ".tsv" ? RowFormat::tsv : RowFormat::csv, spec, bad, names);
    else if (ext == ".jsonl")
      examples = read_jsonl_pairs(path, spec, bad, names);
    else
      throw user_error(spec.recipe_file, 0, "data.path", "'" + path + "' is not a .tsv, .csv or .jsonl file",
                       "the extension picks the format");
    // Every example has as many negatives as the first file gives (a batch stacks them into one tensor).
    const size_t here = names.empty() ? 0 : names.size() - 2;
    if (negatives_file.empty()) {
      negatives = here;
      negatives_file = path;
    } else if (here != negatives) {
      throw user_error(spec.recipe_file, 0, "data.columns",
                       "'" + negatives_file + "' gives " +
                           count_of(static_cast<int64_t>(negatives), "negative", "negatives") + " per example, '" +
                           path + "' gives " + std::to_string(here),
                       "every file must give the same number; name them in data.columns");
    }
    out.examples.insert(out.examples.end(), std::make_move_iterator(examples.begin()),
                        std::make_move_iterator(examples.end()));
  }
  out.what = "pairs: " + count_of(static_cast<int64_t>(out.examples.size()), "example", "examples") + " with " +
             count_of(static_cast<int64_t>(negatives), "negative", "negatives") + " from " +
             count_of(static_cast<int64_t>(spec.paths.size()), "file", "files");
  return out;
}

}  // namespace spread::pair_reading
