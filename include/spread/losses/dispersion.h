#pragma once
// Dispersion loss (Liu et al. 2026, arXiv:2602.00217; reference code KrishnaswamyLab/LM-Dispersion; docs/design.md §3).
// Added to the LM loss during training as  L = L_LM + lambda * L_disp  to keep the hidden states of a sequence
// from condensing into one direction. Every variant:
//   - forms pairs within each sequence only; padding never enters a pair; self pairs (i == i) are excluded, except
//     in l2_repel, which keeps them as the reference does (they bound it below by -log n);
//   - first subsamples max_tokens valid positions (seeded) from any sequence that has more;
//   - takes a per-sequence value, then the mean over sequences with >= 2 valid tokens (others are skipped; a batch
//     where none has two valid tokens gives 0, still connected to the graph so backward() works).
// The variants, each in its own file src/losses/dispersion_<variant>.cpp with its formula in a header comment:
//   angular        log mean_{i!=j} exp(-D_ij / tau),  D = arccos(C') / pi                    (default)
//   cosine         mean_{i!=j} zh_i . zh_j
//   l2_repel       log mean_{i,j} exp(-||z_i - z_j||^2 / tau) + 0.1 * mean_{i,f} z_if^2   (all n^2 pairs)
//   hinge          mean_{i!=j} max(0, 1/2 - D_ij)^2
//   decorrelation  mean_{i!=j} r_ij^2,  r = token x token correlation (centred over features)
// with zh = z / (||z|| + 1e-4), C = zh zh^T and the straight-through clamp C' = C + (clamp(C, -1+t, 1-t) - C).detach().
// Dtypes: the batched matmul over [B,T,F] runs in the input dtype; token norms, the [B,T,T] pair matrix and every
// reduction run in float32 (float64 when the input is float64). The loss is a float32 scalar (float64 for float64
// input). Cost: see src/tools/bench_dispersion.cpp (last-layer angular: about 1% of a small GPT's training step).
#include <cstdint>
#include <string>
#include <vector>
#include <torch/types.h>

