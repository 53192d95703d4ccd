#include "spread/eval/run_eval.h"

#include <chrono>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sstream>
#include <unistd.h>

#include "spread/data/corpus.h"
#include "spread/data/npy.h"
#include "spread/data/special_tokens.h"
#include "spread/data/text_check.h"
#include "spread/data/token_file.h"
#include "spread/encode/embed.h"
#include "spread/encode/multi_vector.h"
#include "spread/eval/encoder_eval.h"
#include "spread/eval/multi_vector_retrieval.h"
#include "spread/log/progress.h"
#include "spread/run/setup.h"
#include "spread/tasks/maxsim.h"
#include "spread/util/error.h"
#include "spread/util/file.h"

namespace fs = std::filesystem;

namespace spread {

EncoderSpec spec_of(const LoadedRun& run, const std::string& pooling, int64_t batch_size) {
  EncoderSpec spec;
  spec.max_length = run.recipe.data.max_length > 0 ? run.recipe.data.max_length : run.recipe.model.block_size;
  try {
    spec.pooling = parse_pooling(pooling.empty() ? run.recipe.loss.contrastive.pooling : pooling);
  } catch (const std::invalid_argument& e) {
    throw user_error("", 0, "--pooling", e.what());
  }
  spec.batch_size = batch_size;
  spec.device = recipe_device(run.recipe);
  return spec;
}

std::vector<std::string> read_input_texts(const std::string& path, const std::string& option) {
  auto bytes = read_whole_file(path);
  if (!bytes) throw user_error(path, 0, option, "cannot read the file", "check the path");
  check_text_file(*bytes, path, option);
  const bool jsonl = path.size() >= 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
  std::vector<std::string> texts;
  std::istringstream lines(*bytes);
  std::string line;
  for (int line_no = 1; std::getline(lines, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!jsonl) {
      texts.push_back(line);
      continue;
    }
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    texts.push_back(jsonl_document(line, path, line_no, option));
  }
  if (texts.empty()) throw user_error(path, 0, option, "holds no text", "one text per line (.txt) or .jsonl");
  return texts;
}

namespace {

// A text the run's tokenizer cannot encode (a character outside an LM's char vocabulary), named by file and line:
// the tokenizer knows only the text. Only the part the evaluation reads is encoded (up to max_length tokens): the
// whole of a 20 MB sentence took gigabytes.
void check_sts_texts(const Tokenizer& tokenizer, const std::vector<StsPair>& pairs, const std::string& file,
                     int64_t max_length) {
  for (const auto& p : pairs) {
    for (const std::string* text : {&p.a, &p.b}) {
      try {
        encode_for_encoder(tokenizer, *text, max_length);
      } catch (const UserError& e) {
        const std::string which = text == &p.a ? "sentence 1: " : "sentence 2: ";
        throw user_error(file, int(p.line), "--sts", which + e.what());
      }
    }
  }
}

// {query id: {"ndcg@10", "mrr@10", "recall@100"}}, as pytrec_eval lays out per-query results.
nlohmann::json per_query_json(const RetrievalMetrics& r) {
  nlohmann::json out = nlohmann::json::object();
  for (const QueryMetrics& q : r.per_query)
    out[q.query_id] = {{"ndcg@10", q.ndcg_at_10}, {"mrr@10", q.mrr_at_10}, {"recall@100", q.recall_at_100}};
  return out;
}

}  // namespace

nlohmann::json evaluate_embeddings(LoadedRun& run, const EmbeddingEvalRequest& request) {
  const EncoderSpec spec = spec_of(run, request.pooling, request.batch_size);
  nlohmann::json result = {{"run", run.dir}, {"step", run.step},
                           {"pooling", request.pooling.empty() ? run.recipe.loss.contrastive.pooling : request.pooling}};
  if (!request.sts.empty()) {
    auto pairs = load_sts_csv(request.sts);
    check_sts_texts(*run.tokenizer, pairs, request.sts, spec.max_length);
    StsScore s = evaluate_sts(run.model, *run.tokenizer, pairs, spec);
    result["sts"] = {{"file", request.sts}, {"pairs", s.pairs}, {"spearman", s.spearman}};
  }
  if (!request.beir.empty()) {
    BeirData data = load_beir(request.beir, request.qrels);
    CountProgress progress("encoding");
    RetrievalMetrics r = evaluate_retrieval(run.model, *run.tokenizer, data, spec, std::ref(progress));
    result["beir"] = {{"dir", request.beir}, {"qrels", data.qrels_file}, {"queries", r.queries},
                      {"documents", data.corpus_ids.size()}, {"ndcg@10", r.ndcg_at_10}, {"mrr@10", r.mrr_at_10},
                      {"recall@100", r.recall_at_100}};
    if (request.per_query) result["beir"]["per_query"] = per_query_json(r);
  }
  return result;
}

std::string format_embedding_eval(const nlohmann::json& r) {
  std::string out = fmt::format("run {} at step {} ({} pooling)\n", r["run"].get<std::string>(), r["step"].get<int64_t>(),
                                r["pooling"].get<std::string>());
  out += fmt::format("{:<14} {:>8}  {}\n", "metric", "value", "data");
  if (r.contains("sts"))
    out += fmt::format("{:<14} {:>8.4f}  {} ({} pairs)\n", "STS Spearman", r["sts"]["spearman"].get<double>(),
                       r["sts"]["file"].get<std::string>(), r["sts"]["pairs"].get<int64_t>());
  if (r.contains("beir")) {
    const auto& b = r["beir"];
    const std::string data = fmt::format("{} ({} queries, {} documents)", b["dir"].get<std::string>(),
                                         b["queries"].get<int64_t>(), b["documents"].get<int64_t>());
    for (const char* key : {"ndcg@10", "mrr@10", "recall@100"})
      out += fmt::format("{:<14} {:>8.4f}  {}\n", key, b[key].get<double>(), data);
  }
  return out;
}

nlohmann::json evaluate_choices_file(LoadedRun& run, const std::vector<ChoiceItem>& items, const std::string& path,
                                     int64_t batch_size, bool per_item) {
  if (run.recipe.is_encoder_objective() || !run.recipe.model.causal)
    throw user_error(run.dir, 0, "--choices",
                     "multiple-choice scores need a causal language model, and this run is \"" +
                         name_of(run.recipe.train.objective) + "\"",
                     "give an LM run or a GPT-2 / Llama folder");
  const ChoiceResult r = evaluate_choices(run.model, *run.tokenizer, items, batch_size, recipe_device(run.recipe));
  nlohmann::json result = {{"run", run.dir}, {"step", run.step}};
  result["choices"] = {{"file", path}, {"items", r.items}, {"acc", r.acc}, {"acc_norm", r.acc_norm}};
  if (per_item) {
    auto& rows = result["choices"]["per_item"] = nlohmann::json::array();
    for (size_t i = 0; i < items.size(); ++i)
      rows.push_back({{"loglik", r.loglik[i]}, {"tokens", r.tokens[i]}, {"label", items[i].label}});
  }
  return result;
}

std::string format_choices_eval(const nlohmann::json& r) {
  const auto& c = r["choices"];
  const std::string data = fmt::format("{} ({} items)", c["file"].get<std::string>(), c["items"].get<int64_t>());
  std::string out = fmt::format("run {} at step {}\n", r["run"].get<std::string>(), r["step"].get<int64_t>());
  out += fmt::format("{:<14} {:>8}  {}\n", "metric", "value", "data");
  out += fmt::format("{:<14} {:>8.4f}  {}\n", "acc", c["acc"].get<double>(), data);
  out += fmt::format("{:<14} {:>8.4f}  {}\n", "acc_norm", c["acc_norm"].get<double>(), data);
  return out;
}

namespace {

void require_maxsim_run(const LoadedRun& run, const char* what) {
  if (run.recipe.objective().head != Head::token_vectors)
    throw user_error(run.dir + "/recipe.toml", 0, "train.objective", std::string(what) + " needs a late-interaction run "
                     "(objective " + objective_names([](const ObjectiveTraits& t) { return t.head == Head::token_vectors; }) +
                     "), this one is \"" + name_of(run.recipe.train.objective) + "\"");
}

MultiVectorSpec multi_vector_spec_of(const LoadedRun& run, int64_t batch_size) {
  MultiVectorSpec spec = multi_vector_spec(run.recipe, *run.tokenizer, recipe_device(run.recipe));
  spec.batch_size = batch_size;
  return spec;
}

nlohmann::json pooled_result(const PooledRetrieval& p, double unpooled_ndcg, bool per_query) {
  nlohmann::json j = {{"pool_factor", p.pool_factor}, {"ndcg@10", p.metrics.ndcg_at_10}, {"mrr@10", p.metrics.mrr_at_10},
                      {"recall@100", p.metrics.recall_at_100}, {"vectors_per_doc", p.mean_vectors}};
  if (unpooled_ndcg > 0) j["kept"] = p.metrics.ndcg_at_10 / unpooled_ndcg;
  if (per_query) j["per_query"] = per_query_json(p.metrics);
  return j;
}

}  // namespace

nlohmann::json evaluate_late_interaction(LoadedRun& run, const LateInteractionEvalRequest& request) {
  require_maxsim_run(run, "--pool-factors");
  BeirData data = load_beir(request.beir, request.qrels);
  CountProgress progress("encoding documents");
  const auto results = evaluate_multi_vector_retrieval(run.model, *run.tokenizer, data,
                                                       multi_vector_spec_of(run, request.batch_size),
                                                       request.pool_factors, maxsim_step_options(run.recipe).ward,
                                                       std::ref(progress));
  double unpooled = 0;
  for (const auto& r : results)
    if (r.pool_factor == 1) unpooled = r.metrics.ndcg_at_10;
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : results) rows.push_back(pooled_result(r, unpooled, request.per_query));
  return {{"run", run.dir}, {"step", run.step},
          {"beir", {{"dir", request.beir}, {"qrels", data.qrels_file}, {"queries", results.front().metrics.queries},
                    {"documents", data.corpus_ids.size()}, {"results", rows}}}};
}

