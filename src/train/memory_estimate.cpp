#include "spread/train/memory_estimate.h"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "spread/model/parameter_count.h"
#include "spread/run/setup.h"
#include "spread/runtime/devices.h"
#include "spread/runtime/memory.h"
#include "spread/config/objective.h"
#include "spread/util/error.h"
#include "spread/util/json_depth.h"

namespace fs = std::filesystem;

namespace spread {
namespace {

constexpr double kFloat = 4;  // bytes
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kRuntimeBytes = 400 * kMiB;
// A CUDA build maps CUDA's libraries, resident even on a machine without a GPU: `spread info` peaks at 166 MiB
// against Debian's LibTorch 1.13 and at 465 MiB against the CUDA wheel's 2.11.
constexpr double kCudaLibrariesBytes = 300 * kMiB;
constexpr int64_t kEncoderReservedIds = 6;  // [PAD] [CLS] [SEP] [MASK] [Q] [D]

// The negative* columns of a pair file's header (TSV, CSV) or of its first JSONL object's keys, as data/pairs.h
// reads them; 1 when the file cannot be read (the loader reports it).
int64_t negatives_in_header(const std::string& path) {
  std::ifstream in(path);
  std::string first;
  if (!std::getline(in, first)) return 1;
  std::vector<std::string> names;
  if (fs::path(path).extension() == ".jsonl") {
    if (json_too_deep(first)) return 1;
    const auto object = nlohmann::json::parse(first, nullptr, /*allow_exceptions=*/false);
    if (!object.is_object()) return 1;
    for (const auto& item : object.items()) names.push_back(item.key());
  } else {
    const char separator = fs::path(path).extension() == ".csv" ? ',' : '\t';
    std::istringstream fields(first);
    for (std::string field; std::getline(fields, field, separator);) names.push_back(field);
  }
  return std::count_if(names.begin(), names.end(), [](const std::string& n) { return n.rfind("negative", 0) == 0; });
}

// Hard negatives per example, as far as the recipe and the pair files' headers say.
int64_t negatives_of(const Recipe& r) {
  if (r.data.source == "sick") return r.data.hard_negatives ? 1 : 0;
  if (r.data.source != "pairs") return 0;
  if (!r.data.columns.empty()) return std::max<int64_t>(0, int64_t(r.data.columns.size()) - 2);
  return r.data.path.empty() ? 1 : negatives_in_header(r.data.path.front());
}

int64_t text_length(const Recipe& r) { return r.data.max_length > 0 ? r.data.max_length : r.model.block_size; }

double bytes_under(const fs::path& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return double(fs::file_size(path, ec));
  double total = 0;
  if (fs::is_directory(path, ec))
    for (const auto& entry : fs::recursive_directory_iterator(path, ec))
      if (entry.is_regular_file(ec)) total += double(entry.file_size(ec));
  return total;
}

double data_bytes(const Recipe& r) {
  double total = 0;
  if (r.data.source == "wordnet" || r.data.source == "wordnet_pairs") total += bytes_under("/usr/share/wordnet");
  for (const auto& p : r.data.path) total += bytes_under(p);
  return 6 * total;
}

std::string join_or(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
  return out;
}

struct Activations {
  double bytes = 0;
  bool from_width = true;  // false: the objective's own tensors (scores) dominate
};

Activations activation_bytes(const Recipe& r, int64_t vocab, int64_t world) {
  const auto& m = r.model;
  const MicroStepSizes sizes{double(r.train.batch_size), double(negatives_of(r)), double(world),
                             double(text_length(r)), double(vocab)};
  const ActivationShape shape = traits_of(r.train.objective).activations(r, sizes);
  const double C = double(m.n_embd), L = double(m.n_layer), tokens = shape.tokens;
  double per_token_layer = m.recompute ? 14 : 18;
  if (m.dropout > 0) per_token_layer += 3;
  if (r.train.precision == "bf16") per_token_layer += 4;
  double width = (L * per_token_layer + 8) * tokens * C * kFloat;
  // The fused CPU attention never keeps the probabilities; elsewhere recompute = false keeps them per layer.
  const bool fused_attention = r.run.device == "cpu";
  if (!m.recompute && !fused_attention) {
    const double T = shape.sequence_length;
    width += L * (tokens / T) * double(m.n_head) * T * T * kFloat;
  }
  const double logits = shape.logit_floats * kFloat, own = shape.own_floats * kFloat;
  Activations a;
  a.bytes = width + logits + own;
  a.from_width = own < width + logits;
  return a;
}

// "lower A, B or C[, or set D]": the keys that move the activations.
std::string activation_keys(const Recipe& r, bool from_width) {
  const ActivationShape shape = traits_of(r.train.objective).activations(r, MicroStepSizes{});
  std::vector<std::string> lower{"train.batch_size"};
  lower.insert(lower.end(), shape.length_keys.begin(), shape.length_keys.end());
  if (from_width) lower.insert(lower.end(), {"model.n_embd", "model.n_layer"});
  std::string keys = "lower " + join_or(lower);
  if (!shape.other_remedy.empty()) keys += ", or " + shape.other_remedy;
  if (!r.model.recompute) keys += ", or set model.recompute = true";
  return keys;
}

}  // namespace

double MemoryEstimate::peak() const { return runtime + data + states + std::max(activations, checkpoint); }

int64_t estimated_vocab_size(const Recipe& recipe) {
  if (recipe.model.vocab_size > 0) return recipe.model.vocab_size;
  const int64_t base = recipe.tokenizer.kind == "char" ? 256 : recipe.tokenizer.vocab_size;
  return base + (recipe.is_encoder_objective() ? kEncoderReservedIds : 0);
}

MemoryEstimate estimate_training_memory(const Recipe& recipe, int64_t vocab_size, int64_t world) {
  MemoryEstimate e;
  // Clamped: a recipe's sizes are integers of any size, and the estimate only has to be too large to fit.
  e.parameters = int64_t(std::min(parameter_count(model_config(recipe, vocab_size)), 9e18));
  const double P = double(e.parameters);
  e.runtime = kRuntimeBytes + (device_report().cuda_build ? kCudaLibrariesBytes : 0.0);
  e.data = data_bytes(recipe);
  e.states = 16 * P;
  e.checkpoint = 28 * P;
  const Activations a = activation_bytes(recipe, vocab_size, world);
  e.activations = a.bytes;
  const bool embedding_dominates = double(vocab_size) * double(recipe.model.n_embd) > P / 2;
  e.keys_to_change = e.states + e.checkpoint > e.activations
                         ? embedding_dominates ? "lower tokenizer.vocab_size or model.n_embd"
                                               : "lower model.n_embd or model.n_layer"
                         : activation_keys(recipe, a.from_width);
  return e;
}

MemoryEstimate check_training_memory(const Recipe& recipe, int64_t vocab_size, int64_t world, int64_t ranks_on_host) {
  const MemoryEstimate e = estimate_training_memory(recipe, vocab_size, world);
  if (!memory_checks_enabled()) return e;
  const AvailableMemory available = available_memory();
  const double need = e.peak() * double(ranks_on_host);
  if (available.bytes <= 0 || need <= available.bytes) return e;
  throw user_error(recipe.source, 0, "",
                   fmt::format("this run needs about {} ({}{:.1f}M parameters: {} weights, gradients and AdamW state, "
                               "{} activations, {} to save a checkpoint), more than the {} available ({})",
                               memory_size_text(need), ranks_on_host > 1 ? fmt::format("{} ranks x ", ranks_on_host) : "",
                               double(e.parameters) / 1e6, memory_size_text(e.states), memory_size_text(e.activations),
                               memory_size_text(e.checkpoint), memory_size_text(available.bytes), available.source),
                   e.keys_to_change + "; SPREAD_MEMORY_CHECK=0 skips this check");
}

}  // namespace spread
