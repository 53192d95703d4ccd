// Dispersion loss variants (docs/design.md §3) against an independent scalar reference written out below (plain loops
// over std::vector<double>, no LibTorch), hand-worked values, and central finite differences.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "spread/losses/dispersion.h"

namespace {

using spread::DispersionOptions;
using Rows = std::vector<std::vector<double>>;

constexpr double kNormEps = 1e-4;  // zh = z / (||z|| + 1e-4), the reference's epsilon (docs/design.md §3.2 step 2)

// ---- scalar reference ------------------------------------------------------------------------------------------

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t f = 0; f < a.size(); ++f) s += a[f] * b[f];
  return s;
}
double norm(const std::vector<double>& a) { return std::sqrt(dot(a, a)); }
double guarded_cos(const std::vector<double>& a, const std::vector<double>& b) {  // zh_a . zh_b
  return dot(a, b) / ((norm(a) + kNormEps) * (norm(b) + kNormEps));
}
double clamp_cos(double c, double t) { return std::min(std::max(c, -1 + t), 1 - t); }

// D_ij. With `frozen` set, the straight-through surrogate: arccos linearised around the clamped cosine at the
// frozen point, so its derivative at z = frozen is arccos'(clamped C) dC, and its value there is arccos(clamped C).
double angle(const Rows& z, size_t i, size_t j, double t, const Rows* frozen) {
  double c = guarded_cos(z[i], z[j]);
  if (!frozen) return std::acos(clamp_cos(c, t)) / M_PI;
  double c_at = guarded_cos((*frozen)[i], (*frozen)[j]);
  double c0 = clamp_cos(c_at, t);
  return (std::acos(c0) - (c - c_at) / std::sqrt(1 - c0 * c0)) / M_PI;
}

std::vector<double> centred(const std::vector<double>& a) {
  double m = 0;
  for (double v : a) m += v;
  m /= static_cast<double>(a.size());
  std::vector<double> c(a);
  for (double& v : c) v -= m;
  return c;
}

double pair_term(const Rows& z, size_t i, size_t j, const DispersionOptions& o, const Rows* frozen) {
  const std::string& v = o.variant;
  if (v == "angular") return std::exp(-angle(z, i, j, o.clamp, frozen) / o.tau);
  if (v == "cosine") return guarded_cos(z[i], z[j]);
  if (v == "hinge") return std::pow(std::max(0.0, 0.5 - angle(z, i, j, o.clamp, frozen)), 2);
  if (v == "l2_repel") {
    double d2 = 0;
    for (size_t f = 0; f < z[i].size(); ++f) d2 += std::pow(z[i][f] - z[j][f], 2);
    return std::exp(-d2 / o.tau);
  }
  return std::pow(guarded_cos(centred(z[i]), centred(z[j])), 2);  // decorrelation
}

// One sequence's value; NaN when it has fewer than two tokens (skipped). l2_repel keeps the self pairs.
double ref_sequence(const Rows& z, const DispersionOptions& o, const Rows* frozen = nullptr) {
  const size_t n = z.size();
  if (n < 2) return std::numeric_limits<double>::quiet_NaN();
  const bool with_self = o.variant == "l2_repel";
  double sum = 0;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j)
      if (i != j || with_self) sum += pair_term(z, i, j, o, frozen);
  double mean = sum / static_cast<double>(with_self ? n * n : n * (n - 1));
  if (o.variant == "angular") return std::log(mean);
  if (o.variant == "l2_repel") {
    double sq = 0;
    for (const auto& r : z) sq += dot(r, r);
    return std::log(mean) + 0.1 * sq / static_cast<double>(n * z[0].size());
  }
  return mean;
}

double ref_batch(const std::vector<Rows>& seqs, const DispersionOptions& o,
                 const std::vector<Rows>* frozen = nullptr) {
  double sum = 0;
  int used = 0;
  for (size_t b = 0; b < seqs.size(); ++b) {
    double v = ref_sequence(seqs[b], o, frozen ? &(*frozen)[b] : nullptr);
    if (!std::isnan(v)) sum += v, ++used;
  }
  return used ? sum / used : 0.0;
}