std::string format_late_interaction_eval(const nlohmann::json& r) {
  const auto& b = r["beir"];
  std::string out = fmt::format("run {} at step {}: {} ({} queries, {} documents), MaxSim\n", r["run"].get<std::string>(),
                                r["step"].get<int64_t>(), b["dir"].get<std::string>(), b["queries"].get<int64_t>(),
                                b["documents"].get<int64_t>());
  out += fmt::format("{:>11} {:>12} {:>8} {:>8} {:>10} {:>6}\n", "pool factor", "vectors/doc", "nDCG@10", "MRR@10",
                     "Recall@100", "kept");
  for (const auto& row : b["results"])
    out += fmt::format("{:>11g} {:>12.1f} {:>8.4f} {:>8.4f} {:>10.4f} {:>6}\n", row["pool_factor"].get<double>(),
                       row["vectors_per_doc"].get<double>(), row["ndcg@10"].get<double>(), row["mrr@10"].get<double>(),
                       row["recall@100"].get<double>(),
                       row.contains("kept") ? fmt::format("{:.1f}%", 100 * row["kept"].get<double>()) : "-");
  return out;
}

nlohmann::json calibrate_run(LoadedRun& run, const CalibrateRequest& request) {
  require_maxsim_run(run, "spread calibrate");
  std::string path = request.docs;
  if (std::filesystem::is_directory(path)) path = (std::filesystem::path(path) / "corpus.jsonl").string();
  auto texts = read_input_texts(path, "--docs");
  if (int64_t(texts.size()) > request.max_docs) texts.resize(size_t(request.max_docs));
  CountProgress progress("encoding documents");
  const auto docs = encode_documents(run.model, *run.tokenizer, texts, multi_vector_spec_of(run, request.batch_size),
                                     std::ref(progress));
  const WardPoolOptions ward = maxsim_step_options(run.recipe).ward;
  const WardCalibration c = calibrate_ward_threshold(docs, request.target_tokens, ward);
  return {{"run", run.dir}, {"step", run.step}, {"documents", c.documents}, {"target_tokens", request.target_tokens},
          {"threshold", c.threshold}, {"achieved_mean", c.achieved_mean}, {"unpooled_mean", c.unpooled_mean},
          {"fewest_mean", c.fewest_mean},
          {"ward_distance", run.recipe.loss.pooling_aware.ward_distance}, {"protected_tokens", ward.protected_tokens}};
}

