#pragma once
// The report of `spread diagnose`: per layer, SOCM over pairs of texts (mean, and quantiles of socm, d_mu and
// d_sigma; docs/design.md §7.3), mean cosine within texts with and without self pairs (§7.1) and concentration (§7.2),
// each a mean over texts. Printed as a table on the console and written as JSON.
#include <Eigen/Core>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "spread/diagnostics/socm.h"

namespace spread {

struct LayerReport {
  int64_t layer = -1;        // 0 = embeddings, i = block i; -1 = token lists given directly (JSON null)
  bool after_final_norm = false;  // the state after the final norm (layer = blocks + 1), what pooling reads
  int64_t texts = 0;
  double tokens_mean = 0;    // mean tokens per text
  SocmSummary socm;
  double mean_cos_incl = 0;  // mean over texts
  double mean_cos_excl = 0;  // mean over texts with at least two tokens (NaN when none has)
  double concentration = 0;  // mean over texts of S(X)/||mu||^2
  double batch_mean_cos = 0;  // cross-text: tokens of different texts (docs/design.md §7.1; NaN for < 2 texts)
};

struct DiagnoseReport {
  std::string source_kind;  // "run", "model" (a model folder) or "token_lists"
  std::string source;       // the run directory or the directory of .npy files
  std::string texts;        // the texts file or "wordnet"; empty for token lists
  int64_t step = -1;        // checkpoint step of the run; -1 for token lists
  SocmOptions options;
  std::vector<LayerReport> layers;
};

// Every diagnostic of one layer over `token_lists` (one n x d list per text, n >= 1, the same d for all).
LayerReport diagnose_layer(int64_t layer, const std::vector<Eigen::MatrixXd>& token_lists, const SocmOptions& opt);

std::string format_report(const DiagnoseReport& report);  // the console table
nlohmann::json report_json(const DiagnoseReport& report);  // NaN becomes null
void write_report_json(const DiagnoseReport& report, const std::string& path);  // replaced whole (util/file.h)

// [n, F] tensor of any float dtype and device -> n x F float64 list.
Eigen::MatrixXd token_list_from_tensor(const torch::Tensor& x);
// hidden [B, T, F], mask [B, T] (true = valid token; undefined = all valid) -> one list per sequence of its valid
// tokens, e.g. the probe batch's last layer for socm_means.
std::vector<Eigen::MatrixXd> token_lists_from_batch(const torch::Tensor& hidden, const torch::Tensor& mask);

}  // namespace spread