// The valid rows of each sequence.
std::vector<Rows> sequences(const torch::Tensor& hidden, const torch::Tensor& mask = {}) {
  torch::Tensor h = hidden.detach().to(torch::kFloat64).contiguous();
  std::vector<Rows> out(h.size(0));
  for (int64_t b = 0; b < h.size(0); ++b)
    for (int64_t i = 0; i < h.size(1); ++i) {
      if (mask.defined() && !mask[b][i].item<bool>()) continue;
      torch::Tensor r = h[b][i];
      out[b].emplace_back(r.data_ptr<double>(), r.data_ptr<double>() + r.numel());
    }
  return out;
}

torch::Tensor tensor_of(const Rows& rows) {  // [1, n, F] float64
  torch::Tensor t = torch::empty({1, static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())},
                                 torch::kFloat64);
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t f = 0; f < rows[i].size(); ++f) t[0][i][f] = rows[i][f];
  return t;
}

// ---- helpers on the unit ---------------------------------------------------------------------------------------

// The formula tests below were worked out with t = 0.1, a clamp wide enough to hit with round numbers; the
// default (1e-4) has its own tests further down.
DispersionOptions options(const std::string& variant, double tau = 1.0, double clamp = 0.1) {
  DispersionOptions o;
  o.variant = variant;
  o.tau = tau;
  o.clamp = clamp;
  return o;
}

double loss_value(const torch::Tensor& x, const torch::Tensor& mask, const DispersionOptions& o) {
  return spread::dispersion_loss(x, mask, o, 0).item<double>();
}

torch::Tensor autograd_grad(const torch::Tensor& x, const torch::Tensor& mask, const DispersionOptions& o) {
  torch::Tensor leaf = x.detach().clone().requires_grad_(true);
  spread::dispersion_loss(leaf, mask, o, 0).backward();
  return leaf.grad();
}

torch::Tensor finite_difference(const torch::Tensor& x, const std::function<double(const torch::Tensor&)>& f,
                                double h = 1e-6) {
  torch::Tensor g = torch::zeros_like(x);
  torch::Tensor flat = x.detach().clone().contiguous();
  double* p = flat.data_ptr<double>();
  for (int64_t k = 0; k < flat.numel(); ++k) {
    const double keep = p[k];
    p[k] = keep + h;
    double up = f(flat);
    p[k] = keep - h;
    double down = f(flat);
    p[k] = keep;
    g.view(-1)[k] = (up - down) / (2 * h);
  }
  return g;
}

torch::Tensor random_states(int64_t b, int64_t t, int64_t f, uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randn({b, t, f}, torch::kFloat64);
}

// Random states whose off-diagonal guarded cosines stay clear of the clamp, so the loss is smooth there (for
// finite differences). Keep t small against f, or the draw rarely succeeds.
torch::Tensor smooth_random(int64_t b, int64_t t, int64_t f, uint64_t seed) {
  torch::manual_seed(seed);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    torch::Tensor x = torch::randn({b, t, f}, torch::kFloat64);
    torch::Tensor zh = x / (x.norm(2, {-1}, true) + kNormEps);
    torch::Tensor c = torch::bmm(zh, zh.transpose(1, 2)).masked_fill(torch::eye(t, torch::kBool), 0);
    if (c.abs().max().item<double>() < 0.8) return x;
  }
  throw std::runtime_error("smooth_random: no draw cleared the clamp; use fewer tokens or more features");
}

const std::vector<std::string> kVariants{"angular", "cosine", "l2_repel", "hinge", "decorrelation"};

// ---- hand-made cases -------------------------------------------------------------------------------------------

// Three orthogonal tokens of different lengths.
torch::Tensor orthogonal_tokens() {
  return torch::tensor({2.0, 0.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.0}, torch::kFloat64)
      .view({1, 3, 4});
}