EvalResult evaluate_text_file(LoadedRun& run, const std::string& path, int64_t batch_size, int64_t max_batches) {
  auto bytes = read_whole_file(path);
  if (!bytes) throw user_error(path, 0, "--text", "cannot read the file", "check the path");
  check_text_file(*bytes, path, "--text");
  const std::vector<int32_t> tokens = run.tokenizer->encode(*bytes);
  const int64_t block = run.model->config().block_size;
  if (int64_t(tokens.size()) < block + 1)
    throw user_error(path, 0, "--text", fmt::format("has {} tokens, fewer than one window of {} + 1", tokens.size(),
                                                    block),
                     "give a longer text");
  // The windows come from a token file, as a run's split does (memory-mapped, 2 or 4 bytes a token).
  const fs::path scratch = fs::temp_directory_path() / fmt::format("spread_eval_{}.bin", ::getpid());
  write_token_file(scratch.string(), tokens, bytes->size());
  EvalResult r;
  try {
    TokenFile file(scratch.string());
    r = evaluate_split(run.model, file, batch_size, max_batches, recipe_device(run.recipe));
  } catch (...) {
    std::error_code ec;
    fs::remove(scratch, ec);
    throw;
  }
  std::error_code ec;
  fs::remove(scratch, ec);
  return r;
}

