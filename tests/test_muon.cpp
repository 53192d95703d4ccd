// Muon (train/optimizer.h) against torch.optim.Muon of the reference environment (tests/oracles/muon_ref.py), and its
// wiring: which parameters it updates, and that a run with it resumes bitwise.
#include <gtest/gtest.h>
#include "test_paths.h"
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "python_env.h"
#include "spread/config/recipe.h"
#include "spread/data/safetensors.h"
#include "spread/model/transformer.h"
#include "spread/run/setup.h"
#include "spread/runtime/direct_mm.h"
#include "spread/train/optimizer.h"
#include "spread/train/step.h"

namespace fs = std::filesystem;

namespace {

struct Case {
  double momentum;
  bool nesterov;
  int64_t ns_steps;
  double weight_decay;
  std::string adjust;
};

std::string case_name(const Case& c) {
  return "momentum " + std::to_string(c.momentum) + (c.nesterov ? ", nesterov" : "") + ", " +
         std::to_string(c.ns_steps) + " NS steps, weight decay " + std::to_string(c.weight_decay) + ", " + c.adjust;
}

const Case kCases[] = {{0.95, true, 5, 0.1, "original"},
                       {0.9, false, 3, 0.0, "original"},
                       {0.95, true, 5, 0.01, "match_rms_adamw"}};
constexpr int kCaseCount = 3;

// The reference's tensors for every case (one Python run, kept for the tests that follow), or an empty map
// without the environment (the tests skip).
const spread::NamedTensors& reference() {
  static const spread::NamedTensors tensors = [] {
    std::string why;
    const std::string python = spread::testing::reference_python({"torch", "safetensors"}, &why);
    if (python.empty()) return spread::NamedTensors{};
    const fs::path out = fs::temp_directory_path() / ("spread_muon_ref_" + std::to_string(::getpid()) + ".st");
    std::string cmd = "'" + python + "' '" + spread::testing::oracle_script("muon_ref.py") + "' '" +
                      out.string() + "'";
    for (const Case& c : kCases)
      cmd += " " + std::to_string(c.momentum) + "," + (c.nesterov ? "1" : "0") + "," + std::to_string(c.ns_steps) +
             "," + std::to_string(c.weight_decay) + "," + c.adjust;
    if (std::system(cmd.c_str()) != 0) {
      ADD_FAILURE() << "the reference failed: " << cmd;
      return spread::NamedTensors{};
    }
    spread::NamedTensors t = spread::read_safetensors(out.string());
    fs::remove(out);
    return t;
  }();
  return tensors;
}

// spread's Muon on the reference's initial matrices and gradients; returns the matrices and momentum buffers.
std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> run_spread(const spread::NamedTensors& ref,
                                                                              const Case& c, bool ns_bf16) {
  std::vector<torch::Tensor> params;
  for (int i = 0; i < 3; ++i) params.push_back(ref.at("param." + std::to_string(i) + ".initial").clone());
  spread::MuonOptions o;
  o.momentum = c.momentum;
  o.nesterov = c.nesterov;
  o.ns_steps = c.ns_steps;
  o.ns_bf16 = ns_bf16;
  o.match_rms_adamw = c.adjust == "match_rms_adamw";
  spread::FlatOptimizer flat;
  flat.add_muon_group("muon", params, {1.0, 0, 0, 0, c.weight_decay}, o);
  const torch::Tensor lrs = ref.at("lr");
  for (int64_t k = 0; k < lrs.numel(); ++k) {
    flat.set_lr_scale(lrs[k].item<double>());
    flat.zero_grad();
    for (int i = 0; i < 3; ++i)
      params[i].mutable_grad().copy_(ref.at("grad." + std::to_string(i) + ".step." + std::to_string(k)));
    flat.step();
  }
  std::vector<torch::Tensor> bufs;
  int64_t offset = 0;
  for (const auto& p : params) {
    bufs.push_back(flat.groups()[0].exp_avg.narrow(0, offset, p.numel()).view(p.sizes()));
    offset += p.numel();
  }
  return {params, bufs};
}

}  // namespace

// Every Newton-Schulz product is rounded to bfloat16 as torch's are, so the matrices agree far inside the gap
// between bfloat16 and float64 (about 2e-4 here, against updates of about 2e-2); measured on LibTorch 1.13 against
// torch 2.11: identical. LibTorch 1.13's own bfloat16 matmuls missed by 1.5e-3.
TEST(Muon, Bf16MatchesTorchOptimMuon) {
  const auto& ref = reference();
  if (ref.empty()) GTEST_SKIP() << "no reference environment with torch.optim.Muon (scripts/python_env.sh)";
  for (int ci = 0; ci < kCaseCount; ++ci) {
    const Case& c = kCases[ci];
    const int64_t products = spread::direct_products_run(torch::kBFloat16);
    const auto [params, bufs] = run_spread(ref, c, /*ns_bf16=*/true);
    if (spread::has_direct_mm(torch::kBFloat16))  // 3 products per NS step, 3 matrices, 3 optimizer steps
      EXPECT_EQ(spread::direct_products_run(torch::kBFloat16) - products, 3 * c.ns_steps * 3 * 3)
          << "the Newton-Schulz products did not take the bf16 GEMM";
    for (int i = 0; i < 3; ++i) {
      const std::string c_ = std::to_string(ci) + ".", n = std::to_string(i);
      EXPECT_TRUE(torch::allclose(bufs[i], ref.at(c_ + "buf." + n + ".torch"), 1e-6, 1e-7)) << case_name(c) << ", buf " << n;
      const double diff = (params[i] - ref.at(c_ + "param." + n + ".torch")).abs().max().item<double>();
      const double moved = (ref.at(c_ + "param." + n + ".torch") - ref.at("param." + n + ".initial")).abs().max().item<double>();
      EXPECT_LT(diff, 1e-6) << case_name(c) << ", matrix " << n << " (moved " << moved << ")";
      std::printf("%s, matrix %s: |spread - torch| <= %.2e, moved %.2e\n", case_name(c).c_str(), n.c_str(), diff,
                  moved);
      EXPECT_GT(moved, 1e-3) << "the reference did not move matrix " << n << ": the comparison proves nothing";
    }
  }
}

