#include "spread/losses/mlm.h"

#include <vector>

#include "spread/util/random.h"

namespace spread {
namespace {

// A uniform double in [0, 1) from a splitmix64 stream.
struct Stream {
  uint64_t state;
  uint64_t next() { return state = splitmix64(state); }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }
};

}  // namespace

MlmBatch mask_tokens(const torch::Tensor& ids, const torch::Tensor& valid, const SpecialIds& special, double mask_prob,
                     uint64_t seed) {
  auto inputs = ids.to(torch::kLong).contiguous().clone();
  auto targets = torch::full_like(inputs, -1);
  auto in = inputs.accessor<int64_t, 2>();
  auto tg = targets.accessor<int64_t, 2>();
  auto ok = valid.to(torch::kBool).contiguous();
  auto va = ok.accessor<bool, 2>();
  Stream rng{seed};
  const auto base_vocab = uint64_t(special.replacement_range());
  for (int64_t b = 0; b < inputs.size(0); ++b) {
    std::vector<int64_t> maskable, chosen;
    for (int64_t t = 0; t < inputs.size(1); ++t)
      if (va[b][t] && !special.is_special(int32_t(in[b][t]))) maskable.push_back(t);
    for (int64_t t : maskable)
      if (rng.uniform() < mask_prob) chosen.push_back(t);
    if (chosen.empty() && !maskable.empty()) chosen.push_back(maskable[rng.next() % maskable.size()]);
    for (int64_t t : chosen) {
      tg[b][t] = in[b][t];
      const double u = rng.uniform();
      if (u < 0.8) in[b][t] = special.mask;
      else if (u < 0.9) in[b][t] = int64_t(rng.next() % base_vocab);
    }
  }
  return {inputs, targets};
}

torch::Tensor mlm_loss(const torch::Tensor& final_hidden, const torch::Tensor& embedding, const torch::Tensor& targets) {
  return mlm_loss(final_hidden, targets, [&](const torch::Tensor& h) { return torch::matmul(h, embedding.t()); });
}

torch::Tensor mlm_loss(const torch::Tensor& final_hidden, const torch::Tensor& targets,
                       const std::function<torch::Tensor(const torch::Tensor&)>& logits) {
  auto flat_targets = targets.reshape({-1});
  auto chosen = flat_targets.ge(0).nonzero().squeeze(1);
  auto h = final_hidden.reshape({-1, final_hidden.size(-1)}).index_select(0, chosen);
  return torch::cross_entropy_loss(logits(h).to(torch::kFloat), flat_targets.index_select(0, chosen));
}

}  // namespace spread