std::string encode_prompt(const LoadedRun& run, const EncodeRequest& request) {
  if (request.prompt_text) {
    if (!run.sentence) throw user_error(run.dir, 0, "--prompt", "prompts apply to sentence-transformers folders");
    return *request.prompt_text;
  }
  if (!run.sentence) {
    if (!request.prompt_name.empty())
      throw user_error(run.dir, 0, "--prompt-name", "prompts apply to sentence-transformers folders");
    return "";
  }
  const std::string name = request.prompt_name.empty() ? run.sentence->default_prompt_name : request.prompt_name;
  if (name.empty()) return "";
  auto it = run.sentence->prompts.find(name);
  if (it == run.sentence->prompts.end()) {
    std::vector<std::string> names;
    for (const auto& [n, text] : run.sentence->prompts) names.push_back(n);
    throw user_error(run.dir + "/config_sentence_transformers.json", 0, "prompts",
                     "has no prompt '" + name + "'",
                     names.empty() ? std::string("the folder defines no prompts")
                                   : fmt::format("its prompts: {}", fmt::join(names, ", ")));
  }
  return it->second;
}

torch::Tensor embed_with_prompt(LoadedRun& run, std::vector<std::string> texts, const EncoderSpec& spec,
                                const std::string& prompt, bool normalize, const std::string& what) {
  // sentence-transformers prepends the prompt to the text; with include_prompt = false its pooling leaves out the
  // prompt's tokens and [CLS] (the prompt's length as tokenised alone, less its [SEP]).
  int64_t pool_skip = 0;
  if (!prompt.empty()) {
    for (auto& t : texts) t = prompt + t;
    if (!run.sentence->include_prompt)
      pool_skip = int64_t(encode_for_encoder(*run.tokenizer, prompt, spec.max_length).size()) - 1;
  }
  CountProgress progress(what);
  auto e = embed_texts(run.model, *run.tokenizer, texts, spec.max_length, spec.pooling, spec.batch_size, spec.device,
                       std::ref(progress), pool_skip);
  if (normalize && (!run.sentence || run.sentence->normalize))
    e = torch::nn::functional::normalize(e, torch::nn::functional::NormalizeFuncOptions().dim(1));
  return e.contiguous();
}

int64_t encode_file(LoadedRun& run, const EncodeRequest& request) {
  const EncoderSpec spec = spec_of(run, request.pooling, request.batch_size);
  auto e = embed_with_prompt(run, read_input_texts(request.in), spec, encode_prompt(run, request), request.normalize,
                             "encoding");
  write_npy_float32(request.out, e.data_ptr<float>(), e.size(0), e.size(1));
  return e.size(0);
}

}  // namespace spread
