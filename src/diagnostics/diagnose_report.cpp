// Per-layer diagnose report: computes it from token lists, prints it as a table, writes it as JSON.
#include "spread/diagnostics/report.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "spread/diagnostics/geometry.h"
#include "spread/util/error.h"
#include "spread/util/file.h"

namespace spread {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A non-owning [n, d] view of an Eigen (column-major) list for the torch-based geometry functions.
torch::Tensor tensor_view(const Eigen::MatrixXd& m) {
  return torch::from_blob(const_cast<double*>(m.data()), {m.rows(), m.cols()}, {1, m.rows()}, torch::kFloat64);
}

// The batch mean cosine of docs/design.md §7.1 over the lists: padded into one [texts, max tokens, d] batch with
// its mask.
double cross_text_mean_cos(const std::vector<Eigen::MatrixXd>& token_lists, uint64_t seed) {
  if (token_lists.size() < 2) return kNaN;
  int64_t longest = 0;
  for (const auto& x : token_lists) longest = std::max<int64_t>(longest, x.rows());
  const int64_t d = token_lists.front().cols();
  auto batch = torch::zeros({int64_t(token_lists.size()), longest, d}, torch::kFloat64);
  auto mask = torch::zeros({int64_t(token_lists.size()), longest}, torch::kBool);
  for (size_t i = 0; i < token_lists.size(); ++i) {
    const auto rows = token_lists[i].rows();
    batch[int64_t(i)].narrow(0, 0, rows).copy_(tensor_view(token_lists[i]));
    mask[int64_t(i)].narrow(0, 0, rows).fill_(true);
  }
  return batch_mean_cos(batch, mask, seed);
}

nlohmann::json summary_json(double mean, const Quantiles& q) {
  return {{"mean", mean}, {"p05", q.p05}, {"p25", q.p25}, {"p50", q.p50}, {"p75", q.p75}, {"p95", q.p95}};
}

std::string layer_label(const LayerReport& l) {
  if (l.after_final_norm) return "final";
  return l.layer >= 0 ? std::to_string(l.layer) : std::string("-");
}

nlohmann::json layer_json(const LayerReport& l) {
  nlohmann::json j;
  j["layer"] = l.layer >= 0 ? nlohmann::json(l.layer) : nlohmann::json(nullptr);
  j["after_final_norm"] = l.after_final_norm;
  j["texts"] = l.texts;
  j["tokens_mean"] = l.tokens_mean;
  j["pairs"] = l.socm.pairs;
  j["svd_pairs"] = l.socm.svd_pairs;
  j["texts_over_trace"] = l.socm.texts_over_trace;
  j["socm"] = summary_json(l.socm.socm, l.socm.socm_q);
  j["d_mu"] = summary_json(l.socm.d_mu, l.socm.d_mu_q);
  j["d_sigma"] = summary_json(l.socm.d_sigma, l.socm.d_sigma_q);
  j["mean_cos_incl"] = l.mean_cos_incl;
  j["mean_cos_excl"] = l.mean_cos_excl;
  j["concentration"] = l.concentration;
  j["batch_mean_cos"] = l.batch_mean_cos;
  return j;
}

std::string cell(double v, int width, int precision) {
  return std::isnan(v) ? fmt::format("{:>{}}", "-", width) : fmt::format("{:>{}.{}f}", v, width, precision);
}

}  // namespace

LayerReport diagnose_layer(int64_t layer, const std::vector<Eigen::MatrixXd>& token_lists, const SocmOptions& opt) {
  LayerReport r;
  r.layer = layer;
  r.texts = int64_t(token_lists.size());
  std::vector<SocmText> prepared;
  prepared.reserve(token_lists.size());
  double tokens = 0, cos_incl = 0, cos_excl = 0, conc = 0;
  int64_t excl_texts = 0;
  for (const auto& x : token_lists) {
    if (x.rows() == 0) throw std::invalid_argument("diagnose_layer: a token list without tokens");
    prepared.push_back(socm_prepare(x));
    const torch::Tensor t = tensor_view(x);
    tokens += double(x.rows());
    cos_incl += mean_cos_incl(t);
    conc += concentration(t);
    if (x.rows() >= 2) {
      cos_excl += mean_cos_excl(t);
      ++excl_texts;
    }
  }
  const double n = double(std::max<int64_t>(r.texts, 1));
  r.tokens_mean = r.texts ? tokens / n : kNaN;
  r.mean_cos_incl = r.texts ? cos_incl / n : kNaN;
  r.concentration = r.texts ? conc / n : kNaN;
  r.mean_cos_excl = excl_texts ? cos_excl / double(excl_texts) : kNaN;
  r.batch_mean_cos = cross_text_mean_cos(token_lists, opt.seed);
  r.socm = socm_summary(prepared, opt);
  return r;
}

