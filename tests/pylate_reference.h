#pragma once
// A run's late-interaction encoding judged by pylate.models.ColBERT's, as tests/oracles/hf_model_ref.py's `pylate`
// command writes it: shared by the tests of tiny random folders (test_hf_import.cpp) and of the real model
// (test_real_model.cpp).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "spread/encode/multi_vector.h"
#include "spread/interchange/loaded_run.h"
#include "spread/tasks/maxsim.h"

namespace spread::testing {

// A JSON list of rows as a float32 matrix.
inline torch::Tensor matrix(const nlohmann::json& rows) {
  std::vector<float> flat;
  int64_t n = 0;
  for (const auto& row : rows) {
    for (const auto& v : row) flat.push_back(v.get<float>());
    ++n;
  }
  return torch::tensor(flat).view({n, -1});
}

// The largest absolute difference, or 1e30 (and a failure) for tensors of different shapes.
inline double max_abs(const torch::Tensor& a, const torch::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  if (a.sizes() != b.sizes()) return 1e30;
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

// Spread's multi-vector encoding of `run` against PyLate's: the ids PyLate feeds (prefix token after [CLS], [MASK]
// expansion, truncation), the token vectors encode returns (documents without the skiplist's), and MaxSim scores,
// each within `tol`. Returns spread's scores [query][doc].
inline std::vector<std::vector<double>> expect_colbert_matches(LoadedRun& run, const nlohmann::json& ref,
                                                                double tol = 1e-5) {
  const MultiVectorSpec spec = multi_vector_spec(run.recipe, *run.tokenizer, torch::kCPU);
  const auto special = run.tokenizer->special_ids();
  torch::NoGradGuard no_grad;
  auto vectors = [&](const nlohmann::json& item, bool query) {
    const std::string text = item.at("text").get<std::string>();
    const auto ids = query ? query_tokens(*run.tokenizer, text, spec) : document_tokens(*run.tokenizer, text, spec);
    const auto batch = query ? query_batch({&ids}, special, spec) : document_batch({&ids}, special, spec);
    const auto fed = batch.ids[0];
    EXPECT_EQ(std::vector<int64_t>(fed.data_ptr<int64_t>(), fed.data_ptr<int64_t>() + fed.numel()),
              item.at("ids").get<std::vector<int64_t>>()) << text;
    auto kept = torch::tensor(item.at("kept").get<std::vector<int64_t>>()).to(torch::kBool);
    EXPECT_TRUE(torch::equal(batch.score[0], kept)) << text;
    auto v = encode_tokens(run.model, batch)[0].index({batch.score[0]});
    EXPECT_LE(max_abs(v, matrix(item.at("vectors"))), tol) << text;
    return v.to(torch::kDouble);
  };
  std::vector<torch::Tensor> queries, docs;
  for (const auto& q : ref.at("queries")) queries.push_back(vectors(q, true));
  for (const auto& d : ref.at("docs")) docs.push_back(vectors(d, false));
  std::vector<std::vector<double>> scores(queries.size());
  for (size_t i = 0; i < queries.size(); ++i)
    for (size_t j = 0; j < docs.size(); ++j) {
      scores[i].push_back(std::get<0>(queries[i].matmul(docs[j].t()).max(1)).sum().item<double>());
      EXPECT_NEAR(scores[i][j], ref.at("scores")[i][j].get<double>(), tol) << i << ", " << j;
    }
  return scores;
}

}  // namespace spread::testing