TEST(Dispersion, OrthogonalTokensMatchHandValues) {
  torch::Tensor x = orthogonal_tokens();
  const double tau = 0.7;
  EXPECT_NEAR(loss_value(x, {}, options("angular", tau)), -1.0 / (2 * tau), 1e-12);  // D = 1/2 for every pair
  EXPECT_NEAR(loss_value(x, {}, options("cosine")), 0.0, 1e-12);
  EXPECT_NEAR(loss_value(x, {}, options("hinge")), 0.0, 1e-12);  // D = 1/2 sits on the hinge
  // l2: pairs (a,b) have d^2 = a^2 + b^2 with lengths 2, 3, 0.5, the 3 self pairs d^2 = 0; all 9 pairs enter the
  // mean. The penalty is 0.1 (4 + 9 + 0.25) / (3 * 4).
  double pairs = 3 + 2 * (std::exp(-(4 + 9) / tau) + std::exp(-(4 + 0.25) / tau) + std::exp(-(9 + 0.25) / tau));
  EXPECT_NEAR(loss_value(x, {}, options("l2_repel", tau)), std::log(pairs / 9) + 0.1 * 13.25 / 12, 1e-12);
}

TEST(Dispersion, ZeroMeanOrthogonalTokensAreUncorrelated) {
  torch::Tensor x = torch::tensor({1.0, -1.0, 0.0, 0.0, 0.0, 0.0, 2.0, -2.0}, torch::kFloat64).view({1, 2, 4});
  EXPECT_NEAR(loss_value(x, {}, options("decorrelation")), 0.0, 1e-15);
}

TEST(Dispersion, IdenticalTokensHitTheClamp) {
  // ||v|| = 1.5: guarded cosine (1.5 / 1.5001)^2 = 0.9999 > 1 - t, so D = arccos(0.9) / pi for every pair.
  torch::Tensor v = torch::tensor({0.9, 1.2, 0.0}, torch::kFloat64);
  torch::Tensor x = v.repeat({1, 4, 1});
  const double r = 1.5, c = std::pow(r / (r + kNormEps), 2), d = std::acos(0.9) / M_PI, tau = 0.5;
  EXPECT_NEAR(loss_value(x, {}, options("angular", tau)), -d / tau, 1e-12);
  EXPECT_NEAR(loss_value(x, {}, options("hinge")), std::pow(0.5 - d, 2), 1e-12);
  EXPECT_NEAR(loss_value(x, {}, options("cosine")), c, 1e-12);
  EXPECT_NEAR(loss_value(x, {}, options("l2_repel", tau)), 0.1 * r * r / 3, 1e-12);  // d^2 = 0, mean z^2 = r^2/F
  // Centred v = (0.2, 0.5, -0.7): r_ij = (||c|| / (||c|| + 1e-4))^2.
  const double cn = std::sqrt(0.04 + 0.25 + 0.49);
  EXPECT_NEAR(loss_value(x, {}, options("decorrelation")), std::pow(cn / (cn + kNormEps), 4), 1e-12);
}

TEST(Dispersion, ShortIdenticalTokensShowTheNormGuard) {
  // ||v|| = 5e-4: the guard lowers the cosine to (5e-4 / 6e-4)^2 = 0.694, inside the clamp.
  torch::Tensor x = torch::tensor({3e-4, 4e-4, 3e-4, 4e-4}, torch::kFloat64).view({1, 2, 2});
  const double c = std::pow(5e-4 / 6e-4, 2);
  EXPECT_NEAR(loss_value(x, {}, options("angular")), -std::acos(c) / M_PI, 1e-12);
  EXPECT_NEAR(loss_value(x, {}, options("cosine")), c, 1e-12);
}

TEST(Dispersion, AntipodalTokens) {
  torch::Tensor v = torch::tensor({1.0, -2.0, 2.0}, torch::kFloat64);  // ||v|| = 3
  torch::Tensor x = torch::stack({v, -v}).unsqueeze(0);
  const double r = 3, c = std::pow(r / (r + kNormEps), 2), d = std::acos(-0.9) / M_PI, tau = 2;
  EXPECT_NEAR(loss_value(x, {}, options("angular", tau)), -d / tau, 1e-12);  // -c < -0.9: clamped
  EXPECT_NEAR(loss_value(x, {}, options("hinge")), 0.0, 1e-15);              // D > 1/2: no push
  EXPECT_NEAR(loss_value(x, {}, options("cosine")), -c, 1e-12);
  // l2: two cross pairs at d^2 = (2r)^2 and two self pairs at 0.
  EXPECT_NEAR(loss_value(x, {}, options("l2_repel", tau)),
              std::log((2 + 2 * std::exp(-4 * r * r / tau)) / 4) + 0.1 * r * r / 3, 1e-12);
  const double cn = std::sqrt(4.0 / 9 + 49.0 / 9 + 25.0 / 9);  // centred v = (2/3, -7/3, 5/3); r_01 = -(...)^2
  EXPECT_NEAR(loss_value(x, {}, options("decorrelation")), std::pow(cn / (cn + kNormEps), 4), 1e-12);
}

