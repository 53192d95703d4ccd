// Pair sources, the validation split without shared texts, the duplicate-free batch sampler, and STS files.
// (See pairs.h for the promises; the sections below follow its order.)
#include "spread/data/pairs.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "spread/data/beir.h"
#include "spread/data/tokenizer.h"
#include "spread/data/wordnet.h"
#include "spread/util/csv.h"
#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_depth.h"

namespace spread {
namespace {
namespace fs = std::filesystem;

// --- small helpers ---------------------------------------------------------------------------------------------

// splitmix64's finalizer (Steele et al. 2014), the same mix as the LM loader's seeding.
uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Stream of the validation split's shuffle; epochs of the sampler use streams 0, 1, 2, ...
constexpr uint64_t kSplitStream = ~0ULL;

// Uniform in [0, bound) by rejection: the same on every standard library, unlike uniform_int_distribution.
uint64_t draw_below(std::mt19937_64& gen, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound: the low values that would bias r % bound
  while (true) {
    const uint64_t r = gen();
    if (r >= threshold) return r % bound;
  }
}

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

// What a source produced, before the split.
struct Loaded {
  std::vector<PairExample> examples;
  std::string what;  // e.g. "stsb: 1,406 pairs (score >= 4) of 5,749 rows"
};

// --- source "pairs" --------------------------------------------------------------------------------------------

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

// --- source "wordnet_pairs" ------------------------------------------------------------------------------------

Loaded load_wordnet_pairs(const PairSourceSpec& spec) {
  if (spec.paths.size() > 1)
    throw user_error(spec.recipe_file, 0, "data.path", "wordnet_pairs reads one folder",
                     "name the wordnet folder, or nothing for " + std::string(kWordnetDir));
  const std::string dir = spec.paths.empty() ? kWordnetDir : spec.paths[0];
  Loaded out;
  int64_t with_examples = 0, with_lemmas = 0;
  for (auto& synset : load_wordnet(dir)) {
    if (is_blank(synset.definition)) continue;
    for (auto& example : synset.examples) {
      if (is_blank(example)) continue;
      out.examples.push_back({synset.definition, std::move(example), {}});
      ++with_examples;
    }
    std::vector<std::string> lemmas;
    for (auto& lemma : synset.lemmas)
      if (!is_blank(lemma)) lemmas.push_back(std::move(lemma));
    if (lemmas.empty()) continue;
    out.examples.push_back({join(lemmas, ", "), std::move(synset.definition), {}});
    ++with_lemmas;
  }
  out.what = "wordnet_pairs: " + count_of(with_examples + with_lemmas, "pair", "pairs") + " (" +
             thousands(with_examples) + " definition-example, " + thousands(with_lemmas) + " lemmas-definition)";
  return out;
}

// --- source "stsb" ---------------------------------------------------------------------------------------------

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

// Pairs with a gold similarity of at least this are positives (4 = "mostly equivalent" on STS's 0-5 scale).
constexpr double kStsbPositiveScore = 4.0;

Loaded load_stsb(const PairSourceSpec& spec, BadRows& bad) {
  if (spec.paths.empty()) throw user_error(spec.recipe_file, 0, "data.path", "no file given", "name stsb-en-train.csv");
  Loaded out;
  int64_t rows = 0;
  for (const auto& path : spec.paths) {
    const std::string text = read_data_file(path, spec);
    for_each_sts_row(path, text, bad, /*check_range=*/true, [&](std::string a, std::string b, double score, int64_t) {
      ++rows;
      if (score >= kStsbPositiveScore) out.examples.push_back({std::move(a), std::move(b), {}});
    });
  }
  out.what = "stsb: " + count_of(static_cast<int64_t>(out.examples.size()), "pair", "pairs") + " (score >= 4) of " +
             count_of(rows, "row", "rows");
  return out;
}

// --- source "sick" ---------------------------------------------------------------------------------------------

struct SickColumns {
  size_t a, b, label, ba, set, count;
};

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

Loaded load_sick(const PairSourceSpec& spec, BadRows& bad) {
  if (spec.paths.size() != 1)
    throw user_error(spec.recipe_file, 0, "data.path", "sick reads one file", "name SICK.txt");
  const std::string& path = spec.paths[0];
  const std::string text = read_data_file(path, spec);
  RowReader reader(text, RowFormat::tsv);
  TextRow row;
  reader.next(row);
  const SickColumns col = sick_columns(row.fields, path, spec.recipe_file, "data.path", /*need_label=*/true);

  std::vector<std::pair<std::string, std::string>> entailments;
  std::map<std::string, std::vector<std::string>> contradicting;  // sentence -> contradicting sentences, file order
  while (reader.next(row)) {
    if (row.fields.size() != col.count) {
      bad.add(path, row.line,
              "row has " + std::to_string(row.fields.size()) + " fields, the header has " + std::to_string(col.count));
      continue;
    }
    const std::string& set = row.fields[col.set];
    if (set != "TRAIN" && set != "TRIAL") continue;  // TEST rows are evaluation data
    std::string problem = text_problem(row.fields[col.a], "sentence_A");
    if (problem.empty()) problem = text_problem(row.fields[col.b], "sentence_B");
    if (!problem.empty()) {
      bad.add(path, row.line, problem);
      continue;
    }
    const std::string& label = row.fields[col.label];
    if (label == "ENTAILMENT") {
      entailments.emplace_back(row.fields[col.a], row.fields[col.b]);
    } else if (label == "CONTRADICTION") {
      contradicting[row.fields[col.a]].push_back(row.fields[col.b]);
      if (row.fields[col.ba] == "B_contradicts_A") contradicting[row.fields[col.b]].push_back(row.fields[col.a]);
    }
  }

  Loaded out;
  int64_t with_negative = 0;
  std::vector<std::string> negative(entailments.size());
  for (size_t i = 0; i < entailments.size(); ++i) {
    auto it = contradicting.find(entailments[i].first);
    if (it == contradicting.end()) continue;
    for (const auto& c : it->second)
      if (c != entailments[i].second) {
        negative[i] = c;
        ++with_negative;
        break;
      }
  }
  const bool all_have_one = with_negative == static_cast<int64_t>(entailments.size());
  for (size_t i = 0; i < entailments.size(); ++i) {
    if (spec.hard_negatives && negative[i].empty()) continue;
    PairExample ex{std::move(entailments[i].first), std::move(entailments[i].second), {}};
    if (spec.hard_negatives || all_have_one) ex.negatives.push_back(std::move(negative[i]));
    out.examples.push_back(std::move(ex));
  }
  const std::string n_pairs = thousands(static_cast<int64_t>(entailments.size()));
  if (spec.hard_negatives)
    out.what = "sick: " + count_of(with_negative, "ENTAILMENT pair", "ENTAILMENT pairs") +
               " with a hard negative (CONTRADICTION) of " + n_pairs + " (TRAIN+TRIAL)";
  else if (all_have_one)
    out.what = "sick: " + n_pairs + " ENTAILMENT pairs (TRAIN+TRIAL), each with a hard negative (CONTRADICTION)";
  else
    out.what = "sick: " + n_pairs + " ENTAILMENT pairs (TRAIN+TRIAL), no hard negatives (" + thousands(with_negative) +
               " have one; hard_negatives = true keeps only those)";
  return out;
}

// --- source "beir" ---------------------------------------------------------------------------------------------

Loaded load_beir_pairs(const PairSourceSpec& spec, BadRows& bad) {
  if (spec.paths.size() != 1 || !fs::is_directory(spec.paths.empty() ? "" : spec.paths[0]))
    throw user_error(spec.recipe_file, 0, "data.path",
                     spec.paths.size() == 1 ? "'" + spec.paths[0] + "' is not a folder" : "beir reads one folder",
                     "name a BEIR folder (corpus.jsonl, queries.jsonl, qrels/)");
  const BeirData data = load_beir(spec.paths[0], spec.beir_qrels, bad);
  std::unordered_map<std::string, size_t> doc_index;
  for (size_t i = 0; i < data.corpus_ids.size(); ++i) doc_index.emplace(data.corpus_ids[i], i);
  Loaded out;
  for (size_t q = 0; q < data.query_ids.size(); ++q)
    for (const auto& doc : data.qrels.at(data.query_ids[q]))
      out.examples.push_back({data.query_texts[q], data.corpus_texts[doc_index.at(doc)], {}});
  out.what = "beir: " + count_of(static_cast<int64_t>(out.examples.size()), "pair", "pairs") + " (" +
             count_of(static_cast<int64_t>(data.query_ids.size()), "query", "queries") + ", " +
             count_of(static_cast<int64_t>(data.corpus_ids.size()), "document", "documents") + ", " +
             fs::path(data.qrels_file).filename().string() + ")";
  return out;
}

// --- the split -------------------------------------------------------------------------------------------------

// Moves `all` into out.train / out.val: the first ceil(fraction * n) of a seeded permutation go to val (both keep
// file order), then train examples that share a text with val are dropped.
void split(std::vector<PairExample> all, const PairSourceSpec& spec, PairSet& out) {
  const int64_t n = static_cast<int64_t>(all.size());
  // The relative slack keeps 0.1 * 30 (= 3.0000000000000004 in doubles) at 3.
  const int64_t n_val = std::min<int64_t>(n, static_cast<int64_t>(std::ceil(spec.val_fraction * n * (1 - 1e-12))));
  const std::vector<int64_t> order = seeded_permutation(n, spec.seed, kSplitStream);
  std::vector<char> in_val(n, 0);
  for (int64_t i = 0; i < n_val; ++i) in_val[order[i]] = 1;

  std::unordered_set<std::string_view> val_texts;
  for (int64_t i = 0; i < n; ++i) {
    if (!in_val[i]) continue;
    val_texts.insert(all[i].anchor);
    val_texts.insert(all[i].positive);
    for (const auto& t : all[i].negatives) val_texts.insert(t);
  }
  std::vector<char> keep(n, 0);
  for (int64_t i = 0; i < n; ++i) {
    if (in_val[i]) continue;
    bool shared = val_texts.count(all[i].anchor) || val_texts.count(all[i].positive);
    for (const auto& t : all[i].negatives) shared = shared || val_texts.count(t);
    keep[i] = !shared;
    out.dropped_for_overlap += shared;
  }
  val_texts.clear();  // views into `all`, which is moved from next
  for (int64_t i = 0; i < n; ++i) {
    if (in_val[i]) out.val.push_back(std::move(all[i]));
    else if (keep[i]) out.train.push_back(std::move(all[i]));
  }
}

}  // namespace

// --- public ----------------------------------------------------------------------------------------------------

std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed, uint64_t stream) {
  std::vector<int64_t> perm(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  std::mt19937_64 gen(splitmix(seed ^ splitmix(stream)));
  for (int64_t i = n - 1; i > 0; --i) std::swap(perm[i], perm[draw_below(gen, static_cast<uint64_t>(i) + 1)]);
  return perm;
}

PairSet load_pairs(const PairSourceSpec& spec) {
  if (!(spec.val_fraction >= 0 && spec.val_fraction < 1))
    throw user_error(spec.recipe_file, 0, "data.val_fraction",
                     "must be in [0, 1), got " + std::to_string(spec.val_fraction));
  if (!spec.columns.empty() && spec.source != "pairs")
    throw user_error(spec.recipe_file, 0, "data.columns", "only source 'pairs' reads columns",
                     "remove data.columns for source '" + spec.source + "'");
  BadRows bad(spec.strict, "data.path",
              std::string("fix or remove the row, or set data.strict = false") +
                  (spec.recipe_file.empty() ? "" : " in " + spec.recipe_file) + " to skip bad rows");
  Loaded loaded;
  if (spec.source == "pairs") loaded = load_pair_files(spec, bad);
  else if (spec.source == "wordnet_pairs") loaded = load_wordnet_pairs(spec);
  else if (spec.source == "stsb") loaded = load_stsb(spec, bad);
  else if (spec.source == "sick") loaded = load_sick(spec, bad);
  else if (spec.source == "beir") loaded = load_beir_pairs(spec, bad);
  else
    throw user_error(spec.recipe_file, 0, "data.source", "unknown pair source '" + spec.source + "'",
                     "use pairs, wordnet_pairs, stsb, sick or beir");

  PairSet out;
  out.bad_rows = bad.count();
  out.bad_row_messages = bad.messages();
  if (loaded.examples.empty()) {
    std::string problem = "no usable examples in " + join(spec.paths, ", ");
    if (bad.count() > 0)
      problem += " (" + count_of(bad.count(), "bad row", "bad rows") + ", first: " + bad.messages()[0] + ")";
    throw user_error(spec.recipe_file, 0, "data.path", problem);
  }
  const int64_t total = static_cast<int64_t>(loaded.examples.size());
  split(std::move(loaded.examples), spec, out);
  if (out.train.empty())
    throw user_error(spec.recipe_file, 0, "data.val_fraction",
                     "no training example is left of " + thousands(total) + " (" + thousands(out.dropped_for_overlap) +
                         " share a text with the " + thousands(static_cast<int64_t>(out.val.size())) + " val examples)",
                     "lower data.val_fraction");

  out.description = loaded.what;
  if (bad.count() > 0) out.description += ", " + count_of(bad.count(), "bad row", "bad rows") + " skipped";
  out.description += "; train " + thousands(static_cast<int64_t>(out.train.size())) + ", val " +
                     thousands(static_cast<int64_t>(out.val.size()));
  if (out.dropped_for_overlap > 0)
    out.description +=
        " (" + thousands(out.dropped_for_overlap) + " train examples dropped: they share a text with val)";
  return out;
}

std::vector<std::string> pair_texts(const std::vector<PairExample>& examples) {
  std::vector<std::string> texts;
  std::unordered_set<std::string_view> seen;
  auto add = [&](const std::string& t) {
    if (seen.insert(t).second) texts.push_back(t);
  };
  for (const auto& ex : examples) {
    add(ex.anchor);
    add(ex.positive);
    for (const auto& t : ex.negatives) add(t);
  }
  return texts;
}

// --- PairBatchSampler ------------------------------------------------------------------------------------------

struct PairBatchSampler::Cache {
  std::mutex mutex;
  std::shared_ptr<const std::vector<int64_t>> orders[2];
  uint64_t epochs[2] = {0, 0};
  int next = 0;  // slot to replace
};

PairBatchSampler::PairBatchSampler(const std::vector<PairExample>& examples, uint64_t seed)
    : seed_(seed), cache_(std::make_unique<Cache>()) {
  std::unordered_map<std::string_view, int32_t> ids;
  auto id = [&](const std::string& t) { return ids.emplace(t, static_cast<int32_t>(ids.size())).first->second; };
  text_begin_.reserve(examples.size() + 1);
  text_begin_.push_back(0);
  for (const auto& ex : examples) {
    text_ids_.push_back(id(ex.anchor));
    text_ids_.push_back(id(ex.positive));
    for (const auto& t : ex.negatives) text_ids_.push_back(id(t));
    text_begin_.push_back(static_cast<int64_t>(text_ids_.size()));
  }
}

PairBatchSampler::~PairBatchSampler() = default;
PairBatchSampler::PairBatchSampler(PairBatchSampler&&) noexcept = default;
PairBatchSampler& PairBatchSampler::operator=(PairBatchSampler&&) noexcept = default;

std::vector<int64_t> PairBatchSampler::epoch_order(uint64_t epoch) const { return *order(epoch); }

std::shared_ptr<const std::vector<int64_t>> PairBatchSampler::order(uint64_t epoch) const {
  std::lock_guard<std::mutex> lock(cache_->mutex);
  for (int s = 0; s < 2; ++s)
    if (cache_->orders[s] && cache_->epochs[s] == epoch) return cache_->orders[s];
  auto perm = std::make_shared<const std::vector<int64_t>>(seeded_permutation(size(), seed_, epoch));
  const int s = cache_->next;
  cache_->orders[s] = perm;
  cache_->epochs[s] = epoch;
  cache_->next = 1 - s;
  return perm;
}

std::vector<int64_t> PairBatchSampler::sample(int64_t batch_size, uint64_t step, uint64_t micro,
                                              int64_t micro_steps) const {
  if (batch_size < 1 || micro_steps < 1 || micro >= static_cast<uint64_t>(micro_steps))
    throw std::invalid_argument("PairBatchSampler::sample: needs batch_size >= 1 and 0 <= micro < micro_steps");
  const uint64_t n = static_cast<uint64_t>(size());
  std::vector<int64_t> batch;
  if (n == 0) return batch;
  const uint64_t position = (step * static_cast<uint64_t>(micro_steps) + micro) * static_cast<uint64_t>(batch_size);
  const uint64_t epoch = position / n, offset = position % n;
  std::unordered_set<int32_t> used;
  auto try_take = [&](int64_t i) {
    for (int64_t k = text_begin_[i]; k < text_begin_[i + 1]; ++k)
      if (used.count(text_ids_[k])) return;
    used.insert(text_ids_.begin() + text_begin_[i], text_ids_.begin() + text_begin_[i + 1]);
    batch.push_back(i);
  };
  // The rest of this epoch, then all of the next (which tries every example; from offset 0 one epoch already has).
  for (uint64_t pass = 0; pass < (offset == 0 ? 1u : 2u); ++pass) {
    const auto perm = order(epoch + pass);
    for (uint64_t j = pass == 0 ? offset : 0; j < n; ++j) {
      try_take((*perm)[j]);
      if (static_cast<int64_t>(batch.size()) == batch_size) return batch;
    }
  }
  return batch;
}

// --- STS files -------------------------------------------------------------------------------------------------

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
