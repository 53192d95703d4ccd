#include "spread/model/generate.h"

namespace spread {

std::vector<int32_t> generate(Transformer& model, std::vector<int32_t> ids, const SampleOptions& o,
                              const torch::Device& device, const std::function<void(int32_t)>& on_token) {
  torch::NoGradGuard no_grad;
  model->eval();
  auto gen = at::detail::createCPUGenerator(o.seed);
  const int64_t block = model->config().block_size;
  for (int64_t i = 0; i < o.max_new_tokens; ++i) {
    const size_t context = std::min<size_t>(ids.size(), size_t(block));
    std::vector<int64_t> window(ids.end() - std::ptrdiff_t(context), ids.end());
    auto idx = torch::tensor(window, torch::kLong).view({1, -1}).to(device);
    auto logits = model->forward(idx).logits.select(1, -1).squeeze(0).to(torch::kCPU, torch::kFloat);
    if (o.vocab_limit > 0 && o.vocab_limit < logits.size(0)) logits = logits.narrow(0, 0, o.vocab_limit);
    int64_t next;
    if (o.temperature <= 0) {
      next = logits.argmax().item<int64_t>();
    } else {
      logits = logits / o.temperature;
      if (o.top_k > 0 && o.top_k < logits.size(0)) {
        auto kth = std::get<0>(logits.topk(o.top_k)).index({-1});
        logits = logits.masked_fill(logits < kth, -std::numeric_limits<float>::infinity());
      }
      next = torch::multinomial(torch::softmax(logits, -1), 1, false, gen).item<int64_t>();
    }
    ids.push_back(int32_t(next));
    if (on_token) on_token(int32_t(next));
  }
  return ids;
}

}  // namespace spread