TEST(Dispersion, TwoTokensUseOnlyTheCrossPairsExceptL2Repel) {
  // With self pairs the angular value would be log((2 e^{-D_00} + 2 e^{-D_01}) / 4), about 0.45 higher here.
  torch::Tensor x = torch::tensor({1.0, 0.2, -0.3, 0.4, 1.0, 0.5}, torch::kFloat64).view({1, 2, 3});
  Rows z = sequences(x)[0];
  const double c = guarded_cos(z[0], z[1]), d = std::acos(c) / M_PI;
  ASSERT_LT(std::abs(c), 0.9);
  EXPECT_NEAR(loss_value(x, {}, options("angular")), -d, 1e-12);
  EXPECT_NEAR(loss_value(x, {}, options("hinge")), std::pow(std::max(0.0, 0.5 - d), 2), 1e-12);
  EXPECT_NEAR(loss_value(x, {}, options("cosine")), c, 1e-12);
  const double d2 = std::pow(1.0 - 0.4, 2) + std::pow(0.2 - 1.0, 2) + std::pow(-0.3 - 0.5, 2);
  const double sq = dot(z[0], z[0]) + dot(z[1], z[1]);
  EXPECT_NEAR(loss_value(x, {}, options("l2_repel")), std::log((2 + 2 * std::exp(-d2)) / 4) + 0.1 * sq / 6, 1e-12);
  EXPECT_NEAR(loss_value(x, {}, options("decorrelation")), std::pow(guarded_cos(centred(z[0]), centred(z[1])), 2),
              1e-12);
}

// ---- random inputs against the reference ------------------------------------------------------------------------

TEST(Dispersion, EveryVariantMatchesTheScalarReference) {
  torch::manual_seed(3);
  torch::Tensor x = 2 * torch::randn({3, 7, 5}, torch::kFloat64);
  x[1][2] = x[1][4] * 1.1;  // one pair inside the clamp
  torch::Tensor mask = torch::ones({3, 7}, torch::kBool);
  mask[0].narrow(0, 4, 3).fill_(false);
  mask[2][0] = false;
  mask[2][5] = false;
  for (const auto& v : kVariants) {
    auto o = options(v, 0.8);
    EXPECT_NEAR(loss_value(x, mask, o), ref_batch(sequences(x, mask), o), 1e-12) << v;
    EXPECT_NEAR(loss_value(x, {}, o), ref_batch(sequences(x), o), 1e-12) << v;
  }
}

TEST(Dispersion, GradientsMatchFiniteDifferences) {
  torch::Tensor x = smooth_random(2, 5, 6, 11);
  torch::Tensor mask = torch::ones({2, 5}, torch::kBool);
  mask[1][1] = false;
  for (const auto& v : kVariants) {
    auto o = options(v, 1.3);
    for (const torch::Tensor& m : {torch::Tensor(), mask}) {
      torch::Tensor expected = finite_difference(x, [&](const torch::Tensor& y) { return loss_value(y, m, o); });
      torch::Tensor got = autograd_grad(x, m, o);
      EXPECT_TRUE(torch::allclose(got, expected, 1e-6, 1e-8)) << v << "\n" << (got - expected).abs().max();
    }
  }
}

TEST(Dispersion, ClampedPairsGetTheStraightThroughGradient) {
  // Tokens 0 and 1 are nearly parallel (cosine 0.99 > 1 - t). The expected gradient is the finite difference of
  // the reference with arccos linearised at the clamped cosine: arccos'(clamped C) times dC, not zero.
  torch::manual_seed(5);
  torch::Tensor x = smooth_random(1, 4, 5, 21);
  x[0][1] = x[0][0] + 0.1 * torch::randn({5}, torch::kFloat64);
  const std::vector<Rows> at = sequences(x);
  ASSERT_GT(guarded_cos(at[0][0], at[0][1]), 0.9);
  for (const std::string v : {"angular", "hinge"}) {
    auto o = options(v);
    auto surrogate = [&](const torch::Tensor& y) { return ref_batch(sequences(y), o, &at); };
    torch::Tensor expected = finite_difference(x, surrogate);
    torch::Tensor got = autograd_grad(x, {}, o);
    EXPECT_TRUE(torch::allclose(got, expected, 1e-6, 1e-8)) << v << "\n" << (got - expected).abs().max();
    EXPECT_GT(got[0][0].norm().item<double>(), 1e-3) << v;  // a hard clamp would leave almost nothing here
  }
}

