// SOCM over pairs of token lists without d x d matrices; the formulas and the method are in socm.h.
#include "spread/diagnostics/socm.h"

#include "spread/diagnostics/tridiagonal.h"
#include "spread/diagnostics/tridiagonal_lanes.h"
#include "spread/runtime/gemm.h"
#include "spread/util/random.h"

#include <Eigen/Eigenvalues>
#include <Eigen/QR>
#include <Eigen/SVD>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <limits>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <unordered_set>

namespace spread {
namespace {

using Eigen::Index;
using Eigen::MatrixXd;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kMeanEps = 1e-12;  // docs/design.md §7.3: X / (||mu|| + 1e-12), as the reference code
// Rows of the thin basis this small relative to the largest are rounding noise of a rank-deficient list
// (centring alone removes one rank); dropping a row of norm s moves a nuclear norm by at most s * ||Q2||.
constexpr double kDropRow = 1e-10;
// Eigenvalues of a Gram matrix carry an absolute error of about eps * lambda_max, so sqrt(lambda) is accurate
// only while lambda_min stays well above it. Measured against long-double SVDs of 20k graded 1..64 x 1..64
// matrices: worst |sum sqrt(lambda) - ||M||_*| = 3e-13 sigma_max at this ratio, 2e-8 sigma_max below 1e-15.
constexpr double kGramCondition = 1e-8;
// The widest Gram that the default solver takes in lanes (evaluate_pairs says why).
constexpr Index kMaxLaneGram = 128;

// Thin basis of F (n x d): F P = H R (column-pivoted Householder QR, H orthonormal), so F = H (R P^T) and for two
// texts F1 F2^T = H1 (Q1 Q2^T) H2^T with Q = R P^T: same singular values, r1 x r2 instead of n1 x n2. Returns Q^T.
MatrixXd thin_basis_t(const MatrixXd& f) {
  Eigen::ColPivHouseholderQR<MatrixXd> qr(f);
  const Index k = std::min(f.rows(), f.cols());
  MatrixXd r = qr.matrixR().topRows(k).triangularView<Eigen::Upper>();
  MatrixXd q = r * qr.colsPermutation().transpose();
  Eigen::VectorXd norms = q.rowwise().norm();
  const double largest = k > 0 ? norms.maxCoeff() : 0.0;
  std::vector<Index> keep;
  for (Index i = 0; i < k; ++i)
    if (largest > 0 && norms(i) > kDropRow * largest) keep.push_back(i);
  MatrixXd basis_t(f.cols(), Index(keep.size()));
  for (size_t c = 0; c < keep.size(); ++c) basis_t.col(Index(c)) = q.row(keep[c]).transpose();
  return basis_t;
}

// One pair's Gram matrix and its tridiagonal form, kept until the QL of a whole grain of pairs is done.
struct GramSlot {
  MatrixXd gram;
  Eigen::VectorXd diag, off;
};

struct Workspace {
  std::vector<GramSlot> slots;
  std::vector<TridiagonalProblem> problems;
  LaneWork lanes;
  Eigen::VectorXd work;
  int64_t svd_pairs = 0;

