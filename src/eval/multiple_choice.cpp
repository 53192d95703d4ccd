#include "spread/eval/multiple_choice.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>

#include "spread/data/text_check.h"
#include "spread/model/eval_mode.h"
#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_depth.h"

namespace spread {
namespace {

constexpr uint64_t kMaxChoicesBytes = uint64_t(1) << 30;

UserError line_error(const std::string& path, int line, const std::string& key, const std::string& problem) {
  return user_error(path, line, key, problem,
                    R"(each line is {"context": "...", "endings": ["...", "..."], "label": INDEX})");
}

ChoiceItem parse_item(const std::string& text, const std::string& path, int line) {
  refuse_deep_json(text, path, line);
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw line_error(path, line, "", "not a JSON object");
  ChoiceItem item;
  const auto context = j.find("context");
  if (context == j.end() || !context->is_string() || context->get<std::string>().empty())
    throw line_error(path, line, "context", "missing, not a string, or empty");
  item.context = context->get<std::string>();
  const auto endings = j.find("endings");
  if (endings == j.end() || !endings->is_array() || endings->size() < 2)
    throw line_error(path, line, "endings", "must be an array of at least two strings");
  for (const auto& e : *endings) {
    if (!e.is_string() || e.get<std::string>().empty())
      throw line_error(path, line, "endings", "every ending must be a non-empty string");
    item.endings.push_back(e.get<std::string>());
  }
  const auto label = j.find("label");
  if (label == j.end() || !label->is_number_integer() || label->get<int64_t>() < 0 ||
      label->get<int64_t>() >= int64_t(item.endings.size()))
    throw line_error(path, line, "label", fmt::format("must be an index into the {} endings", item.endings.size()));
  item.label = label->get<int64_t>();
  return item;
}

// One (context, ending) pair as the model reads it: the input ids and how many of its last positions predict the
// ending's tokens (`targets`).
struct Sequence {
  std::vector<int32_t> input;
  std::vector<int32_t> targets;
};

Sequence make_sequence(const Tokenizer& tokenizer, std::string context, std::string ending, int64_t block) {
  const size_t kept = context.find_last_not_of(" \t\n\r\f\v");
  const size_t spaces = kept == std::string::npos ? context.size() : context.size() - kept - 1;
  if (spaces > 0) {
    ending = context.substr(context.size() - spaces) + ending;
    context.resize(context.size() - spaces);
  }
  std::vector<int32_t> tokens = tokenizer.encode(context);
  const std::vector<int32_t> whole = tokenizer.encode(context + ending);
  Sequence s;
  s.targets.assign(whole.begin() + int64_t(std::min(tokens.size(), whole.size())), whole.end());
  // The model reads the context's own tokens, then the ending's: not `whole`, whose tokens at the boundary may
  // differ (" a" + "n elephant" is " an elephant" in `whole`).
  tokens.insert(tokens.end(), s.targets.begin(), s.targets.end());
  if (tokens.size() > size_t(block) + 1) tokens.erase(tokens.begin(), tokens.end() - (block + 1));
  s.input.assign(tokens.begin(), tokens.end() - 1);
  return s;
}

// The summed log-probabilities of each sequence's targets, `batch` sequences right-padded into one forward pass
// (causal attention: the padding after a sequence never reaches its positions).
std::vector<double> score_batch(Transformer& model, const Sequence* batch, size_t count, const torch::Device& device) {
  size_t longest = 0;
  for (size_t b = 0; b < count; ++b) longest = std::max(longest, batch[b].input.size());
  auto ids = torch::zeros({int64_t(count), int64_t(longest)}, torch::kLong);
  auto acc = ids.accessor<int64_t, 2>();
  for (size_t b = 0; b < count; ++b)
    for (size_t t = 0; t < batch[b].input.size(); ++t) acc[int64_t(b)][int64_t(t)] = batch[b].input[t];
  const auto logp = torch::log_softmax(model->forward(ids.to(device), false, true).logits.to(torch::kFloat), -1).cpu();
  std::vector<double> out;
  for (size_t b = 0; b < count; ++b) {
    const Sequence& s = batch[b];
    const int64_t n = int64_t(s.targets.size()), end = int64_t(s.input.size());
    const auto targets = torch::tensor(std::vector<int64_t>(s.targets.begin(), s.targets.end()), torch::kLong);
    out.push_back(logp[int64_t(b)].narrow(0, end - n, n).gather(1, targets.unsqueeze(1)).sum().item<double>());
  }
  return out;
}

// Python's len() of a checked UTF-8 string: its code points.
size_t utf8_length(const std::string& text) {
  return size_t(std::count_if(text.begin(), text.end(), [](char c) { return (uint8_t(c) & 0xC0) != 0x80; }));
}

size_t argmax(const std::vector<double>& v) { return size_t(std::max_element(v.begin(), v.end()) - v.begin()); }

}  // namespace

std::vector<ChoiceItem> read_choices(const std::string& path) {
  require_regular_file(path);
  const auto bytes = read_regular_file(path, kMaxChoicesBytes);
  if (!bytes) throw user_error(path, 0, "--choices", "cannot read the file", "check the path");
  check_text_file(*bytes, path, "--choices");
  std::vector<ChoiceItem> items;
  size_t start = 0;
  for (int line = 1; start < bytes->size(); ++line) {
    const size_t end = std::min(bytes->find('\n', start), bytes->size());
    const std::string text = bytes->substr(start, end - start);
    start = end + 1;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    items.push_back(parse_item(text, path, line));
  }
  if (items.empty()) throw user_error(path, 0, "--choices", "holds no items", "give a JSONL file of items");
  return items;
}

ChoiceResult evaluate_choices(Transformer& model, const Tokenizer& tokenizer, const std::vector<ChoiceItem>& items,
                              int64_t batch_size, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  EvalModeGuard guard(model);
  const int64_t block = model->config().block_size;
  std::vector<Sequence> sequences;
  std::vector<std::pair<size_t, size_t>> owner;  // (item, ending) of each sequence
  for (size_t i = 0; i < items.size(); ++i)
    for (size_t e = 0; e < items[i].endings.size(); ++e) {
      sequences.push_back(make_sequence(tokenizer, items[i].context, items[i].endings[e], block));
      const size_t n = sequences.back().targets.size();
      if (n == 0 || n > size_t(block))
        throw UserError(fmt::format("--choices: item {} ending {} has {} tokens of its own after the context; it "
                                    "needs 1 to the model's block size ({})", i + 1, e + 1, n, block));
      owner.emplace_back(i, e);
    }
  ChoiceResult r;
  r.items = int64_t(items.size());
  for (const auto& item : items) {
    r.loglik.emplace_back(item.endings.size(), 0.0);
    r.tokens.emplace_back(item.endings.size(), 0);
  }
  const auto start = std::chrono::steady_clock::now();
  for (size_t first = 0; first < sequences.size(); first += size_t(batch_size)) {
    const size_t end = std::min(sequences.size(), first + size_t(batch_size));
    const std::vector<double> scores = score_batch(model, sequences.data() + first, end - first, device);
    for (size_t k = first; k < end; ++k) {
      r.loglik[owner[k].first][owner[k].second] = scores[k - first];
      r.tokens[owner[k].first][owner[k].second] = int64_t(sequences[k].targets.size());
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cerr << fmt::format("choices: {}/{} endings scored, {:.0f} endings/s, ETA {:.0f}s\n", end, sequences.size(),
                             double(end) / s, s / double(end) * double(sequences.size() - end));
  }
  int64_t hits = 0, hits_norm = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    std::vector<double> norm;
    for (size_t e = 0; e < items[i].endings.size(); ++e)
      norm.push_back(r.loglik[i][e] / double(utf8_length(items[i].endings[e])));
    hits += int64_t(argmax(r.loglik[i]) == size_t(items[i].label));
    hits_norm += int64_t(argmax(norm) == size_t(items[i].label));
  }
  r.acc = double(hits) / double(items.size());
  r.acc_norm = double(hits_norm) / double(items.size());
  return r;
}

}  // namespace spread
