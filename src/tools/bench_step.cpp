// Step-time cost of a change to the objective, measured in one process: the same model and optimizer take
// training steps under objective A (RECIPE with --set) and objective B (the same plus --with), alternating
// A B B A A B ... so that the machine's drift (±15% within minutes here) cancels instead of landing on one side.
// Prints the median step time of each and the cost of B over A (median of the per-pair ratios), then one JSON line.
//   bench_step RECIPE [--set k=v ...] --with loss.dispersion.enabled=true [--pairs 16] [--warmup 2]
// --with may only change the objective (the model, data and batch must stay the same), so that B - A is its cost,
// or train.precision or the optimizer (train.optimizer, train.muon_*): then A and B are two models of the same
// initial weights, each with its own optimizer, and the line says what ran in bf16.
//   bench_step RECIPE --with train.precision=bf16     (bf16 mixed precision against float32)
//   bench_step RECIPE --with train.optimizer=muon     (Muon's step against AdamW's)
//   bench_step RECIPE --with 'data.mix=[...]' --with data.val_shards=...   (a shard mixture's loader against the
//                                                     text's train.bin: the same model on other tokens)
#include <fmt/format.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cxxopts.hpp>
#include <filesystem>
#include <iostream>

#include "spread/run/setup.h"
#include "spread/runtime/allocator.h"
#include "spread/runtime/blas.h"
#include "spread/runtime/precision.h"
#include "spread/tasks/task.h"
#include "spread/train/step.h"
#include "spread/util/error.h"
#include "alternate.h"

namespace fs = std::filesystem;

