// Sources "wordnet_pairs", "stsb", "sick" and "beir": the known data sets as pairs (pairs.h says what each gives).
#include <filesystem>
#include <map>
#include <unordered_map>

#include "pair_reading.h"
#include "spread/data/beir.h"
#include "spread/data/wordnet.h"
#include "spread/util/error.h"

namespace spread::pair_reading {
namespace fs = std::filesystem;

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

}  // namespace spread::pair_reading