namespace spread {

struct DispersionOptions {
  std::string variant = "angular";  // angular | cosine | l2_repel | hinge | decorrelation
  double tau = 0.5;                 // temperature of angular and l2_repel (the reference's tau_cos)
  double clamp = 1e-4;              // t of the straight-through clamp (angular, hinge); 0 < t < 1
  int64_t max_tokens = 256;         // per-sequence subsample size; >= 2
};

// The valid variant names, in the order the docs list them.
const std::vector<std::string>& dispersion_variants();

// Throws std::invalid_argument naming the bad field (an unknown variant lists the valid names); the recipe layer
// turns it into a UserError.
void check_dispersion_options(const DispersionOptions& opt);

// hidden: [B, T, F] floating; mask: [B, T] bool (true = valid token) or an undefined tensor (all valid).
// sample_seed seeds the per-sequence subsample, used only when a sequence has more than max_tokens valid positions;
// pass a value that changes from step to step. Validates opt (see check_dispersion_options).
torch::Tensor dispersion_loss(const torch::Tensor& hidden, const torch::Tensor& mask, const DispersionOptions& opt,
                              uint64_t sample_seed);

// Several layers (layers = all | list): the mean of dispersion_loss over them, with the same subsample for every
// layer. All tensors share one [B, T] shape.
torch::Tensor dispersion_loss(const std::vector<torch::Tensor>& hidden_per_layer, const torch::Tensor& mask,
                              const DispersionOptions& opt, uint64_t sample_seed);

// The variants themselves: every valid token of a sequence pairs with every other (no subsampling, no option
// checks). Same inputs as dispersion_loss.
torch::Tensor angular_dispersion(const torch::Tensor& hidden, const torch::Tensor& mask, const DispersionOptions& opt);
torch::Tensor cosine_dispersion(const torch::Tensor& hidden, const torch::Tensor& mask, const DispersionOptions& opt);
torch::Tensor l2_repel_dispersion(const torch::Tensor& hidden, const torch::Tensor& mask,
                                  const DispersionOptions& opt);
torch::Tensor hinge_dispersion(const torch::Tensor& hidden, const torch::Tensor& mask, const DispersionOptions& opt);
torch::Tensor decorrelation_dispersion(const torch::Tensor& hidden, const torch::Tensor& mask,
                                       const DispersionOptions& opt);

// ---- building blocks shared by the variants (public so that tests can check them one by one) --------------------
namespace dispersion_parts {

// The epsilon of zh = z / (||z|| + eps), the reference's 1e-4 (docs/design.md §3.2 step 2): finite value and gradient
// at z = 0.
constexpr double kNormEps = 1e-4;

// Per sequence, the positions that take part: at most max_tokens valid ones, drawn uniformly without replacement
// (seeded) from a sequence that has more, all of them otherwise. index: [B, K] int64 positions in ascending order,
// K = min(T, max_tokens); mask: [B, K] bool, false where a sequence has fewer than K valid positions.
// `mask` may be undefined (all valid). Nothing is drawn, and index is undefined, when no sequence has more than
// max_tokens valid positions.
struct Subsample {
  torch::Tensor index;
  torch::Tensor mask;
};
Subsample subsample(const torch::Tensor& mask, int64_t batch, int64_t length, int64_t max_tokens, uint64_t seed);

// The pairs (i, j) that enter a sequence's value: both valid, and i != j unless with_self.
struct Pairs {
  torch::Tensor mask;    // [B or 1, T, T] bool
  torch::Tensor tokens;  // [B] n, the valid tokens of each sequence, accumulate dtype
  torch::Tensor count;   // [B] n (n - 1), or n^2 with_self; accumulate dtype, >= 1 (1 where a sequence is skipped)
  torch::Tensor used;    // [B] bool, n >= 2
  bool all_used = false; // no padding and T >= 2: lets the common case skip the per-sequence masking
};
Pairs pairs(const torch::Tensor& mask, int64_t batch, int64_t length, torch::ScalarType acc,
            const torch::Device& device, bool with_self = false);

// float32, or float64 for float64 input.
torch::ScalarType accumulate_dtype(const torch::Tensor& hidden);

// Padding rows set to 0 (so garbage there cannot reach the loss or its gradient); hidden itself when mask is
// undefined.
torch::Tensor zero_padding(const torch::Tensor& hidden, const torch::Tensor& mask);

// C + (clamp(C, -1+t, 1-t) - C).detach(): the forward sees the clamped value, the gradient is the identity.
torch::Tensor straight_through_clamp(const torch::Tensor& c, double t);

// G = z z^T per sequence ([B, T, F] -> [B, T, T], in z's dtype). Its backward is one batched matmul,
// dz = (dG + dG^T) z, where autograd's bmm would spend two (one per operand) and a strided add.
torch::Tensor gram(const torch::Tensor& z);

// C = zh zh^T per sequence, computed as G_ij s_i s_j with s = 1/(||z|| + 1e-4) (the reference's epsilon) so that the normalisation (and its
// backward) runs on [B, T] and [B, T, T] tensors rather than on [B, T, F]. [B, T, T] in dtype acc.
torch::Tensor cosine_gram(const torch::Tensor& z, torch::ScalarType acc);

// D = arccos(C') / pi for C = cosine_gram(hidden) and C' its straight-through clamp: [B, T, T] in dtype acc.
torch::Tensor angular_distance(const torch::Tensor& hidden, double t, torch::ScalarType acc);

// Per sequence log mean_{(i,j) in pairs} exp(logits_ij): [B]. Finite (and with a finite gradient) for skipped
// sequences, whose value must then be dropped by sequence_mean.
torch::Tensor log_mean_exp(const torch::Tensor& logits, const Pairs& p);

// Per sequence mean_{(i,j) in pairs} values_ij: [B].
torch::Tensor pair_mean(const torch::Tensor& values, const Pairs& p);

// Mean of per_sequence [B] over the used sequences; 0 (connected to the graph) when none is used.
torch::Tensor sequence_mean(const torch::Tensor& per_sequence, const Pairs& p);

}  // namespace dispersion_parts
}  // namespace spread