TEST(Dispersion, HardClampWouldCutTheGradientOfAClampedPair) {
  // Two nearly parallel tokens: every pair is clamped. The gradient must equal -(1/pi) / sqrt(1 - 0.81) dC/dz
  // (angular, tau = 1, L = -D_01), worked out here from dC/dz by finite differences of the guarded cosine.
  torch::Tensor x = torch::tensor({1.0, 0.1, 0.0, 1.0, 0.0, 0.1}, torch::kFloat64).view({1, 2, 3});
  auto cos01 = [](const torch::Tensor& y) {
    Rows z = sequences(y)[0];
    return guarded_cos(z[0], z[1]);
  };
  ASSERT_GT(cos01(x), 0.9);
  torch::Tensor dc = finite_difference(x, cos01);
  torch::Tensor expected = dc * (1.0 / (M_PI * std::sqrt(1 - 0.81)));  // dL/dC = -dD/dC = 1/(pi sqrt(1 - C'^2))
  EXPECT_TRUE(torch::allclose(autograd_grad(x, {}, options("angular")), expected, 1e-6, 1e-9));
}

TEST(Dispersion, ZeroVectorsHaveFiniteGradients) {
  torch::Tensor x = random_states(1, 4, 3, 31);
  x[0][2].zero_();
  for (const auto& v : kVariants) {
    torch::Tensor g = autograd_grad(x, {}, options(v));
    EXPECT_TRUE(g.isfinite().all().item<bool>()) << v;
  }
}

TEST(Dispersion, GramBackwardsMatchTheNaiveFormula) {
  // Reference: autograd through the textbook expressions (two-operand bmm, explicit division by the norm), pulled
  // back along a non-symmetric upstream gradient so that the symmetrisation dG + dG^T is exercised.
  torch::Tensor x = random_states(2, 5, 4, 91);
  x[1][3].zero_();  // a zero row: the guard keeps zh = 0 there
  torch::Tensor up = torch::randn({2, 5, 5}, torch::kFloat64);
  auto pullback = [&](const std::function<torch::Tensor(const torch::Tensor&)>& f) {
    torch::Tensor leaf = x.clone().requires_grad_(true);
    torch::Tensor out = f(leaf);
    (out * up).sum().backward();
    return std::make_pair(out.detach(), leaf.grad());
  };
  auto naive_gram = pullback([](const torch::Tensor& z) { return torch::bmm(z, z.transpose(1, 2)); });
  auto gram = pullback([](const torch::Tensor& z) { return spread::dispersion_parts::gram(z); });
  EXPECT_TRUE(torch::allclose(gram.first, naive_gram.first, 1e-12, 1e-14));
  EXPECT_TRUE(torch::allclose(gram.second, naive_gram.second, 1e-12, 1e-14));

  auto naive_cos = pullback([](const torch::Tensor& z) {
    torch::Tensor zh = z / (z.norm(2, {-1}, true) + kNormEps);
    return torch::bmm(zh, zh.transpose(1, 2));
  });
  auto cos = pullback([](const torch::Tensor& z) { return spread::dispersion_parts::cosine_gram(z, torch::kFloat64); });
  EXPECT_TRUE(torch::allclose(cos.first, naive_cos.first, 1e-12, 1e-14));
  EXPECT_TRUE(torch::allclose(cos.second, naive_cos.second, 1e-12, 1e-14));
  EXPECT_TRUE(cos.second.isfinite().all().item<bool>());
}

// ---- padding, skipped sequences, subsample ----------------------------------------------------------------------

