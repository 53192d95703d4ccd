#include "spread/eval/mine_run.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <unordered_map>

#include "spread/data/beir.h"
#include "spread/data/pairs.h"
#include "spread/eval/run_eval.h"
#include "spread/log/progress.h"
#include "spread/util/error.h"
#include "spread/util/file.h"

namespace spread {
namespace {

// Texts in first-seen order, each once, with the position of every text.
class DistinctTexts {
 public:
  int64_t add(const std::string& text) {
    auto [it, inserted] = index_.emplace(text, int64_t(texts_.size()));
    if (inserted) texts_.push_back(text);
    return it->second;
  }
  const std::vector<std::string>& texts() const { return texts_; }

 private:
  std::vector<std::string> texts_;
  std::unordered_map<std::string, int64_t> index_;
};

struct MiningData {
  DistinctTexts corpus, queries;
  std::vector<std::vector<int64_t>> positives;  // per distinct query: its distinct positives' corpus rows
  int64_t pairs = 0;
};

std::vector<PairExample> read_pairs(const MineRequest& r) {
  PairSourceSpec spec;
  spec.source = r.beir.empty() ? "pairs" : "beir";
  spec.paths = {r.beir.empty() ? r.pairs : r.beir};
  spec.beir_qrels = r.qrels;
  spec.val_fraction = 0;  // every pair, in file order
  spec.strict = true;     // a bad row is named, not skipped: mining must see the data that training will
  return load_pairs(spec).train;
}

std::vector<std::string> read_corpus(const MineRequest& r) {
  if (!r.beir.empty()) return load_beir(r.beir, r.qrels).corpus_texts;
  if (r.corpus.empty()) return {};
  if (std::filesystem::is_directory(r.corpus)) return load_beir(r.corpus).corpus_texts;
  return read_input_texts(r.corpus, "--corpus");
}

MiningData lay_out(const MineRequest& r) {
  MiningData d;
  for (const auto& text : read_corpus(r)) d.corpus.add(text);
  for (const auto& pair : read_pairs(r)) {
    const int64_t doc = d.corpus.add(pair.positive);
    const int64_t query = d.queries.add(pair.anchor);
    if (query == int64_t(d.positives.size())) d.positives.emplace_back();
    auto& mine = d.positives[size_t(query)];
    if (std::find(mine.begin(), mine.end(), doc) == mine.end()) mine.push_back(doc);
    ++d.pairs;
  }
  return d;
}

int64_t max_positives(const MiningData& d) {
  int64_t most = 1;
  for (const auto& p : d.positives) most = std::max<int64_t>(most, int64_t(p.size()));
  return most;
}

// The folder's prompt called `name` ("query" or "document"), "" when it has none or the model is a run.
std::string named_prompt(const LoadedRun& run, const std::string& name) {
  if (!run.sentence) return "";
  auto it = run.sentence->prompts.find(name);
  return it == run.sentence->prompts.end() ? "" : it->second;
}

std::string row_json(const std::string& anchor, const std::string& positive, const std::vector<std::string>& corpus,
                     const MinedNegatives& mined) {
  nlohmann::ordered_json row = {{"anchor", anchor}, {"positive", positive}};
  for (size_t i = 0; i < mined.corpus_index.size(); ++i)
    row["negative_" + std::to_string(i + 1)] = corpus[size_t(mined.corpus_index[i])];
  return row.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict) + "\n";
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

nlohmann::json mine_to_file(LoadedRun& run, const MineRequest& request) {
  const MiningData data = lay_out(request);
  check_hard_negative_options(request.options, max_positives(data), int64_t(data.corpus.texts().size()));
  const EncoderSpec spec = spec_of(run, "", request.batch_size);
  const auto start = std::chrono::steady_clock::now();
  const torch::Tensor docs = embed_with_prompt(run, data.corpus.texts(), spec, named_prompt(run, "document"),
                                               /*normalize=*/false, "encoding the corpus");
  const torch::Tensor queries = embed_with_prompt(run, data.queries.texts(), spec, named_prompt(run, "query"),
                                                  /*normalize=*/false, "encoding the queries");
  // Normalised here, once, whatever the folder's modules say: mining scores by cosine, as the library does.
  namespace F = torch::nn::functional;
  const auto unit = F::NormalizeFuncOptions().dim(1);
  const torch::Tensor d = F::normalize(docs, unit), q = F::normalize(queries, unit);
  const double encode_seconds = seconds_since(start);
  CountProgress progress("searching", "queries");
  const auto mined = mine_hard_negatives(q, d, data.positives, request.options, std::ref(progress));
  const double search_seconds = seconds_since(start) - encode_seconds;

  std::string out;
  int64_t rows = 0, left_out = 0;
  double negative_sum = 0, positive_sum = 0;
  for (size_t i = 0; i < mined.size(); ++i) {
    for (int64_t doc : data.positives[i]) {
      if (mined[i].corpus_index.empty()) {
        ++left_out;
        continue;
      }
      out += row_json(data.queries.texts()[i], data.corpus.texts()[size_t(doc)], data.corpus.texts(), mined[i]);
      ++rows;
      positive_sum += torch::dot(q[int64_t(i)], d[doc]).item<double>();
      for (float s : mined[i].score) negative_sum += s;
    }
  }
  if (rows == 0)
    throw UserError(fmt::format("no query has {} qualified negatives: loosen the margins, scores or range",
                                request.options.num_negatives));
  write_file_atomic(request.out, out);
  const HardNegativeOptions& o = request.options;
  return {{"queries", data.queries.texts().size()}, {"pairs", data.pairs}, {"documents", data.corpus.texts().size()},
          {"rows", rows}, {"left_out", left_out},
          {"range_max", o.range_max ? *o.range_max : default_range_max(o, max_positives(data))},
          {"negative_score_mean", negative_sum / double(rows * o.num_negatives)},
          {"positive_score_mean", positive_sum / double(rows)}, {"encode_seconds", encode_seconds},
          {"search_seconds", search_seconds}, {"out", request.out}};
}

}  // namespace spread
