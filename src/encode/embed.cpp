#include "spread/encode/embed.h"

#include <algorithm>
#include <numeric>

#include "spread/data/special_tokens.h"
#include "spread/encode/forward_memory.h"
#include "spread/model/eval_mode.h"
#include "spread/runtime/packed_linear.h"

namespace spread {

TextBatch pad_batch(const std::vector<const std::vector<int32_t>*>& seqs, int32_t pad_id, const torch::Device& device) {
  int64_t longest = 0;
  for (const auto* s : seqs) longest = std::max<int64_t>(longest, int64_t(s->size()));
  auto ids = torch::full({int64_t(seqs.size()), longest}, int64_t(std::max(pad_id, 0)), torch::kLong);
  auto mask = torch::zeros({int64_t(seqs.size()), longest}, torch::kBool);
  auto ids_a = ids.accessor<int64_t, 2>();
  auto mask_a = mask.accessor<bool, 2>();
  for (size_t b = 0; b < seqs.size(); ++b)
    for (size_t t = 0; t < seqs[b]->size(); ++t) {
      ids_a[int64_t(b)][int64_t(t)] = (*seqs[b])[t];
      mask_a[int64_t(b)][int64_t(t)] = true;
    }
  if (!device.is_cpu()) return {ids.to(device), mask.to(device)};
  return {ids, mask};
}

torch::Tensor embed_batch(Transformer& model, const TextBatch& batch, Pooling pooling, int64_t pool_skip) {
  auto out = model->forward(batch.ids, /*want_hidden=*/false, /*want_logits=*/false, batch.mask,
                            /*pack_padding=*/true);  // pooling reads the valid rows only
  if (pool_skip <= 0) return pool(pooling, out.final_hidden, batch.mask);
  auto pooled = batch.mask.clone();
  pooled.narrow(1, 0, std::min(pool_skip, pooled.size(1))).fill_(false);
  return pool(pooling, out.final_hidden, pooled);
}

torch::Tensor embed_sequences(Transformer& model, const std::vector<std::vector<int32_t>>& seqs, int32_t pad_id,
                              Pooling pooling, int64_t batch_size, const torch::Device& device,
                              const std::function<void(int64_t, int64_t)>& progress, int64_t pool_skip) {
  torch::NoGradGuard no_grad;
  const PackedWeightsScope packed;  // the weights do not change until the last batch
  EvalModeGuard eval_mode(model);
  const auto n = int64_t(seqs.size());
  // Longest first: similar lengths share a batch, and a too-large batch fails at once rather than at the end.
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return seqs[a].size() > seqs[b].size(); });
  if (n > 0) check_forward_memory(model->config(), std::min(batch_size, n), int64_t(seqs[size_t(order[0])].size()), false);
  torch::Tensor result;
  for (int64_t first = 0; first < n; first += batch_size) {
    const int64_t count = std::min(batch_size, n - first);
    std::vector<const std::vector<int32_t>*> batch;
    for (int64_t i = first; i < first + count; ++i) batch.push_back(&seqs[size_t(order[size_t(i)])]);
    auto e = embed_batch(model, pad_batch(batch, pad_id, device), pooling, pool_skip).to(torch::kCPU, torch::kFloat);
    if (!result.defined()) result = torch::empty({n, e.size(1)}, torch::kFloat);
    auto index = torch::tensor(std::vector<int64_t>(order.begin() + first, order.begin() + first + count), torch::kLong);
    result.index_copy_(0, index, e);
    if (progress) progress(first + count, n);
  }
  if (!result.defined()) result = torch::empty({0, model->config().n_embd}, torch::kFloat);
  return result;
}

std::vector<std::vector<int32_t>> tokenize_texts(const Tokenizer& tokenizer, const std::vector<std::string>& texts,
                                                 int64_t max_length) {
  std::vector<std::vector<int32_t>> out;
  out.reserve(texts.size());
  for (const auto& t : texts) {
    out.push_back(encode_for_encoder(tokenizer, t, max_length));
    if (out.back().empty()) out.back().push_back(std::max(tokenizer.special_ids().pad, 0));
  }
  return out;
}

torch::Tensor embed_texts(Transformer& model, const Tokenizer& tokenizer, const std::vector<std::string>& texts,
                          int64_t max_length, Pooling pooling, int64_t batch_size, const torch::Device& device,
                          const std::function<void(int64_t, int64_t)>& progress, int64_t pool_skip) {
  return embed_sequences(model, tokenize_texts(tokenizer, texts, max_length), tokenizer.special_ids().pad, pooling,
                         batch_size, device, progress, pool_skip);
}

}  // namespace spread