// float32 products against the same algorithm in float64.
TEST(Muon, Fp32MatchesTheAlgorithmInFloat64) {
  const auto& ref = reference();
  if (ref.empty()) GTEST_SKIP() << "no reference environment with torch (scripts/python_env.sh)";
  for (int ci = 0; ci < kCaseCount; ++ci) {
    const Case& c = kCases[ci];
    const auto [params, bufs] = run_spread(ref, c, /*ns_bf16=*/false);
    for (int i = 0; i < 3; ++i) {
      const std::string c_ = std::to_string(ci) + ".", n = std::to_string(i);
      EXPECT_TRUE(torch::allclose(bufs[i], ref.at(c_ + "buf." + n + ".fp64"), 1e-6, 1e-7)) << case_name(c) << ", buf " << n;
      EXPECT_LT((params[i] - ref.at(c_ + "param." + n + ".fp64")).abs().max().item<double>(), 2e-6)
          << case_name(c) << ", matrix " << n;
    }
  }
}

// The update of one step is an (approximately) orthogonal matrix: its singular values lie near 1, whatever the
// gradient's scale, and the rate is scaled by sqrt(rows / cols) for a tall matrix.
TEST(Muon, OneStepMovesATallMatrixByAnOrthogonalUpdate) {
  torch::manual_seed(3);
  auto w = torch::zeros({12, 4});
  spread::FlatOptimizer flat;
  spread::MuonOptions o;
  o.ns_bf16 = false;
  o.nesterov = false;
  o.momentum = 0.0;
  flat.add_muon_group("muon", {w}, {0.1, 0, 0, 0, 0.0}, o);
  w.mutable_grad().copy_(torch::randn({12, 4}) * 1e-3);
  flat.step();
  const auto s = at::linalg_svdvals(w / (0.1 * std::sqrt(3.0)));
  EXPECT_GT(s.min().item<double>(), 0.5) << s;
  EXPECT_LT(s.max().item<double>(), 1.3) << s;
}

TEST(Muon, RefusesATensorThatIsNotAMatrix) {
  spread::FlatOptimizer flat;
  EXPECT_THROW(flat.add_muon_group("muon", {torch::zeros({4})}, {0.1, 0, 0, 0, 0}, {}), std::invalid_argument);
}

// train.optimizer = "muon" gives the blocks' matrices to Muon at muon_lr, and everything else to AdamW at lr.
TEST(Muon, TakesTheBlocksMatricesAndLeavesEmbeddingsHeadsNormsAndBiasesToAdamW) {
  const auto recipe = spread::parse_recipe("", "test.toml",
                                           {"model.n_layer=2", "model.n_head=2", "model.n_embd=16",
                                            "model.block_size=8", "train.optimizer=muon", "train.muon_lr=0.03",
                                            "train.lr=0.002", "model.tie_embeddings=false"});
  spread::TransformerConfig cfg = spread::model_config(recipe, 50);
  spread::Transformer model(cfg);
  std::map<const void*, std::string> name_of;
  std::map<std::string, int64_t> dims;
  for (const auto& item : model->named_parameters()) {
    name_of[item.value().unsafeGetTensorImpl()] = item.key();
    dims[item.key()] = item.value().dim();
  }
  spread::FlatOptimizer flat;
  spread::add_optimizer_groups(flat, model, recipe.train);
  ASSERT_EQ(flat.groups().size(), 3u);
  std::map<std::string, std::set<std::string>> members;
  for (const auto& g : flat.groups())
    for (const auto& p : g.params) members[g.name].insert(name_of.at(p.unsafeGetTensorImpl()));
  const std::set<std::string> muon = {"blocks.0.attn.qkv.weight", "blocks.0.attn.proj.weight",
                                      "blocks.0.mlp.fc.weight",    "blocks.0.mlp.proj.weight",
                                      "blocks.1.attn.qkv.weight", "blocks.1.attn.proj.weight",
                                      "blocks.1.mlp.fc.weight",    "blocks.1.mlp.proj.weight"};
  EXPECT_EQ(members["muon"], muon);
  EXPECT_EQ(members["decay"], (std::set<std::string>{"wte.weight", "wpe.weight", "lm_head.weight"}));
  for (const auto& n : members["no_decay"]) EXPECT_EQ(dims.at(n), 1) << n;
  EXPECT_EQ(members["muon"].size() + members["decay"].size() + members["no_decay"].size(), name_of.size());
  EXPECT_EQ(flat.groups()[0].rule, spread::UpdateRule::muon);
  EXPECT_DOUBLE_EQ(flat.groups()[0].peak_lr, 0.03);
  EXPECT_DOUBLE_EQ(flat.groups()[1].peak_lr, 0.002);
  flat.set_lr_scale(0.5);
  EXPECT_DOUBLE_EQ(flat.groups()[0].options.lr, 0.015);
  EXPECT_DOUBLE_EQ(flat.groups()[2].options.lr, 0.001);
}
