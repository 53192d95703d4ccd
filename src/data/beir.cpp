// BEIR folders: corpus.jsonl, queries.jsonl and one qrels TSV (see beir.h).
#include "spread/data/beir.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <limits>
#include <optional>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "spread/data/tokenizer.h"
#include "spread/util/csv.h"
#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_depth.h"

namespace spread {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

const char* const kLayoutHint = "a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/NAME.tsv";

// Any size: a BEIR corpus is data (MS MARCO's is 3 GB). A regular file only (util/file.h), as in a model folder.
std::string read_beir_file(const fs::path& path) {
  auto text = read_regular_file(path.string(), std::numeric_limits<uint64_t>::max());
  if (!text) throw user_error(path.string(), 0, "", "cannot read this file", kLayoutHint);
  return *text;
}

bool is_blank(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

// "_id" as text: a JSON string, or an integer as some converted datasets write it.
std::optional<std::string> json_id(const json& obj) {
  auto it = obj.find("_id");
  if (it == obj.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return it->dump();
  return std::nullopt;
}

// The string field `key`: "" when absent or null when `optional`, nullopt when it is not a string.
std::optional<std::string> json_text(const json& obj, const char* key, bool optional) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return optional ? std::optional<std::string>("") : std::nullopt;
  if (!it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

// Calls fn(object, line) for every line of a JSONL file that is a JSON object; other non-blank lines are bad.
template <typename Fn>
void for_each_object(const fs::path& path, BadRows& bad, Fn&& fn) {
  const std::string text = read_beir_file(path);
  LineReader lines(text);
  std::string_view line;
  int64_t number = 0;
  while (lines.next(line, number)) {
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const std::string_view view = line;
    if (int64_t at = first_invalid_utf8(std::string(view)); at >= 0) {
      bad.add(path.string(), number, "invalid UTF-8 at byte " + std::to_string(at) + " of the line");
      continue;
    }
    if (json_too_deep(view)) {
      bad.add(path.string(), number, "JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
      continue;
    }
    json obj = json::parse(view.begin(), view.end(), nullptr, /*allow_exceptions=*/false);
    if (obj.is_discarded() || !obj.is_object()) {
      bad.add(path.string(), number, obj.is_discarded() ? "not valid JSON" : "not a JSON object");
      continue;
    }
    fn(obj, number);
  }
}

fs::path qrels_path(const fs::path& dir, const std::string& name) {
  const fs::path qrels_dir = dir / "qrels";
  if (!name.empty()) {
    const bool has_ext = name.size() > 4 && name.compare(name.size() - 4, 4, ".tsv") == 0;
    return qrels_dir / (has_ext ? name : name + ".tsv");
  }
  if (fs::exists(qrels_dir / "train.tsv")) return qrels_dir / "train.tsv";
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(qrels_dir, ec))
    if (entry.path().extension() == ".tsv") found.push_back(entry.path());
  if (found.size() == 1) return found[0];
  if (found.empty()) throw user_error(qrels_dir.string(), 0, "", "no .tsv qrels file here", kLayoutHint);
  std::sort(found.begin(), found.end());
  std::string names;
  for (const auto& p : found) names += (names.empty() ? "" : ", ") + p.filename().string();
  throw user_error(qrels_dir.string(), 0, "", "several qrels files and no train.tsv: " + names,
                   "name the one to use");
}


}  // namespace

std::optional<double> parse_qrels_score(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  double value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

BeirData load_beir(const std::string& dir, const std::string& qrels_name) {
  BadRows strict(/*strict=*/true, "", "");
  return load_beir(dir, qrels_name, strict);
}

BeirData load_beir(const std::string& dir, const std::string& qrels_name, BadRows& bad) {
  const fs::path root(dir);
  BeirData data;

  std::unordered_map<std::string, int64_t> doc_line;  // id -> line, for duplicates and qrels lookups
  const fs::path corpus_file = root / "corpus.jsonl";
  for_each_object(corpus_file, bad, [&](const json& obj, int64_t line) {
    auto id = json_id(obj);
    auto title = json_text(obj, "title", /*optional=*/true);
    auto text = json_text(obj, "text", /*optional=*/true);
    if (!id) return bad.add(corpus_file.string(), line, "no \"_id\" (a string or integer)");
    if (!title || !text) return bad.add(corpus_file.string(), line, "\"title\" or \"text\" is not a string");
    std::string doc = title->empty() ? *text : text->empty() ? *title : *title + " " + *text;
    if (is_blank(doc)) return bad.add(corpus_file.string(), line, "document '" + *id + "' has no text");
    auto [it, fresh] = doc_line.emplace(*id, line);
    if (!fresh)
      return bad.add(corpus_file.string(), line,
                     "duplicate _id '" + *id + "' (first on line " + std::to_string(it->second) + ")");
    data.corpus_ids.push_back(*id);
    data.corpus_texts.push_back(std::move(doc));
  });

  std::vector<std::string> all_ids, all_texts;
  std::unordered_map<std::string, int64_t> query_line;
  const fs::path queries_file = root / "queries.jsonl";
  for_each_object(queries_file, bad, [&](const json& obj, int64_t line) {
    auto id = json_id(obj);
    auto text = json_text(obj, "text", /*optional=*/false);
    if (!id) return bad.add(queries_file.string(), line, "no \"_id\" (a string or integer)");
    if (!text) return bad.add(queries_file.string(), line, "no \"text\" string");
    if (is_blank(*text)) return bad.add(queries_file.string(), line, "query '" + *id + "' has no text");
    auto [it, fresh] = query_line.emplace(*id, line);
    if (!fresh)
      return bad.add(queries_file.string(), line,
                     "duplicate _id '" + *id + "' (first on line " + std::to_string(it->second) + ")");
    all_ids.push_back(*id);
    all_texts.push_back(std::move(*text));
  });

  const fs::path qrels_file = qrels_path(root, qrels_name);
  data.qrels_file = qrels_file.string();
  const std::string qrels_text = read_beir_file(qrels_file);
  RowReader rows(qrels_text, RowFormat::tsv);
  TextRow row;
  bool first = true;
  while (rows.next(row)) {
    const bool header = first && row.fields.size() == 3 && !parse_qrels_score(row.fields[2]);
    first = false;
    if (header) continue;
    if (row.fields.size() != 3) {
      bad.add(data.qrels_file, row.line,
              "row has " + std::to_string(row.fields.size()) + " fields, expected 3 (query-id, corpus-id, score)");
      continue;
    }
    const auto score = parse_qrels_score(row.fields[2]);
    if (!score) {
      bad.add(data.qrels_file, row.line, "score '" + row.fields[2] + "' is not a number");
      continue;
    }
    if (*score <= 0) continue;  // judged, not relevant
    if (!query_line.count(row.fields[0])) {
      bad.add(data.qrels_file, row.line, "query-id '" + row.fields[0] + "' is not in queries.jsonl");
      continue;
    }
    if (!doc_line.count(row.fields[1])) {
      bad.add(data.qrels_file, row.line, "corpus-id '" + row.fields[1] + "' is not in corpus.jsonl");
      continue;
    }
    data.qrels[row.fields[0]].insert(row.fields[1]);
  }

  for (size_t i = 0; i < all_ids.size(); ++i) {
    if (!data.qrels.count(all_ids[i])) continue;
    data.query_ids.push_back(std::move(all_ids[i]));
    data.query_texts.push_back(std::move(all_texts[i]));
  }
  // Metrics over no query are 0 / 0: printed as NaN with exit 0 before.
  if (data.query_ids.empty())
    throw user_error(data.qrels_file, 0, "", "gives no query of queries.jsonl a relevant document (score > 0)",
                     "retrieval needs at least one judged query: check that the qrels file belongs to this folder");
  return data;
}

}  // namespace spread
