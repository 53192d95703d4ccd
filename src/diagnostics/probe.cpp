#include "spread/diagnostics/probe.h"

#include "spread/diagnostics/geometry.h"
#include "spread/diagnostics/socm.h"
#include "spread/model/eval_mode.h"

namespace spread {
namespace {

// SOCM over the valid rows of each text ([B, T, F] with a [B, T] mask), with the quantiles of its parts (the
// median of d_mu separates a global collapse, every text mean at one point, from SOCM's second-order collapse).
SocmSummary socm_of_texts(const torch::Tensor& hidden, const torch::Tensor& valid) {
  auto h = hidden.to(torch::kCPU, torch::kDouble).contiguous();
  auto v = valid.to(torch::kCPU);
  std::vector<SocmText> texts;
  for (int64_t b = 0; b < h.size(0); ++b) {
    auto rows = h[b].index({v[b]}).contiguous();
    if (rows.size(0) == 0) continue;
    texts.push_back(socm_prepare(Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
        rows.data_ptr<double>(), rows.size(0), rows.size(1))));
  }
  return socm_summary(texts);
}

// key_padding: passed to the model (undefined = no padding); valid: the rows that enter the statistics.
nlohmann::json probe_states(Transformer& model, const torch::Tensor& ids, const torch::Tensor& key_padding,
                            const torch::Tensor& valid, const DiagnosticsConfig& config, uint64_t seed,
                            const torch::Device& device) {
  torch::NoGradGuard no_grad;
  const auto out = [&] {
    EvalModeGuard eval_mode(model);
    return model->forward(ids.to(device), /*want_hidden=*/true, /*want_logits=*/false,
                          key_padding.defined() ? key_padding.to(device) : key_padding);
  }();
  nlohmann::json line;
  std::vector<double> mean_cos, mean_cos_incl, batch_mean_cos, concentration;
  for (const auto& h : out.hidden) {
    GeometryStats s = geometry_stats(h.to(torch::kCPU), valid, seed, config.max_pairs);
    mean_cos.push_back(s.mean_cos_excl);
    mean_cos_incl.push_back(s.mean_cos_incl);
    batch_mean_cos.push_back(s.batch_mean_cos);
    concentration.push_back(s.concentration);
  }
  line["mean_cos"] = mean_cos;
  line["mean_cos_incl"] = mean_cos_incl;
  line["batch_mean_cos"] = batch_mean_cos;
  line["concentration"] = concentration;
  const GeometryStats final_stats = geometry_stats(out.final_hidden.to(torch::kCPU), valid, seed, config.max_pairs);
  line["mean_cos_final"] = final_stats.mean_cos_excl;
  line["batch_mean_cos_final"] = final_stats.batch_mean_cos;  // cross-text: tokens of different texts
  if (config.socm) {
    SocmSummary s = socm_of_texts(out.final_hidden, valid);
    line["socm"] = s.socm;
    line["socm_d_mu"] = s.d_mu;
    line["socm_d_mu_median"] = s.d_mu_q.p50;
    line["socm_d_sigma"] = s.d_sigma;
    line["socm_texts_over_trace"] = s.texts_over_trace;  // tr Sigma > 2: outside the paper's range (socm.h)
  }
  return line;
}

}  // namespace

nlohmann::json probe_text_diagnostics(Transformer& model, const torch::Tensor& ids, const torch::Tensor& valid,
                                      const DiagnosticsConfig& config, uint64_t seed, const torch::Device& device) {
  return probe_states(model, ids, valid, valid.to(torch::kCPU), config, seed, device);
}

nlohmann::json probe_diagnostics(Transformer& model, const Batch& probe, const DiagnosticsConfig& config,
                                 uint64_t seed, const torch::Device& device) {
  auto all_valid = torch::ones({probe.x.size(0), probe.x.size(1)}, torch::kBool);
  return probe_states(model, probe.x, {}, all_valid, config, seed, device);
}

}  // namespace spread