  GramSlot& slot(size_t i) {
    if (slots.size() <= i) slots.resize(i + 1);
    return slots[i];
  }
};

// slot.gram = the smaller of M M^T and M^T M (both triangles).
void fill_small_gram(const Eigen::Ref<const MatrixXd>& m, GramSlot& slot) {
  const Index k = std::min(m.rows(), m.cols());
  slot.gram.resize(k, k);
  small_gram(m.data(), m.outerStride(), m.rows(), m.cols(), slot.gram.data());
}

// The symmetric slot.gram (both triangles; destroyed) to tridiagonal form in slot.diag and slot.off, as a problem
// for the root-free QL (tridiagonal.h). With it, about 3x faster than Eigen's solver, whose tridiagonal QR dominated
// the pair loop.
TridiagonalProblem tridiagonal_problem(GramSlot& slot, Workspace& ws) {
  const Index k = slot.gram.rows();
  slot.diag.resize(k);
  slot.off.resize(std::max<Index>(k - 1, 1));
  ws.work.resize(5 * k);
  tridiagonalize_symmetric(slot.gram.data(), k, slot.diag.data(), slot.off.data(), ws.work.data());
  return {slot.diag.data(), slot.off.data(), k};
}

// ||M||_* (M r1 x r2) from the eigenvalues of its small Gram where they are accurate enough, from an SVD otherwise.
double nuclear_norm_from(const TridiagonalProblem& eig, const Eigen::Ref<const MatrixXd>& m, Workspace& ws) {
  if (std::min(m.rows(), m.cols()) == 0) return 0.0;
  if (eig.converged) {
    const Eigen::Map<const Eigen::VectorXd> ev(eig.diag, eig.n);
    const double largest = ev.maxCoeff();
    if (largest <= 0) return 0.0;
    if (ev.minCoeff() >= kGramCondition * largest) return ev.cwiseSqrt().sum();
  }
  ++ws.svd_pairs;
  return Eigen::BDCSVD<MatrixXd>(m).singularValues().sum();
}

// ||M||_* = sum of singular values of M (r1 x r2), for one pair alone.
double nuclear_norm(const Eigen::Ref<const MatrixXd>& m, SocmSolver solver, Workspace& ws) {
  TridiagonalProblem eig{nullptr, nullptr, 0};  // not converged: the SVD
  if (solver == SocmSolver::kAuto && std::min(m.rows(), m.cols()) > 0) {
    fill_small_gram(m, ws.slot(0));
    eig = tridiagonal_problem(ws.slot(0), ws);
    tridiagonal_eigenvalues(&eig, 1);
  }
  return nuclear_norm_from(eig, m, ws);
}

// The reference code's tr sqrt(S Sigma2 S + eps I), S = (Sigma1 + eps I)^{1/2}, from M = Q1 Q2^T (r1 x r2).
// The +eps keeps every square root away from zero, so Gram eigenvalues are accurate here.
double paper_trace_sqrt(const Eigen::Ref<const MatrixXd>& m, const MatrixXd& basis2_t, double eps, Workspace& ws) {
  const Index r2 = basis2_t.cols(), d = basis2_t.rows();
  double sum = double(d - r2) * std::sqrt(eps);
  if (r2 == 0) return sum;
  auto fill_gram = [&] {
    MatrixXd& gram = ws.slot(0).gram;
    gram.setZero(r2, r2);
    if (m.rows() > 0) gram.selfadjointView<Eigen::Lower>().rankUpdate(m.transpose());  // M^T M
    gram.selfadjointView<Eigen::Lower>().rankUpdate(basis2_t.transpose(), eps);         // + eps Q2 Q2^T
    gram.triangularView<Eigen::StrictlyUpper>() = gram.transpose();
  };
  fill_gram();
  TridiagonalProblem eig = tridiagonal_problem(ws.slot(0), ws);
  tridiagonal_eigenvalues(&eig, 1);
  Eigen::VectorXd ev = Eigen::Map<const Eigen::VectorXd>(eig.diag, r2);
  if (!eig.converged) {
    fill_gram();
    ev = Eigen::SelfAdjointEigenSolver<MatrixXd>(ws.slot(0).gram, Eigen::EigenvaluesOnly).eigenvalues();
  }
  for (Index i = 0; i < r2; ++i) sum += std::sqrt(std::max(ev(i), 0.0) + eps);
  return sum;
}

// The pair's values from its tr((Sigma1^1/2 Sigma2 Sigma1^1/2)^1/2).
SocmPair pair_from_trace_sqrt(const SocmText& a, const SocmText& b, double trace_sqrt) {
  SocmPair p;
  p.d_mu = (a.mean - b.mean).squaredNorm() / 4.0;
  p.d_sigma = std::max(0.0, a.trace + b.trace - 2.0 * trace_sqrt) / 4.0;
  p.socm = socm_value(p.d_mu, p.d_sigma);
  return p;
}

SocmPair pair_from_cross(const SocmText& a, const SocmText& b, const Eigen::Ref<const MatrixXd>& m,
                         const SocmOptions& opt, Workspace& ws) {
  return pair_from_trace_sqrt(a, b, opt.paper_compatible ? paper_trace_sqrt(m, b.basis_t, opt.paper_eps, ws)
                                                         : nuclear_norm(m, opt.solver, ws));
}

// Runs of pairs that share their first text.
struct Run {
  size_t begin, end;  // pairs [begin, end)
  uint32_t text;      // their first text
  uint32_t lo, hi;    // their partners lie in [lo, hi)
  Index columns;      // sum of the partners' basis widths
};

std::vector<Run> runs_by_first(const std::vector<SocmText>& texts, const std::vector<TextPair>& pairs) {
  std::vector<Run> runs;
  for (size_t b = 0; b < pairs.size();) {
    Run r{b, b, pairs[b].first, pairs[b].second, pairs[b].second, 0};
    for (; r.end < pairs.size() && pairs[r.end].first == r.text; ++r.end) {
      r.lo = std::min(r.lo, pairs[r.end].second);
      r.hi = std::max(r.hi, pairs[r.end].second);
      r.columns += texts[pairs[r.end].second].basis_t.cols();
    }
    ++r.hi;
    runs.push_back(r);
    b = r.end;
  }
  return runs;
}

// Every basis side by side (d x R), so that the bases of consecutive texts are one operand of a GEMM without a
// copy; text t's columns are [offset[t], offset[t + 1]).
struct PackedBases {
  MatrixXd columns;
  std::vector<Index> offset;
  Index width(uint32_t lo, uint32_t hi) const { return offset[hi] - offset[lo]; }
  auto range(uint32_t lo, uint32_t hi) const { return columns.middleCols(offset[lo], width(lo, hi)); }
};

PackedBases pack_bases(const std::vector<SocmText>& texts, Index dim) {
  PackedBases p;
  p.offset.assign(texts.size() + 1, 0);
  for (size_t t = 0; t < texts.size(); ++t) p.offset[t + 1] = p.offset[t] + texts[t].basis_t.cols();
  p.columns.resize(dim, p.offset.back());
  for (size_t t = 0; t < texts.size(); ++t) p.columns.middleCols(p.offset[t], texts[t].basis_t.cols()) = texts[t].basis_t;
  return p;
}

// Rows of one GEMM: the bases of the first texts of consecutive runs (consecutive texts, so one slice of the packed
// bases) against one column range of partners. A run whose partners fill less than half of their range (a sparse
// sample of pairs) is a block alone, and its partners are gathered instead of multiplying the whole range.
// Tiles (SocmOptions): at most block_rows rows per GEMM, so that the BLAS packs each partner column once per block
// rows; at most chunk_columns partner columns per GEMM, which bounds the cross matrix (16 MiB by default).
struct Block {
  size_t first_run, last_run;  // runs [first_run, last_run)
  uint32_t lo, hi;             // partner texts [lo, hi)
  bool gather;
};

bool is_dense(const Run& r, const PackedBases& packed) { return 2 * r.columns >= packed.width(r.lo, r.hi); }

std::vector<Block> plan_blocks(const std::vector<Run>& runs, const PackedBases& packed, Index block_rows) {
  std::vector<Block> blocks;
  for (size_t k = 0; k < runs.size();) {
    Block b{k, k + 1, runs[k].lo, runs[k].hi, !is_dense(runs[k], packed)};
    if (!b.gather) {
      const uint32_t first = runs[k].text;
      while (b.last_run < runs.size()) {
        const Run& next = runs[b.last_run];
        // All pairs: run i + 1's partners (i + 2 .. n) lie within run i's, so blocks grow to block_rows.
        const bool fits = next.text == runs[b.last_run - 1].text + 1 && is_dense(next, packed) &&
                          next.lo >= b.lo && next.hi <= b.hi && packed.width(first, next.text + 1) <= block_rows;
        if (!fits) break;
        ++b.last_run;
      }
    }
    blocks.push_back(b);
    k = b.last_run;
  }
  return blocks;
}

// Buffers only grow: a fresh multi-megabyte allocation per product would cost page faults every time.
void reserve(MatrixXd& buffer, Index rows, Index cols) {
  if (buffer.rows() < rows || buffer.cols() < cols)
    buffer.resize(std::max(buffer.rows(), rows), std::max(buffer.cols(), cols));
}

// The top-left corner of `buffer` = rows^T cols, through the BLAS (Eigen's own product where there is none).
void cross_product(const Eigen::Ref<const MatrixXd>& rows, const Eigen::Ref<const MatrixXd>& cols, MatrixXd& buffer) {
  reserve(buffer, rows.cols(), cols.cols());
  if (!blas_gemm_tn(rows.cols(), cols.cols(), rows.rows(), rows.data(), rows.outerStride(), cols.data(),
                    cols.outerStride(), buffer.data(), buffer.rows()))
    buffer.topLeftCorner(rows.cols(), cols.cols()).noalias() = rows.transpose() * cols;
}

// One pair to evaluate from the current cross matrix: its index and where its r_i x r_j block starts.
struct PairTask {
  size_t pair;
  Index row, col;
};

struct PairContext {
  const std::vector<SocmText>& texts;
  const std::vector<TextPair>& pairs;
  const SocmOptions& opt;
  std::vector<Workspace>& workspaces;  // one per thread
  std::vector<SocmPair>& out;
};

Eigen::Block<const MatrixXd> cross_block(const PairContext& ctx, const MatrixXd& cross, const PairTask& task) {
  const auto [i, j] = ctx.pairs[task.pair];
  return cross.block(task.row, task.col, ctx.texts[i].basis_t.cols(), ctx.texts[j].basis_t.cols());
}

// The Gram size of a pair's block: min(r_i, r_j).
Index gram_size(const PairContext& ctx, const PairTask& task) {
  const auto [i, j] = ctx.pairs[task.pair];
  return std::min(ctx.texts[i].basis_t.cols(), ctx.texts[j].basis_t.cols());
}

// The default solver on kLanes tasks [begin, begin + kLanes) (fewer at `end`): the Grams' eigenvalues side by
// side (tridiagonal_lanes.h), then each pair's value, or its SVD where the eigenvalues are not accurate enough.
void evaluate_lanes(const PairContext& ctx, const MatrixXd& cross, const std::vector<PairTask>& tasks, size_t begin,
                    size_t end, Workspace& ws) {
  const size_t count = std::min(end - begin, size_t(kLanes));
  LaneMatrix in[kLanes];  // spare lanes stay empty
  double* eigenvalues[kLanes];
  bool converged[kLanes];
  ws.slot(kLanes - 1);
  for (size_t l = 0; l < size_t(kLanes); ++l) {
    if (l < count) {
      const auto block = cross_block(ctx, cross, tasks[begin + l]);
      in[l] = {block.data(), block.outerStride(), block.rows(), block.cols()};
    }
    ws.slots[l].diag.resize(std::max<Index>(std::min(in[l].rows, in[l].cols), 1));
    eigenvalues[l] = ws.slots[l].diag.data();
  }
  gram_eigenvalues(in, eigenvalues, converged, ws.lanes);
  for (size_t l = 0; l < count; ++l) {
    const PairTask& task = tasks[begin + l];
    const auto [i, j] = ctx.pairs[task.pair];
    const TridiagonalProblem solved{eigenvalues[l], nullptr, std::min(in[l].rows, in[l].cols), converged[l]};
    ctx.out[task.pair] =
        pair_from_trace_sqrt(ctx.texts[i], ctx.texts[j], nuclear_norm_from(solved, cross_block(ctx, cross, task), ws));
  }
}

// Runs work(item, workspace) for items [0, count) over the workspaces' threads, `grain` items per fetch. Every
// item depends on its own data alone, so results do not depend on the thread count.
template <class Work>
void run_parallel(const PairContext& ctx, size_t count, size_t grain, const Work& work) {
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto worker = [&](Workspace& ws) {
    try {
      for (size_t b; (b = next.fetch_add(grain)) < count;)
        for (size_t t = b; t < std::min(b + grain, count); ++t) work(t, ws);
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  };
  const size_t threads = std::max<size_t>(1, std::min(ctx.workspaces.size(), (count + grain - 1) / grain));
#ifdef _OPENMP
  // The OpenMP team that the BLAS's GEMM of the next chunk reuses: with threads of our own, its idle team spun on
  // the cores while they worked (a sixth of a core, measured; it is libgomp's wait policy).
#pragma omp parallel num_threads(int(threads))
  worker(ctx.workspaces[size_t(omp_get_thread_num())]);
#else
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker, std::ref(ctx.workspaces[t]));
  worker(ctx.workspaces[0]);
  for (auto& th : pool) th.join();
#endif
  if (failure) std::rethrow_exception(failure);
}

// The default solver one pair at a time over a grain of pairs: all their Grams to tridiagonal form first, so that QL
// can take them two at a time (tridiagonal.h), then each pair's value (or its SVD, where the eigenvalues are not
// accurate enough). For Grams too large for the lanes.
void evaluate_grain(const PairContext& ctx, const MatrixXd& cross, const PairTask* tasks, size_t count,
                    Workspace& ws) {
  ws.problems.clear();
  ws.slot(count - 1);  // all slots first: the problems point into them
  for (size_t t = 0; t < count; ++t) {
    GramSlot& slot = ws.slots[t];
    fill_small_gram(cross_block(ctx, cross, tasks[t]), slot);
    ws.problems.push_back(tridiagonal_problem(slot, ws));
  }
  tridiagonal_eigenvalues(ws.problems.data(), ws.problems.size());
  for (size_t t = 0; t < count; ++t) {
    const auto [i, j] = ctx.pairs[tasks[t].pair];
    ctx.out[tasks[t].pair] = pair_from_trace_sqrt(
        ctx.texts[i], ctx.texts[j], nuclear_norm_from(ws.problems[t], cross_block(ctx, cross, tasks[t]), ws));
  }
}

// The d-independent part, each pair from its block of `cross`, spread over the workspaces' threads. The default
// solver takes Grams up to kMaxLaneGram wide kLanes at a time, sorted by size so that a batch pads little (it costs
// its largest), and larger ones one at a time, whose own loops are then long enough to fill the vectors while a
// lane batch no longer fits the cache (bench_socm, against one at a time throughout: 24-64 tokens 1.3-1.5x,
// 48-128 tokens 1.3-1.4x; 128-256 tokens in lanes as fast, 64-512 tokens 1.7-2.3x slower in lanes).
void evaluate_pairs(const PairContext& ctx, const MatrixXd& cross, std::vector<PairTask>& tasks) {
  if (ctx.opt.solver == SocmSolver::kAuto && !ctx.opt.paper_compatible) {
    std::stable_sort(tasks.begin(), tasks.end(),
                     [&](const PairTask& a, const PairTask& b) { return gram_size(ctx, a) < gram_size(ctx, b); });
    const size_t lane_tasks = size_t(std::partition_point(tasks.begin(), tasks.end(), [&](const PairTask& t) {
                                       return gram_size(ctx, t) <= kMaxLaneGram;
                                     }) -
                                     tasks.begin());
    const size_t batches = (lane_tasks + kLanes - 1) / kLanes, grains = (tasks.size() - lane_tasks + 15) / 16;
    run_parallel(ctx, batches + grains, 1, [&](size_t b, Workspace& ws) {
      if (b < batches) return evaluate_lanes(ctx, cross, tasks, b * kLanes, lane_tasks, ws);
      const size_t begin = lane_tasks + (b - batches) * 16;
      evaluate_grain(ctx, cross, tasks.data() + begin, std::min<size_t>(16, tasks.size() - begin), ws);
    });
    return;
  }
  run_parallel(ctx, tasks.size(), 16, [&](size_t t, Workspace& ws) {
    const auto [i, j] = ctx.pairs[tasks[t].pair];
    ctx.out[tasks[t].pair] = pair_from_cross(ctx.texts[i], ctx.texts[j], cross_block(ctx, cross, tasks[t]), ctx.opt, ws);
  });
}

// A dense block: its rows against its partner range in chunks of whole texts.
void compute_dense_block(const PairContext& ctx, const std::vector<Run>& runs, const Block& block,
                         const PackedBases& packed, MatrixXd& cross) {
  const uint32_t first = runs[block.first_run].text, last = runs[block.last_run - 1].text + 1;
  const auto rows = packed.range(first, last);
  std::vector<PairTask> tasks;
  for (uint32_t c0 = block.lo; c0 < block.hi;) {
    uint32_t c1 = c0 + 1;
    while (c1 < block.hi && packed.width(c0, c1 + 1) <= ctx.opt.chunk_columns) ++c1;
    cross_product(rows, packed.range(c0, c1), cross);
    tasks.clear();
    for (size_t r = block.first_run; r < block.last_run; ++r)
      for (size_t p = runs[r].begin; p < runs[r].end; ++p) {
        const auto [i, j] = ctx.pairs[p];
        if (j >= c0 && j < c1) tasks.push_back({p, packed.width(first, i), packed.width(c0, j)});
      }
    evaluate_pairs(ctx, cross, tasks);
    c0 = c1;
  }
}

// A sparse run: its partners gathered side by side (in chunks), one GEMM per chunk.
void compute_gathered_run(const PairContext& ctx, const Run& run, const PackedBases& packed, MatrixXd& gathered,
                          MatrixXd& cross) {
  const auto rows = packed.range(run.text, run.text + 1);
  std::vector<PairTask> tasks;
  for (size_t c = run.begin; c < run.end;) {
    size_t stop = c;
    Index cols = 0;
    while (stop < run.end && (stop == c || cols + packed.width(ctx.pairs[stop].second, ctx.pairs[stop].second + 1) <=
                                               ctx.opt.chunk_columns))
      cols += packed.width(ctx.pairs[stop].second, ctx.pairs[stop].second + 1), ++stop;
    if (gathered.rows() != packed.columns.rows()) gathered.resize(packed.columns.rows(), 0);
    reserve(gathered, gathered.rows(), cols);
    tasks.clear();
    Index off = 0;
    for (size_t p = c; p < stop; ++p) {
      const uint32_t j = ctx.pairs[p].second;
      gathered.middleCols(off, packed.width(j, j + 1)) = packed.range(j, j + 1);
      tasks.push_back({p, 0, off});
      off += packed.width(j, j + 1);
    }
    cross_product(rows, gathered.leftCols(cols), cross);
    evaluate_pairs(ctx, cross, tasks);
    c = stop;
  }
}

double mean_of(const std::vector<SocmPair>& v, double SocmPair::*field) {
  if (v.empty()) return kNaN;
  double s = 0;
  for (const auto& p : v) s += p.*field;
  return s / double(v.size());
}

std::vector<double> column_of(const std::vector<SocmPair>& v, double SocmPair::*field) {
  std::vector<double> out;
  out.reserve(v.size());
  for (const auto& p : v) out.push_back(p.*field);
  return out;
}

}  // namespace

SocmText socm_prepare(const Eigen::Ref<const MatrixXd>& tokens) {
  if (tokens.rows() == 0) throw std::invalid_argument("socm_prepare: a token list needs at least one token");
  const double n = double(tokens.rows());
  Eigen::RowVectorXd mu = tokens.colwise().mean();
  const double scale = 1.0 / (mu.norm() + kMeanEps);
  SocmText t;
  t.tokens = tokens.rows();
  t.dim = tokens.cols();
  t.mean = (mu * scale).transpose();
  MatrixXd f = (tokens.rowwise() - mu) * (scale / std::sqrt(n));  // F = Xc / sqrt(n), so Sigma = F^T F
  t.trace = f.squaredNorm();
  t.basis_t = thin_basis_t(f);
  return t;
}

SocmPair socm_pair(const SocmText& a, const SocmText& b, const SocmOptions& opt) {
  if (a.dim != b.dim) throw std::invalid_argument("socm_pair: token lists of different dimension");
  Workspace ws;
  MatrixXd m = a.basis_t.transpose() * b.basis_t;
  return pair_from_cross(a, b, m, opt, ws);
}

std::vector<TextPair> socm_pair_list(int64_t n_texts, int64_t max_pairs, uint64_t seed) {
  const uint64_t n = n_texts > 1 ? uint64_t(n_texts) : 0;
  if (n > std::numeric_limits<uint32_t>::max()) throw std::invalid_argument("socm_pair_list: too many texts");
  const uint64_t total = n > 1 ? n * (n - 1) / 2 : 0;
  std::vector<TextPair> pairs;
  if (max_pairs <= 0 || uint64_t(max_pairs) >= total) {
    pairs.reserve(total);
    for (uint32_t i = 0; i + 1 < n; ++i)
      for (uint32_t j = i + 1; j < n; ++j) pairs.emplace_back(i, j);
    return pairs;
  }
  // Floyd's sampling: k distinct indices of [0, total) in O(k) draws.
  std::mt19937_64 rng(seed);
  std::unordered_set<uint64_t> chosen;
  chosen.reserve(size_t(max_pairs) * 2);
  for (uint64_t j = total - uint64_t(max_pairs); j < total; ++j)
    if (!chosen.insert(draw_below(rng, j + 1)).second) chosen.insert(j);
  std::vector<uint64_t> linear(chosen.begin(), chosen.end());
  std::sort(linear.begin(), linear.end());
  // Linear index -> (i, j) in row-major order of the upper triangle: row i holds n - 1 - i pairs.
  pairs.reserve(linear.size());
  uint64_t i = 0, row_start = 0;
  for (uint64_t l : linear) {
    while (l >= row_start + (n - 1 - i)) row_start += n - 1 - i++;
    pairs.emplace_back(uint32_t(i), uint32_t(i + 1 + (l - row_start)));
  }
  return pairs;
}

std::vector<SocmPair> socm_pairs(const std::vector<SocmText>& texts, const std::vector<TextPair>& pairs,
                                 const SocmOptions& opt, int64_t* svd_pairs) {
  std::vector<SocmPair> out(pairs.size());
  if (svd_pairs) *svd_pairs = 0;
  if (pairs.empty()) return out;
  const Index dim = texts.empty() ? 0 : texts[0].dim;
  for (const auto& [i, j] : pairs)
    if (i >= j || j >= texts.size()) throw std::invalid_argument("socm_pairs: pair out of range or not i < j");
  for (const auto& t : texts)
    if (t.dim != dim) throw std::invalid_argument("socm_pairs: token lists of different dimensions");
  const int threads = opt.threads > 0 ? opt.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<Workspace> workspaces(static_cast<size_t>(threads));
  const PairContext ctx{texts, pairs, opt, workspaces, out};

  const PackedBases packed = pack_bases(texts, dim);
  const auto runs = runs_by_first(texts, pairs);
  MatrixXd gathered, cross;
  for (const Block& block : plan_blocks(runs, packed, opt.block_rows)) {
    if (block.gather) compute_gathered_run(ctx, runs[block.first_run], packed, gathered, cross);
    else compute_dense_block(ctx, runs, block, packed, cross);
  }
  if (svd_pairs)
    for (const auto& ws : workspaces) *svd_pairs += ws.svd_pairs;
  return out;
}

Quantiles quantiles(std::vector<double> values) {
  if (values.empty()) return {kNaN, kNaN, kNaN, kNaN, kNaN};
  std::sort(values.begin(), values.end());
  auto at = [&](double p) {
    const double h = p * double(values.size() - 1);
    const size_t lo = size_t(std::floor(h));
    const size_t hi = std::min(lo + 1, values.size() - 1);
    return values[lo] + (h - double(lo)) * (values[hi] - values[lo]);
  };
  return {at(0.05), at(0.25), at(0.50), at(0.75), at(0.95)};
}

SocmSummary socm_summary(const std::vector<SocmText>& texts, const SocmOptions& opt) {
  SocmSummary s;
  s.texts = int64_t(texts.size());
  const auto pairs = socm_pair_list(s.texts, opt.max_pairs, opt.seed);
  const auto values = socm_pairs(texts, pairs, opt, &s.svd_pairs);
  s.pairs = int64_t(values.size());
  s.socm = mean_of(values, &SocmPair::socm);
  s.d_mu = mean_of(values, &SocmPair::d_mu);
  s.d_sigma = mean_of(values, &SocmPair::d_sigma);
  s.socm_q = quantiles(column_of(values, &SocmPair::socm));
  s.d_mu_q = quantiles(column_of(values, &SocmPair::d_mu));
  s.d_sigma_q = quantiles(column_of(values, &SocmPair::d_sigma));
  s.texts_over_trace = count_over_trace(texts);
  return s;
}

int64_t count_over_trace(const std::vector<SocmText>& texts) {
  return std::count_if(texts.begin(), texts.end(), [](const SocmText& t) { return t.trace > kSocmTraceLimit; });
}

SocmMeans socm_means(const std::vector<MatrixXd>& token_lists, const SocmOptions& opt) {
  std::vector<SocmText> texts;
  for (const auto& x : token_lists)
    if (x.rows() > 0) texts.push_back(socm_prepare(x));
  const auto values = socm_pairs(texts, socm_pair_list(int64_t(texts.size()), opt.max_pairs, opt.seed), opt);
  return {mean_of(values, &SocmPair::socm), mean_of(values, &SocmPair::d_mu), mean_of(values, &SocmPair::d_sigma),
          int64_t(values.size()), int64_t(texts.size()), count_over_trace(texts)};
}

}  // namespace spread
