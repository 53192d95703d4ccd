#include "spread/encode/multi_vector.h"

#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <numeric>

#include "spread/data/special_tokens.h"
#include "spread/encode/forward_memory.h"
#include "spread/model/eval_mode.h"
#include "spread/runtime/packed_linear.h"
#include "spread/util/error.h"

namespace spread {
namespace {

void require_markers(const SpecialIds& s) {
  if (!s.has_markers())
    throw user_error("tokenizer.json", 0, "special_tokens", "this run's tokenizer has no [Q] / [D] ids (it was built "
                     "before spread reserved them)", "pretrain the backbone again with this version of spread");
}

// Right-pads seqs to `length` (0 = the longest) with `fill`; attend marks the real tokens.
TokenBatch pad_tokens(const std::vector<const std::vector<int32_t>*>& seqs, int64_t length, int32_t fill) {
  for (const auto* s : seqs) length = std::max<int64_t>(length, int64_t(s->size()));
  const auto B = int64_t(seqs.size());
  auto ids = torch::full({B, length}, int64_t(fill), torch::kLong);
  auto attend = torch::zeros({B, length}, torch::kBool);
  auto ids_a = ids.accessor<int64_t, 2>();
  auto attend_a = attend.accessor<bool, 2>();
  for (int64_t b = 0; b < B; ++b)
    for (size_t t = 0; t < seqs[size_t(b)]->size(); ++t) {
      ids_a[b][int64_t(t)] = (*seqs[size_t(b)])[t];
      attend_a[b][int64_t(t)] = true;
    }
  return {ids, attend, attend};
}

TokenBatch to_device(TokenBatch b, const torch::Device& device) {
  if (device.is_cpu()) return b;
  return {b.ids.to(device), b.attend.to(device), b.score.to(device)};
}

RowMatrixXd to_matrix(const torch::Tensor& rows) {
  auto x = rows.to(torch::kCPU, torch::kDouble).contiguous();
  return Eigen::Map<const RowMatrixXd>(x.data_ptr<double>(), x.size(0), x.size(1));
}

}  // namespace

std::vector<bool> punctuation_ids(const Tokenizer& tokenizer) {
  const SpecialIds s = tokenizer.special_ids();
  const int64_t base = s.present() ? s.pad : tokenizer.vocab_size();
  std::vector<bool> skip(size_t(tokenizer.vocab_size()), false);
  for (int64_t id = 0; id < base; ++id) {
    std::string text = tokenizer.decode({int32_t(id)});
    bool any = false, all = true;
    for (unsigned char c : text) {
      if (std::isspace(c)) continue;
      any = true;
      all = all && c < 128 && std::ispunct(c);
    }
    skip[size_t(id)] = any && all;
  }
  return skip;
}

std::vector<int32_t> query_tokens(const Tokenizer& tokenizer, const std::string& text, const MultiVectorSpec& spec) {
  require_markers(tokenizer.special_ids());
  return encode_for_encoder(tokenizer, text, spec.query_length, tokenizer.special_ids().query);
}

std::vector<int32_t> document_tokens(const Tokenizer& tokenizer, const std::string& text, const MultiVectorSpec& spec) {
  require_markers(tokenizer.special_ids());
  return encode_for_encoder(tokenizer, text, spec.document_length, tokenizer.special_ids().document);
}

TokenBatch query_batch(const std::vector<const std::vector<int32_t>*>& seqs, const SpecialIds& special,
                       const MultiVectorSpec& spec) {
  if (!spec.query_expansion) return pad_tokens(seqs, 0, special.pad);
  TokenBatch b = pad_tokens(seqs, spec.query_length, special.mask);
  b.score = torch::ones_like(b.attend);
  return b;
}

TokenBatch document_batch(const std::vector<const std::vector<int32_t>*>& seqs, const SpecialIds& special,
                          const MultiVectorSpec& spec) {
  TokenBatch b = pad_tokens(seqs, 0, special.pad);
  if (spec.skip.empty()) return b;
  auto skip = torch::zeros_like(b.attend);
  auto ids = b.ids.accessor<int64_t, 2>();
  auto skip_a = skip.accessor<bool, 2>();
  for (int64_t i = 0; i < ids.size(0); ++i)
    for (int64_t t = 0; t < ids.size(1); ++t)
      skip_a[i][t] = ids[i][t] >= 0 && ids[i][t] < int64_t(spec.skip.size()) && spec.skip[size_t(ids[i][t])];
  b.score = b.attend & skip.logical_not();
  return b;
}

torch::Tensor encode_tokens(Transformer& model, const TokenBatch& batch) {
  // Packed unless a scored row is a key-masked one (queries expanded with [MASK] that attend to nothing).
  const bool scores_padding = (batch.score & batch.attend.logical_not()).any().item<bool>();
  auto out = model->forward(batch.ids, /*want_hidden=*/false, /*want_logits=*/false, batch.attend, !scores_padding);
  return model->token_vectors(out.final_hidden);
}

std::pair<torch::Tensor, torch::Tensor> encode_queries(Transformer& model, const Tokenizer& tokenizer,
                                                       const std::vector<std::string>& texts,
                                                       const MultiVectorSpec& spec) {
  std::vector<std::vector<int32_t>> seqs;
  for (const auto& t : texts) seqs.push_back(query_tokens(tokenizer, t, spec));
  std::vector<torch::Tensor> vectors, masks;
  if (!seqs.empty())
    check_forward_memory(model->config(), std::min(spec.batch_size, int64_t(seqs.size())), spec.query_length, false);
  for (size_t first = 0; first < seqs.size(); first += size_t(spec.batch_size)) {
    std::vector<const std::vector<int32_t>*> batch;
    for (size_t i = first; i < std::min(seqs.size(), first + size_t(spec.batch_size)); ++i) batch.push_back(&seqs[i]);
    auto b = to_device(query_batch(batch, tokenizer.special_ids(), spec), spec.device);
    // Every batch padded to the query length, so the batches concatenate.
    if (b.ids.size(1) < spec.query_length) {
      const int64_t extra = spec.query_length - b.ids.size(1);
      b.ids = torch::constant_pad_nd(b.ids, {0, extra}, 0);
      b.attend = torch::constant_pad_nd(b.attend, {0, extra}, 0);
      b.score = torch::constant_pad_nd(b.score, {0, extra}, 0);
    }
    vectors.push_back(encode_tokens(model, b).to(torch::kCPU, torch::kFloat));
    masks.push_back(b.score.to(torch::kCPU));
  }
  return {torch::cat(vectors), torch::cat(masks)};
}

std::vector<RowMatrixXd> encode_documents(Transformer& model, const Tokenizer& tokenizer,
                                          const std::vector<std::string>& texts, const MultiVectorSpec& spec,
                                          const std::function<void(int64_t, int64_t)>& progress) {
  torch::NoGradGuard no_grad;
  const PackedWeightsScope packed;  // the weights do not change until the last batch
  EvalModeGuard eval_mode(model);
  std::vector<std::vector<int32_t>> seqs;
  for (const auto& t : texts) seqs.push_back(document_tokens(tokenizer, t, spec));
  const auto n = int64_t(seqs.size());
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return seqs[a].size() > seqs[b].size(); });
  std::vector<RowMatrixXd> out(static_cast<size_t>(n));
  if (n > 0)
    check_forward_memory(model->config(), std::min(spec.batch_size, n), int64_t(seqs[size_t(order[0])].size()), false);
  for (int64_t first = 0; first < n; first += spec.batch_size) {
    const int64_t count = std::min(spec.batch_size, n - first);
    std::vector<const std::vector<int32_t>*> batch;
    for (int64_t i = first; i < first + count; ++i) batch.push_back(&seqs[size_t(order[size_t(i)])]);
    TokenBatch b = to_device(document_batch(batch, tokenizer.special_ids(), spec), spec.device);
    auto vectors = encode_tokens(model, b).to(torch::kCPU);
    auto score = b.score.to(torch::kCPU);
    for (int64_t i = 0; i < count; ++i)
      out[size_t(order[size_t(first + i)])] = to_matrix(vectors[i].index({score[i]}));
    if (progress) progress(first + count, n);
  }
  return out;
}

}  // namespace spread
