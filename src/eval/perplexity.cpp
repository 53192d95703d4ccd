#include "spread/eval/perplexity.h"

#include <cmath>
#include <fmt/format.h>

#include "spread/encode/forward_memory.h"
#include "spread/model/eval_mode.h"
#include "spread/runtime/packed_linear.h"

namespace spread {
namespace {

EvalResult finish(double loss_sum, int64_t tokens, double bytes_per_token) {
  EvalResult r;
  r.tokens = tokens;
  r.loss = loss_sum / double(std::max<int64_t>(tokens, 1));
  r.ppl = std::exp(r.loss);
  // Token shards do not record the bytes of their text: bits per byte is then unknown (NaN; null in JSON).
  r.bpb = bytes_per_token > 0 ? r.loss / std::log(2.0) / bytes_per_token : std::nan("");
  return r;
}

double batch_loss_sum(Transformer& model, const Batch& b, const torch::Device& device) {
  auto out = model->forward(b.x.to(device), /*want_hidden=*/false, /*want_logits=*/true);
  return TransformerImpl::lm_loss(out.logits, b.y.to(device)).item<double>() * double(b.y.numel());
}

}  // namespace

std::string format_perplexity(double ppl) {
  return std::isfinite(ppl) && ppl < 1e6 ? fmt::format("{:.3f}", ppl) : fmt::format("{:.4g}", ppl);
}

EvalResult evaluate_batches(Transformer& model, const std::vector<Batch>& batches, double bytes_per_token,
                            const torch::Device& device) {
  torch::NoGradGuard no_grad;
  EvalModeGuard guard(model);
  const PackedWeightsScope packed;  // the weights do not change until the last batch
  double sum = 0;
  int64_t tokens = 0;
  for (const auto& b : batches) {
    sum += batch_loss_sum(model, b, device);
    tokens += b.y.numel();
  }
  return finish(sum, tokens, bytes_per_token);
}

EvalResult evaluate_split(Transformer& model, const TokenFile& tokens, int64_t batch_size, int64_t max_batches,
                          const torch::Device& device) {
  torch::NoGradGuard no_grad;
  EvalModeGuard guard(model);
  const PackedWeightsScope packed;  // the weights do not change until the last batch
  const int64_t block = model->config().block_size;
  const int64_t windows = count_windows(tokens, block);
  double sum = 0;
  int64_t count = 0, batches = 0;
  if (windows > 0) check_forward_memory(model->config(), std::min(batch_size, windows), block, /*logits=*/true);
  for (int64_t first = 0; first < windows; first += batch_size) {
    if (max_batches > 0 && batches++ >= max_batches) break;
    Batch b = sequential_batch(tokens, block, first, std::min(batch_size, windows - first));
    sum += batch_loss_sum(model, b, device);
    count += b.y.numel();
  }
  double bytes_per_token = double(tokens.source_bytes()) / double(tokens.size());
  return finish(sum, count, bytes_per_token);
}

}  // namespace spread