TEST(Dispersion, PaddingNeverEntersTheLossOrItsGradient) {
  torch::Tensor x = random_states(2, 6, 4, 41);
  torch::Tensor mask = torch::ones({2, 6}, torch::kBool);
  for (int i : {1, 4}) mask[0][i] = false;
  torch::Tensor garbage = x.clone();
  garbage[0][1].fill_(1e30);
  garbage[0][4].fill_(std::numeric_limits<double>::quiet_NaN());
  torch::Tensor seq0 = x[0].index_select(0, torch::tensor({0, 2, 3, 5})).unsqueeze(0);
  torch::Tensor seq1 = x[1].unsqueeze(0);
  for (const auto& v : kVariants) {
    auto o = options(v);
    double expected = (loss_value(seq0, {}, o) + loss_value(seq1, {}, o)) / 2;
    EXPECT_NEAR(loss_value(garbage, mask, o), expected, 1e-12) << v;

    torch::Tensor g = autograd_grad(garbage, mask, o);
    EXPECT_EQ(g[0][1].abs().max().item<double>(), 0.0) << v;
    EXPECT_EQ(g[0][4].abs().max().item<double>(), 0.0) << v;
    torch::Tensor g0 = autograd_grad(seq0, {}, o) / 2, g1 = autograd_grad(seq1, {}, o) / 2;
    EXPECT_TRUE(torch::allclose(g[0].index_select(0, torch::tensor({0, 2, 3, 5})), g0[0], 1e-10, 1e-12)) << v;
    EXPECT_TRUE(torch::allclose(g[1], g1[0], 1e-10, 1e-12)) << v;
  }
}

TEST(Dispersion, SequencesWithFewerThanTwoTokensAreSkipped) {
  torch::Tensor x = random_states(3, 4, 3, 51);
  torch::Tensor mask = torch::ones({3, 4}, torch::kBool);
  mask[1].fill_(false);
  mask[1][2] = true;     // one token: skipped
  mask[2].fill_(false);  // none: skipped
  for (const auto& v : kVariants) {
    auto o = options(v);
    EXPECT_NEAR(loss_value(x, mask, o), loss_value(x.narrow(0, 0, 1), {}, o), 1e-12) << v;
    torch::Tensor none = torch::zeros({3, 4}, torch::kBool);
    none[0][0] = true;
    EXPECT_EQ(loss_value(x, none, o), 0.0) << v;
    torch::Tensor g = autograd_grad(x, none, o);
    EXPECT_EQ(g.abs().max().item<double>(), 0.0) << v;
  }
}

TEST(Dispersion, SubsampleDrawsValidPositionsDeterministically) {
  torch::Tensor mask = torch::ones({3, 12}, torch::kBool);
  mask[1].narrow(0, 5, 7).fill_(false);        // 5 valid: all kept
  for (int i : {0, 3, 6}) mask[2][i] = false;  // 9 valid: 6 drawn
  auto s = spread::dispersion_parts::subsample(mask, 3, 12, 6, 77);
  ASSERT_TRUE(s.index.defined());
  ASSERT_EQ(s.index.sizes(), (std::vector<int64_t>{3, 6}));
  for (int64_t b = 0; b < 3; ++b) {
    std::set<int64_t> seen;
    int64_t prev = -1;
    for (int64_t k = 0; k < 6; ++k) {
      int64_t i = s.index[b][k].item<int64_t>();
      EXPECT_GT(i, prev);  // ascending, so distinct
      prev = i;
      EXPECT_EQ(s.mask[b][k].item<bool>(), mask[b][i].item<bool>());
      if (s.mask[b][k].item<bool>()) seen.insert(i);
    }
    EXPECT_EQ(seen.size(), std::min<size_t>(6, mask[b].sum().item<int64_t>()));
  }
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(s.index[1][i].item<int64_t>(), i);

  auto again = spread::dispersion_parts::subsample(mask, 3, 12, 6, 77);
  EXPECT_TRUE(torch::equal(s.index, again.index));
  auto other = spread::dispersion_parts::subsample(mask, 3, 12, 6, 78);
  EXPECT_FALSE(torch::equal(s.index, other.index));
  EXPECT_FALSE(spread::dispersion_parts::subsample(mask, 3, 12, 12, 77).index.defined());  // nobody exceeds 12
}