namespace {

// The keys that choose the optimizer and Muon's options.
void copy_optimizer_keys(const spread::TrainConfig& from, spread::TrainConfig& to) {
  to.optimizer = from.optimizer;
  to.muon_lr = from.muon_lr;
  to.muon_momentum = from.muon_momentum;
  to.muon_nesterov = from.muon_nesterov;
  to.muon_ns_steps = from.muon_ns_steps;
  to.muon_ns_precision = from.muon_ns_precision;
  to.muon_adjust_lr = from.muon_adjust_lr;
}

// The keys that say where an LM's tokens come from: text tokenised into the run, token shards, or a mixture.
void copy_token_source_keys(const spread::DataConfig& from, spread::DataConfig& to) {
  to.source = from.source;
  to.path = from.path;
  to.shards = from.shards;
  to.val_shards = from.val_shards;
  to.mix = from.mix;
}

// B - A is the objective's cost only if nothing but [loss.*] differs (the model, data and optimizer are A's), or
// the precision the same model computes in, or the optimizer, or where the tokens come from (the loader's cost).
void require_same_apart_from_loss(const spread::Recipe& a, spread::Recipe b) {
  b.loss = a.loss;
  b.train.precision = a.train.precision;
  copy_optimizer_keys(a.train, b.train);
  copy_token_source_keys(a.data, b.data);
  if (spread::recipe_to_toml(a) != spread::recipe_to_toml(b))
    throw spread::UserError("bench_step: --with may change only [loss.*] keys (the objective), train.precision, "
                            "the optimizer's keys (train.optimizer, train.muon_*) and where the tokens come from "
                            "(data.source, data.path, data.shards, data.val_shards, data.mix), not the model, run or "
                            "other training settings");
}

// Whether B's optimizer differs from A's.
bool other_optimizer(const spread::Recipe& a, const spread::Recipe& b) {
  spread::Recipe same = b;
  copy_optimizer_keys(a.train, same.train);
  return spread::recipe_to_toml(same) != spread::recipe_to_toml(b);
}

// Steps at the recipe's peak learning rate: the schedule does not change what a step costs.
struct Timer {
  spread::StepInputs in;
  int64_t step = 0;
  double seconds() {
    auto t0 = std::chrono::steady_clock::now();
    spread::optimizer_step(in, step++, 1.0);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
};

struct Args {
  spread::Recipe a, b;
  int64_t pairs = 16, warmup = 2;
};

Args parse(int argc, char** argv) {
  cxxopts::Options options("bench_step", "step-time cost of objective B (--with) over A, alternating in one process");
  options.add_options()("recipe", "recipe file", cxxopts::value<std::string>())(
      "set", "override for both", cxxopts::value<std::vector<std::string>>())(
      "with", "override for B only", cxxopts::value<std::vector<std::string>>())(
      "pairs", "timed A/B pairs", cxxopts::value<int64_t>()->default_value("16"))(
      "warmup", "untimed steps of each first", cxxopts::value<int64_t>()->default_value("2"))("h,help", "help");
  options.parse_positional({"recipe"});
  auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::cout << options.help() << "\n";
    std::exit(0);
  }
  if (!args.count("recipe") || !args.count("with"))
    throw spread::UserError("bench_step: give a RECIPE and at least one --with key=value (see --help)");
  // As `spread train`: each value whole, in the order given (as<vector> would also split one at its commas, and
  // 'data.mix=[{...}, {...}]' holds some).
  auto every = [&](const std::string& name) {
    std::vector<std::string> values;
    for (const auto& kv : args.arguments())
      if (kv.key() == name) values.push_back(kv.value());
    return values;
  };
  const std::vector<std::string> sets = every("set");
  auto with = sets;
  for (const auto& w : every("with")) with.push_back(w);
  const auto path = args["recipe"].as<std::string>();
  Args a{spread::load_recipe(path, sets), spread::load_recipe(path, with), args["pairs"].as<int64_t>(),
         args["warmup"].as<int64_t>()};
  require_same_apart_from_loss(a.a, a.b);
  if (a.pairs < 1 || a.warmup < 0) throw spread::UserError("bench_step: --pairs must be >= 1 and --warmup >= 0");
  return a;
}

int run(int argc, char** argv) {
  Args args = parse(argc, argv);
  const spread::Recipe& ra = args.a;
  auto plan = spread::apply_threads(ra.run.threads);
  fs::path dir = fs::temp_directory_path() / fmt::format("spread_bench_step_{}", ::getpid());
  fs::create_directories(dir);
  struct Cleanup {
    fs::path p;
    ~Cleanup() { fs::remove_all(p); }
  } cleanup{dir};
  const torch::Device device = spread::recipe_device(ra);
  auto quiet = [](const std::string&) {};
  // A folder each: their data may differ (text tokenised into A's, shards read where they are for B).
  auto task_a = spread::make_task(ra, (dir / "a").string(), device, quiet);
  auto task_b = spread::make_task(args.b, (dir / "b").string(), device, quiet);

  const spread::PrecisionPlan precision_a = spread::plan_precision(ra.train.precision, device);
  const spread::PrecisionPlan precision_b = spread::plan_precision(args.b.train.precision, device);
  for (const auto* p : {&precision_a, &precision_b})
    if (p->requested == "bf16") fmt::print("{}\n", p->header_line());
  auto make_model = [&](at::ScalarType matmul_dtype) {
    torch::manual_seed(uint64_t(ra.run.seed));
    auto cfg = spread::model_config(ra, task_a->tokenizer().vocab_size());
    cfg.matmul_dtype = matmul_dtype;
    spread::Transformer m(cfg);
    m->to(device);
    m->train();
    return m;
  };
  // One model and one optimizer when only the objective changes: both objectives train the same weights, as in a
  // run that switched terms on. Two (of the same initial weights) when the precision or the optimizer does.
  spread::Transformer model = make_model(precision_a.matmul_dtype());
  const bool two_models = precision_a.used != precision_b.used || other_optimizer(ra, args.b);
  spread::Transformer model_b = two_models ? make_model(precision_b.matmul_dtype()) : model;
  spread::FlatOptimizer optimizer, optimizer_b_own;
  spread::add_optimizer_groups(optimizer, model, ra.train);
  if (two_models) spread::add_optimizer_groups(optimizer_b_own, model_b, args.b.train);
  spread::FlatOptimizer& optimizer_b = two_models ? optimizer_b_own : optimizer;
  Timer a{{model, optimizer, *task_a, ra.train}};
  Timer b{{model_b, optimizer_b, *task_b, args.b.train}};
  for (int64_t i = 0; i < args.warmup; ++i) a.seconds(), b.seconds();
  const auto t = spread::bench::alternate_pairs(
      args.pairs, [&] { return a.seconds(); }, [&] { return b.seconds(); },
      [&](int64_t i, double x, double y) {
        fmt::print("pair {:>3}/{}: A {:.1f} ms, B {:.1f} ms, B/A {:.3f}\n", i + 1, args.pairs, 1e3 * x, 1e3 * y, y / x);
      });

  const double tokens = double(task_a->work_per_step().count);
  const double cost = 100.0 * (t.median_ratio() - 1.0);
  fmt::print("A {:.1f} ms/step ({:.0f} tokens/s), B {:.1f} ms/step ({:.0f} tokens/s); cost of B: {:+.2f}% "
             "(median of {} alternating pairs; threads LibTorch {}, BLAS {})\n",
             1e3 * t.median_a(), tokens / t.median_a(), 1e3 * t.median_b(), tokens / t.median_b(), cost, args.pairs,
             plan.intra_op, plan.blas);
  const double flops = spread::flops_per_token(model->config(), model->num_parameters());
  fmt::print("{{\"a_ms\": {:.2f}, \"b_ms\": {:.2f}, \"cost_pct\": {:.3f}, \"pairs\": {}, \"tokens_per_step\": {:.0f}, "
             "\"flops_per_token\": {:.0f}, \"a_precision\": \"{}\", \"b_precision\": \"{}\"}}\n",
             1e3 * t.median_a(), 1e3 * t.median_b(), cost, args.pairs, tokens, flops, precision_a.used,
             precision_b.used);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  spread::select_blas_core(argv);  // as the trainer does: the right OpenBLAS kernels and thread split
  spread::tune_allocator();
  try {
    return run(argc, argv);
  } catch (const spread::UserError& e) {
    std::cerr << e.what() << "\n";
    return 2;
  } catch (const cxxopts::exceptions::exception& e) {
    std::cerr << "bench_step: " << e.what() << "\n";
    return 2;
  } catch (const c10::Error& e) {
    std::cerr << "bench_step: " << e.what_without_backtrace() << "\n";
    return 1;
  }
}