std::string format_report(const DiagnoseReport& report) {
  const std::string kind = report.source_kind == "token_lists" ? "token lists" : report.source_kind;
  std::string out = fmt::format("{} {}", kind, report.source);
  if (report.step >= 0 && report.source_kind == "run") out += fmt::format(" (step {})", report.step);
  if (!report.texts.empty()) out += fmt::format(", texts {}", report.texts);
  const auto& o = report.options;
  out += o.max_pairs > 0 ? fmt::format("\nSOCM over a sample of up to {} pairs (seed {})", o.max_pairs, o.seed)
                         : std::string("\nSOCM over all pairs");
  out += o.paper_compatible ? ", paper_compatible (eps I as the reference code)\n\n" : "\n\n";
  out += fmt::format("{:>5} {:>6} {:>7} {:>8} {:>8} {:>26} {:>26} {:>8} {:>8} {:>9}\n", "layer", "texts", "tokens",
                     "pairs", "socm", "d_mu p05 / p50 / p95", "d_sigma p05 / p50 / p95", "cos_incl", "cos_excl",
                     "conc");
  for (const auto& l : report.layers) {
    const auto& s = l.socm;
    out += fmt::format("{:>5} {:>6} {} {:>8} {} {} {} {} {} {} {} {} {} {}\n",
                       layer_label(l), l.texts, cell(l.tokens_mean, 7, 1),
                       s.pairs, cell(s.socm, 8, 4), cell(s.d_mu_q.p05, 8, 4), cell(s.d_mu_q.p50, 8, 4),
                       cell(s.d_mu_q.p95, 8, 4), cell(s.d_sigma_q.p05, 8, 4), cell(s.d_sigma_q.p50, 8, 4),
                       cell(s.d_sigma_q.p95, 8, 4), cell(l.mean_cos_incl, 8, 4), cell(l.mean_cos_excl, 8, 4),
                       cell(l.concentration, 9, 4));
  }
  for (const auto& l : report.layers)
    if (l.socm.texts_over_trace > 0)
      out += fmt::format("warning: layer {}: {} of {} texts have tr Sigma > {} (concentration above it): their SOCM is "
                         "outside the range where the paper interprets it (d_sigma can exceed 1)\n",
                         layer_label(l), l.socm.texts_over_trace, l.texts,
                         kSocmTraceLimit);
  return out;
}

nlohmann::json report_json(const DiagnoseReport& report) {
  nlohmann::json j;
  j["source"] = {{"kind", report.source_kind}, {"path", report.source}};
  if (!report.texts.empty()) j["source"]["texts"] = report.texts;
  if (report.step >= 0) j["source"]["step"] = report.step;
  j["options"] = {{"pairs", report.options.max_pairs > 0 ? nlohmann::json(report.options.max_pairs) : "all"},
                  {"seed", report.options.seed},
                  {"paper_compatible", report.options.paper_compatible}};
  j["layers"] = nlohmann::json::array();
  for (const auto& l : report.layers) j["layers"].push_back(layer_json(l));
  return j;
}

void write_report_json(const DiagnoseReport& report, const std::string& path) {
  const std::string text = report_json(report).dump(2) + "\n";
  write_output_file(path, [&](std::ostream& out) { out << text; });
}

Eigen::MatrixXd token_list_from_tensor(const torch::Tensor& x) {
  if (x.dim() != 2) throw std::invalid_argument("token_list_from_tensor: expected [n, F]");
  // Transposed and contiguous, the float64 tensor has exactly Eigen's column-major layout.
  torch::Tensor t = x.detach().to(torch::kCPU, torch::kFloat64).t().contiguous();
  return Eigen::Map<const Eigen::MatrixXd>(t.data_ptr<double>(), x.size(0), x.size(1));
}

std::vector<Eigen::MatrixXd> token_lists_from_batch(const torch::Tensor& hidden, const torch::Tensor& mask) {
  if (hidden.dim() != 3) throw std::invalid_argument("token_lists_from_batch: hidden must be [B, T, F]");
  std::vector<Eigen::MatrixXd> lists;
  for (int64_t b = 0; b < hidden.size(0); ++b) {
    torch::Tensor h = hidden[b];
    if (mask.defined()) h = h.index({mask[b].to(torch::kCPU, torch::kBool).to(h.device())});
    lists.push_back(token_list_from_tensor(h));
  }
  return lists;
}

}  // namespace spread