TEST(Dispersion, SubsampleIsUniformOverValidPositions) {
  torch::Tensor mask = torch::ones({1, 10}, torch::kBool);
  mask[0][7] = false;  // 9 valid, 3 drawn: each valid position is kept with probability 1/3
  torch::Tensor counts = torch::zeros({10}, torch::kFloat64);
  const int draws = 600;
  for (int seed = 0; seed < draws; ++seed) {
    auto s = spread::dispersion_parts::subsample(mask, 1, 10, 3, seed);
    counts.index_add_(0, s.index[0], torch::ones({3}, torch::kFloat64));
  }
  torch::Tensor freq = counts / draws;
  EXPECT_EQ(freq[7].item<double>(), 0.0);
  freq[7] = 1.0 / 3;
  EXPECT_LT((freq - 1.0 / 3).abs().max().item<double>(), 0.08);  // sd of one frequency is 0.019
}

TEST(Dispersion, SubsampledLossEqualsTheLossOnTheDrawnTokens) {
  torch::Tensor x = random_states(3, 12, 4, 61);
  torch::Tensor mask = torch::ones({3, 12}, torch::kBool);
  mask[1].narrow(0, 5, 7).fill_(false);
  for (int i : {0, 3, 6}) mask[2][i] = false;
  for (const auto& v : kVariants) {
    DispersionOptions o = options(v);
    o.max_tokens = 6;
    auto s = spread::dispersion_parts::subsample(mask, 3, 12, 6, 99);
    std::vector<Rows> drawn(3);
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t k = 0; k < 6; ++k)
        if (s.mask[b][k].item<bool>()) drawn[b].push_back(sequences(x)[b][s.index[b][k].item<int64_t>()]);
    double got = spread::dispersion_loss(x, mask, o, 99).item<double>();
    EXPECT_NEAR(got, ref_batch(drawn, o), 1e-12) << v;
    EXPECT_EQ(got, spread::dispersion_loss(x, mask, o, 99).item<double>()) << v;
  }
  // Without a mask the draw applies as well (T = 12 > 6).
  DispersionOptions o;
  o.max_tokens = 6;
  auto s = spread::dispersion_parts::subsample({}, 3, 12, 6, 5);
  torch::Tensor picked = x.gather(1, s.index.unsqueeze(-1).expand({3, 6, 4}));
  EXPECT_NEAR(spread::dispersion_loss(x, {}, o, 5).item<double>(), ref_batch(sequences(picked), o), 1e-12);
}

// ---- options, layers, dtypes ------------------------------------------------------------------------------------

TEST(Dispersion, RejectsBadOptionsAndListsTheVariants) {
  DispersionOptions o;
  o.variant = "angualr";
  try {
    spread::check_dispersion_options(o);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    for (const auto& v : kVariants) EXPECT_NE(std::string(e.what()).find(v), std::string::npos) << e.what();
  }
  EXPECT_THROW(spread::dispersion_loss(torch::randn({1, 3, 2}), {}, o, 0), std::invalid_argument);
  o = DispersionOptions();
  o.tau = 0;
  EXPECT_THROW(spread::check_dispersion_options(o), std::invalid_argument);
  o = DispersionOptions();
  o.clamp = 0;
  EXPECT_THROW(spread::check_dispersion_options(o), std::invalid_argument);
  o = DispersionOptions();
  o.max_tokens = 1;
  EXPECT_THROW(spread::check_dispersion_options(o), std::invalid_argument);
  EXPECT_EQ(spread::dispersion_variants(), kVariants);
  for (const auto& v : kVariants) EXPECT_NO_THROW(spread::check_dispersion_options(options(v)));
}

TEST(Dispersion, SeveralLayersAverage) {
  torch::Tensor a = random_states(2, 5, 3, 71), b = random_states(2, 5, 3, 72);
  DispersionOptions o;
  double expected = (loss_value(a, {}, o) + loss_value(b, {}, o)) / 2;
  EXPECT_NEAR(spread::dispersion_loss(std::vector<torch::Tensor>{a, b}, {}, o, 0).item<double>(), expected, 1e-12);
}

