// Padded batches in and out of ward_pool_many (formulas and guarantees in ward_batch.h and ward.h).
#include "spread/pooling/ward_batch.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <stdexcept>

namespace spread {
namespace {

// Document b's valid rows, in order, as a float64 matrix; `positions` gets where each row came from.
template <class T>
RowMatrixXd valid_rows_of(const T* data, const bool* valid, int64_t n, int64_t d, std::vector<int64_t>& positions) {
  for (int64_t t = 0; t < n; ++t)
    if (valid[t]) positions.push_back(t);
  RowMatrixXd doc(int64_t(positions.size()), d);
  for (int64_t r = 0; r < doc.rows(); ++r)
    doc.row(r) = Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>(data + positions[size_t(r)] * d, d).template cast<double>();
  return doc;
}

// Each document's valid rows. Converted document by document from the tokens' own float type: a float64 copy of
// the whole batch first cost a third of the time of pooling it.
std::vector<RowMatrixXd> valid_rows(const torch::Tensor& tokens, const torch::Tensor& mask,
                                    std::vector<std::vector<int64_t>>& positions) {
  torch::Tensor x = tokens.detach().to(torch::kCPU).contiguous();
  if (x.scalar_type() != torch::kFloat64) x = x.to(torch::kFloat32);  // half, bfloat16: widened once
  const torch::Tensor m = mask.defined() ? mask.to(torch::kCPU, torch::kBool).contiguous()
                                         : torch::ones({tokens.size(0), tokens.size(1)}, torch::kBool);
  const int64_t batch = x.size(0), n = x.size(1), d = x.size(2);
  std::vector<RowMatrixXd> docs;
  positions.assign(size_t(batch), {});
  for (int64_t b = 0; b < batch; ++b) {
    const bool* valid = m.data_ptr<bool>() + b * n;
    docs.push_back(x.scalar_type() == torch::kFloat64
                       ? valid_rows_of(x.data_ptr<double>() + b * n * d, valid, n, d, positions[size_t(b)])
                       : valid_rows_of(x.data_ptr<float>() + b * n * d, valid, n, d, positions[size_t(b)]));
  }
  return docs;
}

}  // namespace

WardBatch ward_pool_batch(const torch::Tensor& tokens, const torch::Tensor& mask, const WardBudget& budget,
                          const WardPoolOptions& opt) {
  if (tokens.dim() != 3 || !tokens.is_floating_point())
    throw std::invalid_argument("ward_pool_batch: tokens must be a floating [B, n, d] tensor");
  if (mask.defined() && (mask.dim() != 2 || mask.size(0) != tokens.size(0) || mask.size(1) != tokens.size(1)))
    throw std::invalid_argument("ward_pool_batch: mask must be [B, n] like tokens");
  std::vector<std::vector<int64_t>> positions;
  const std::vector<RowMatrixXd> docs = valid_rows(tokens, mask, positions);
  const std::vector<WardPooled> pooled = ward_pool_many(docs, budget, opt, at::get_num_threads());

  const int64_t batch = tokens.size(0), n = tokens.size(1), d = tokens.size(2);
  int64_t longest = 0;
  for (const WardPooled& p : pooled) longest = std::max<int64_t>(longest, p.vectors.rows());
  torch::Tensor vectors = torch::zeros({batch, longest, d}, torch::kFloat64);
  torch::Tensor out_mask = torch::zeros({batch, longest}, torch::kBool);
  torch::Tensor labels = torch::full({batch, n}, -1, torch::kInt64);
  auto label_of = labels.accessor<int64_t, 2>();
  for (int64_t b = 0; b < batch; ++b) {
    const WardPooled& p = pooled[size_t(b)];
    const int64_t rows = p.vectors.rows();
    if (rows > 0) {
      vectors[b].narrow(0, 0, rows).copy_(torch::from_blob(const_cast<double*>(p.vectors.data()), {rows, d},
                                                           torch::kFloat64));
      out_mask[b].narrow(0, 0, rows).fill_(true);
    }
    for (size_t r = 0; r < p.labels.size(); ++r) label_of[b][positions[size_t(b)][r]] = p.labels[r];
  }
  return {vectors.to(tokens.device(), tokens.scalar_type()), out_mask.to(tokens.device()),
          labels.to(tokens.device())};
}

}  // namespace spread