TEST(Dispersion, ReducesInFloat32ForLowPrecisionInput) {
  torch::Tensor x = random_states(2, 8, 16, 81);
  for (const auto& v : kVariants) {
    double exact = loss_value(x, {}, options(v));
    torch::Tensor f32 = spread::dispersion_loss(x.to(torch::kFloat32), {}, options(v), 0);
    torch::Tensor bf16 = spread::dispersion_loss(x.to(torch::kBFloat16), {}, options(v), 0);
    EXPECT_EQ(f32.scalar_type(), torch::kFloat32) << v;
    EXPECT_EQ(bf16.scalar_type(), torch::kFloat32) << v;
    EXPECT_NEAR(f32.item<double>(), exact, 1e-5 * std::max(1.0, std::abs(exact))) << v;
    EXPECT_NEAR(bf16.item<double>(), exact, 5e-2 * std::max(1.0, std::abs(exact))) << v;
  }
}

// ---- docs/design.md §3.5 defaults and the two review findings ---------------------------------------------------

TEST(Dispersion, DefaultsAreTheReferences) {
  DispersionOptions o;
  EXPECT_EQ(o.variant, "angular");
  EXPECT_EQ(o.tau, 0.5);
  EXPECT_EQ(o.clamp, 1e-4);
  EXPECT_EQ(o.max_tokens, 256);
}

TEST(Dispersion, L2RepelIsBoundedBelowUnderScaling) {
  // Without self pairs the repulsion term fell without limit as the states grew (-2.5 ... -2571 on this shape);
  // with them it is >= -log n and reaches -log n once every cross pair is far apart.
  torch::Tensor x = random_states(1, 64, 128, 91);
  auto o = options("l2_repel", 0.5);
  double previous = std::numeric_limits<double>::infinity();
  for (double scale : {0.1, 0.5, 1.0, 2.0, 4.0}) {
    torch::Tensor z = scale * x;
    double penalty = 0.1 * z.square().mean().item<double>();
    double repel = loss_value(z, {}, o) - penalty;
    EXPECT_GE(repel, -std::log(64.0) - 1e-9) << scale;
    EXPECT_LE(repel, previous + 1e-9) << scale;  // spreading the states apart only lowers it
    EXPECT_NEAR(loss_value(z, {}, o), ref_batch(sequences(z), o), 1e-9) << scale;
    previous = repel;
  }
  EXPECT_NEAR(loss_value(4 * x, {}, o) - 0.1 * (4 * x).square().mean().item<double>(), -std::log(64.0), 1e-9);
  EXPECT_GT(loss_value(4 * x, {}, o), loss_value(x, {}, o));  // past the bound only the norm penalty moves
}

// Two tokens at cosine c: L = -D / tau, so dL/dz = (1 / (tau pi sqrt(1 - C^2))) dC/dz below the clamp, the true
// derivative of arccos(C) / pi, which grows as pairs condense (3.20, 7.09, 22.4 times 1/pi at 0.95, 0.99, 0.999).
double gradient_factor(double c, double clamp) {
  torch::Tensor x = torch::tensor({1.0, 0.0, c, std::sqrt(1 - c * c)}, torch::kFloat64).view({1, 2, 2});
  auto cos01 = [](const torch::Tensor& y) {
    Rows z = sequences(y)[0];
    return guarded_cos(z[0], z[1]);
  };
  torch::Tensor dc = finite_difference(x, cos01);
  torch::Tensor g = autograd_grad(x, {}, options("angular", 0.5, clamp));
  return (g * dc).sum().item<double>() / dc.square().sum().item<double>();  // g = factor * dC/dz
}

TEST(Dispersion, DefaultClampKeepsTheArccosGradientWhereTokensCondense) {
  for (double c : {0.95, 0.99, 0.999}) {
    const double guarded = c / std::pow(1 + kNormEps, 2);
    const double expected = 1 / (0.5 * M_PI * std::sqrt(1 - guarded * guarded));
    EXPECT_NEAR(gradient_factor(c, DispersionOptions().clamp), expected, 1e-5 * expected) << c;
  }
  EXPECT_GT(gradient_factor(0.999, 1e-4), 6 * gradient_factor(0.95, 1e-4));
  // The old t = 0.1 gave every pair above cosine 0.9 the same factor, 1 / (tau pi sqrt(1 - 0.81)).
  for (double c : {0.95, 0.99, 0.999})
    EXPECT_NEAR(gradient_factor(c, 0.1), 1 / (0.5 * M_PI * std::sqrt(1 - 0.81)), 1e-6) << c;
}

}  // namespace
