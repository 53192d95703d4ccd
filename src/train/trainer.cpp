#include "spread/train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <sys/resource.h>
#include <torch/version.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <optional>
#include <thread>

#include "spread/interchange/export.h"
#include "spread/interchange/hf_import.h"
#include "spread/interchange/sentence_modules_record.h"
#include "spread/log/metrics_log.h"
#include "spread/log/progress.h"
#include "spread/run/best_checkpoint.h"
#include "spread/run/checkpoint.h"
#include "spread/run/run_files.h"
#include "spread/run/run_lock.h"
#include "spread/run/setup.h"
#include "spread/runtime/allocator.h"
#include "spread/runtime/blas.h"
#include "spread/runtime/devices.h"
#include "spread/runtime/precision.h"
#include "spread/tasks/task.h"
#include "spread/train/distributed.h"
#include "spread/train/memory_estimate.h"
#include "spread/train/optimizer.h"
#include "spread/train/schedule.h"
#include "spread/train/step.h"
#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/model_folder.h"
#include "spread/util/random.h"

namespace fs = std::filesystem;

namespace spread {
namespace {

std::atomic<int> g_stop_signal{0};
bool g_quiet = false;  // the ranks other than 0 of a data-parallel run print nothing but errors

extern "C" void on_stop_signal(int sig) {
  g_stop_signal = sig;
  std::signal(sig, SIG_DFL);  // a second signal ends the process at once
}

void say(const std::string& line) {
  if (g_quiet) return;
  fmt::print("{}\n", line);
  std::fflush(stdout);
}

double peak_rss_mib() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// Everything a run holds while it trains.
struct Run {
  Recipe recipe;
  PrecisionPlan precision;
  std::string dir;
  torch::Device device{torch::kCPU};
  std::unique_ptr<TrainingTask> task;
  Transformer model{nullptr};
  FlatOptimizer optimizer;
  LrSchedule schedule;
  int64_t step = 0;  // optimizer steps completed
  double elapsed_s = 0;  // training time summed over sessions (resumes)
  std::unique_ptr<ProcessGroup> group;  // data-parallel (train/distributed.h); null for one process
  std::unique_ptr<GradientSync> sync;   // data-parallel with the all-reduce overlapping backward
  int64_t rank = 0, world = 1;          // only rank 0 writes the run directory
  std::optional<DistributedEnv> dist;   // from the environment (torchrun, spread train --nproc)
  ThreadPlan threads;
  BlasInfo blas;
  MemoryEstimate memory;                // of one rank, before anything was allocated
  std::optional<BestEvaluation> best;   // train.keep_best: the best evaluation so far (rank 0)
  // Rank 0's hold on the run directory. The cleanup comes after the lock, so that it is destroyed (and removes a
  // fresh run's half-made directory after a failed start) while the lock is still held.
  std::optional<RunLock> lock;
  std::optional<FreshStartCleanup> cleanup;
};

// Every rank's CPU generator state, in rank order ([world, state bytes]): dropout masks differ between ranks, so a
// bitwise resume needs each rank's own generator, not only rank 0's. A collective: every rank calls it at the same
// step, before anything else draws from the generator.
torch::Tensor gather_generator_states(Run& run) {
  const torch::Tensor mine = at::detail::getDefaultCPUGenerator().get_state();
  return run.group ? run.group->all_gather(mine).cpu() : mine.unsqueeze(0);
}

// `generators`: gather_generator_states. "rng.cpu" stays rank 0's alone, as in checkpoints of a single process
// (which older spreads wrote and still read); "rng.cpu.ranks" holds every rank's.
Checkpoint make_checkpoint(const Run& run, const torch::Tensor& generators) {
  Checkpoint c;
  c.step = run.step;
  for (const auto& item : run.model->named_parameters()) c.tensors["model." + item.key()] = item.value().detach().clone();
  for (const auto& g : run.optimizer.groups()) {
    c.tensors["optim." + g.name + ".exp_avg"] = g.exp_avg;
    if (g.rule == UpdateRule::adamw) c.tensors["optim." + g.name + ".exp_avg_sq"] = g.exp_avg_sq;
    c.meta["optim"][g.name] = {{"step", g.step}, {"lr", g.options.lr}, {"weight_decay", g.options.weight_decay}};
    if (g.rule == UpdateRule::adamw)
      c.meta["optim"][g.name].update({{"rule", "adamw"}, {"beta1", g.options.beta1}, {"beta2", g.options.beta2},
                                      {"eps", g.options.eps}});
    else
      c.meta["optim"][g.name].update({{"rule", "muon"}, {"momentum", g.muon.momentum}, {"nesterov", g.muon.nesterov},
                                      {"ns_steps", g.muon.ns_steps}, {"ns_bf16", g.muon.ns_bf16}});
  }
  c.tensors["rng.cpu"] = generators[0].clone();
  c.tensors["rng.cpu.ranks"] = generators;
  const WorkPerStep work = run.task->work_per_step();
  c.meta[work.unit == "tok" ? "tokens_seen" : work.unit + "_seen"] = run.step * work.count * run.world;
  c.meta["world_size"] = run.world;
  c.meta["elapsed_s"] = run.elapsed_s;
  c.meta["torch_version"] = TORCH_VERSION;
  return c;
}

void restore_checkpoint(Run& run, const Checkpoint& c, const std::string& source) {
  torch::NoGradGuard no_grad;
  load_model_weights(run.model, c.tensors, source);
  for (auto& g : run.optimizer.groups()) {
    const auto m = c.tensors.find("optim." + g.name + ".exp_avg");
    const auto v = c.tensors.find("optim." + g.name + ".exp_avg_sq");
    const bool adamw = g.rule == UpdateRule::adamw;
    if (m == c.tensors.end() || (adamw && v == c.tensors.end()) || m->second.numel() != g.exp_avg.numel() ||
        (adamw && v->second.numel() != g.exp_avg_sq.numel()))
      throw user_error(source, 0, "train.optimizer",
                       "optimizer state of group '" + g.name + "' is missing or has another size",
                       "resume with the train.optimizer that wrote the checkpoint, or start a new run from it with "
                       "train.init_from");
    g.exp_avg.copy_(m->second);
    if (adamw) g.exp_avg_sq.copy_(v->second);
    g.step = c.meta.at("optim").at(g.name).at("step").get<int64_t>();
  }
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  generator.set_state(c.tensors.at("rng.cpu"));
  run.step = c.step;
  run.elapsed_s = c.meta.value("elapsed_s", 0.0);
}

void write_run_info(const Run& run) {
  const BlasInfo& blas = run.blas;
  const ThreadPlan& threads = run.threads;
  nlohmann::json info = {{"blas", blas.library},
                         {"blas_core", blas.core},
                         {"blas_threading", blas.threading},
                         {"blas_config", blas.config},
                         {"blas_coretype_origin", blas.coretype_origin},
                         {"intra_op_threads", threads.intra_op},
                         {"blas_threads", threads.blas},
                         {"allocator", allocator_info()},
                         {"torch_version", TORCH_VERSION},
                         {"device", run.device.str()},
                         {"precision", run.precision.to_json()},
                         {"parameters", run.model->num_parameters()}};
  write_file_atomic((fs::path(run.dir) / "run.json").string(), info.dump(2) + "\n");
}

void print_header(const Run& run, bool resumed) {
  const auto& m = run.recipe.model;
  const BlasInfo& blas = run.blas;
  const ThreadPlan& threads = run.threads;
  say(fmt::format("spread {} run '{}' in {}", resumed ? "resuming" : "starting", run.recipe.run.name, run.dir));
  const int64_t ids = run.task->tokenizer().vocab_size(), rows = run.model->config().vocab_size;
  say(fmt::format("model: {} layers, {} heads, width {}, block {}, vocab {}{}: {:.2f}M parameters", m.n_layer,
                  m.n_head, m.n_embd, m.block_size, ids, rows == ids ? "" : fmt::format(" ({} embedding rows)", rows),
                  run.model->num_parameters() / 1e6));
  say(fmt::format("BLAS: {} ({}) core {} ({}); threads: LibTorch {}, BLAS {}; device {}", blas.library,
                  blas.threading.empty() ? "?" : blas.threading, blas.core.empty() ? "?" : blas.core,
                  blas.coretype_origin, threads.intra_op, threads.blas, run.device.str()));
  say(device_line(device_report()));
  say(fmt::format("allocator: {}; memory: about {:.2f} GiB per rank estimated from the recipe", allocator_info(),
                  run.memory.peak() / (1024.0 * 1024.0 * 1024.0)));
  say(run.precision.header_line());
}

bool due(int64_t every, int64_t step, int64_t last) { return every > 0 && (step % every == 0 || step == last); }

// Every diagnostics.every steps, and every early_every steps up to early_until (a fresh LM's condensation peaks
// within its first ~50 steps; docs/design.md §3.5).
bool probe_due(const DiagnosticsConfig& d, int64_t step, int64_t last) {
  return due(d.every, step, last) || (d.early_every > 0 && step <= d.early_until && step % d.early_every == 0);
}

StepResult train_step(Run& run) {
  StepInputs in{run.model, run.optimizer, *run.task, run.recipe.train, run.group.get(), run.sync.get()};
  StepResult r = optimizer_step(in, run.step, run.schedule.scale(run.step));
  if (r.finite) ++run.step;  // a skipped update is counted by the caller, which logs it
  return r;
}

void write_probe(Run& run, MetricsLog& log) {
  nlohmann::json d = run.task->probe(run.model);
  d["step"] = run.step;
  log.write(d);
}

// Saves a checkpoint, unless the state holds NaN or Inf: then nothing is written (the newest checkpoint stays the
// last finite one) and the reason is returned for the caller to stop the run as diverged. Every rank calls it (its
// generator goes into the checkpoint); rank 0 alone checks and writes.
std::optional<std::string> save(Run& run, MetricsLog& log, const std::string& why) {
  const torch::Tensor generators = gather_generator_states(run);
  if (run.rank != 0) return std::nullopt;
  if (!output_is_finite(run.model, run.device))
    return fmt::format("the model's output is NaN or Inf after step {}", run.step);
  const Checkpoint c = make_checkpoint(run, generators);
  if (auto bad = first_non_finite(c)) return fmt::format("'{}' holds NaN or Inf after step {}", *bad, run.step);
  const std::optional<int64_t> best_step = run.best ? std::optional<int64_t>(run.best->step) : std::nullopt;
  std::string path = save_checkpoint(run.dir, c, run.recipe.train.keep_last, best_step);
  if (run.best && run.best->step == run.step) write_best(run.dir, *run.best);
  log.write({{"step", run.step}, {"event", "checkpoint"}, {"why", why}});
  say(fmt::format("checkpoint: {} ({})", path, why));
  return std::nullopt;
}

// train.keep_best: remembers this evaluation when its metric is the best so far; the checkpoint saved at this step
// (every evaluation step is one, recipe validation says) then records it in best.json.
void note_best(Run& run, const Evaluation& e, MetricsLog& log) {
  const std::string& metric = run.recipe.train.keep_best;
  if (metric.empty()) return;
  if (!e.metrics.contains(metric) || !e.metrics[metric].is_number()) {
    std::string names;
    for (const auto& [key, value] : e.metrics.items())
      if (value.is_number() && key != "step") names += (names.empty() ? "" : ", ") + key;
    throw user_error(run.recipe.source, 0, "train.keep_best", "'" + metric + "' is not among the evaluation's metrics",
                     "use one of: " + names);
  }
  const double value = e.metrics[metric].get<double>();
  if (!improves(metric, value, run.best)) return;
  run.best = BestEvaluation{metric, value, run.step};
  log.write({{"step", run.step}, {"event", "best"}, {"metric", metric}, {"value", value}});
}

// The end of a run that can no longer learn: the reason goes to metrics.jsonl, so that compare and report show it.
int stop_diverged(const Run& run, MetricsLog& log, const std::string& reason) {
  log.write({{"step", run.step}, {"event", "diverged"}, {"reason", reason}});
  const auto ckpts = list_checkpoints(run.dir);
  say(fmt::format("stopping: the run diverged ({}). Lower train.lr, raise train.warmup_steps or check the data; {}.",
                  reason, ckpts.empty() ? "no checkpoint was saved"
                                        : "the newest checkpoint, " + ckpts.front() + ", holds the last finite state"));
  return kExitDiverged;
}

// SIGINT/SIGTERM: the state is saved (unless this step's scheduled checkpoint just did), then 128 + signal is
// returned, the code shells expect of a process stopped by that signal, so `spread train R && next` stops here.
int stop_on_signal(Run& run, MetricsLog& log, bool just_saved, int sig) {
  say(fmt::format("signal {} received: saving and stopping", sig));
  if (!just_saved)
    if (auto bad = save(run, log, "signal")) return stop_diverged(run, log, *bad);
  log.write({{"step", run.step}, {"event", "interrupted"}});
  say("resume with: spread train --resume " + run.dir);
  return kExitSignalBase + sig;
}

DataShard data_shard(const Run& run) {
  DataShard shard{run.rank, run.world, {}};
  if (run.group) shard.all_gather = [group = run.group.get()](const torch::Tensor& t) { return group->all_gather(t); };
  return shard;
}

void open_run(Run& run, TrainStart start, const std::function<void(const std::string&)>& note) {
  if (start == TrainStart::Fresh && !list_checkpoints(run.dir).empty())
    throw user_error(run.dir, 0, "run.name",
                     "this run directory already holds checkpoints; refusing to overwrite them",
                     "continue it with `spread train --resume " + run.dir + "`, or choose another run.name");
  // Every directory the run writes into (itself, and ckpt/ of save_checkpoint), checked before the first step
  // rather than at the first checkpoint.
  for (const fs::path& dir : {fs::path(run.dir), fs::path(run.dir) / "ckpt"}) require_writable_directory(dir.string());
  if (start == TrainStart::Fresh) {
    for (const char* stale : {"tokenizer.model", "tokenizer.chars", "tokenizer.json", "train.bin", "val.bin",
                              "metrics.jsonl", kRunFilesName, kSentenceModulesRecord})
      remove_file((fs::path(run.dir) / stale).string());
    write_file_atomic((fs::path(run.dir) / "recipe.toml").string(), recipe_to_toml(run.recipe));
    if (!run.recipe.train.init_from.empty()) copy_tokenizer_files(run.recipe, run.dir);
    if (const auto wrapper = sentence_modules_of(run.recipe.train.init_from)) record_sentence_modules(run.dir, *wrapper);
  }
  // A resumed run must find the files its checkpoints were trained with, before the task rebuilds a missing one
  // and again after (a rebuilt token file must equal the recorded one).
  // The shards are read where they are: the same files must be there, unchanged.
  const std::vector<ShardList> shards = shard_lists(run.recipe);
  if (start == TrainStart::Resume) verify_run_files(run.dir, MissingTokenFiles::Allowed, shards);
  run.task = make_task(run.recipe, run.dir, run.device, note, data_shard(run));
  if (start == TrainStart::Fresh || !has_run_files_record(run.dir)) record_run_files(run.dir, shards);
  else verify_run_files(run.dir, MissingTokenFiles::Refused);  // the shards were checked above
}

// The head a ColBERT adds to a folder's encoder starts as PyLate's Dense does: torch.nn.Linear's default,
// U(-1/sqrt(width), 1/sqrt(width)), not N(0, 0.02) as spread's own models do. AdamW moves each weight by about lr a
// step whatever its size, so the starting scale decides how fast the head turns.
void draw_head_as_pylate(Transformer& model) {
  torch::NoGradGuard no_grad;
  model->head->reset_parameters();
}

// [train] init_from: the model weights (only) of another run's newest valid checkpoint, of a `spread export` of an
// LM (GPT-2 or Llama), or of a Hugging Face model folder.
void init_from_run(Run& run) {
  const std::string& from = run.recipe.train.init_from;
  if (is_foreign_model_folder(from)) {
    HfModelFolder folder = read_hf_model_folder(from);
    // The tokens a ColBERT adds to the folder's tokenizer (adopt_model_folder) get rows of their own.
    const int64_t added = resize_token_rows(folder.weights, run.model->config().vocab_size);
    load_model_weights(run.model, folder.weights, folder.model_dir, MissingHead::KeepInitial);
    const bool fresh_head = run.model->config().head_dim > 0 && !folder.weights.count("model.head.weight");
    if (fresh_head) draw_head_as_pylate(run.model);
    const std::string added_rows =
        added > 0
            ? fmt::format("; {} embedding rows added for its tokenizer's new tokens, at the mean of its rows", added)
            : "";
    say(fmt::format("init_from: model weights of the {} folder {}{}{}", folder.architecture, from,
                    fresh_head ? " (the multi-vector head is fresh, drawn as PyLate draws one)" : "", added_rows));
    return;
  }
  if (is_hf_model_dir(from)) {
    load_model_weights(run.model, read_exported_lm_weights(from, run.model->config()), from);
    say(fmt::format("init_from: model weights of the exported folder {}", from));
    return;
  }
  std::vector<std::string> warnings;
  auto ckpt = load_latest_checkpoint(from, &warnings);
  for (const auto& w : warnings) say("warning: " + w);
  if (!ckpt)
    throw user_error(run.recipe.source, 0, "train.init_from", "'" + from + "' has no readable checkpoint",
                     "point it at a run directory that has trained (spread train) or a GPT-2 export");
  try {
    load_model_weights(run.model, ckpt->tensors, from, MissingHead::KeepInitial);
  } catch (const UserError& e) {
    throw user_error(run.recipe.source, 0, "train.init_from", std::string("does not fit this model: ") + e.what(),
                     "use the [model] shape of " + from + "/recipe.toml");
  }
  const bool fresh_head = run.model->config().head_dim > 0 && !ckpt->tensors.count("model.head.weight");
  say(fmt::format("init_from: model weights of {} at step {}{}", from, ckpt->step,
                  fresh_head ? " (it has no multi-vector head: the head starts from its initial values)" : ""));
}

// Threads per rank: run.threads, or the cores shared out among the ranks on this host.
int64_t rank_threads(const Recipe& recipe, const std::optional<DistributedEnv>& env) {
  if (recipe.run.threads > 0 || !env) return recipe.run.threads;
  const auto cores = int64_t(std::max(1u, std::thread::hardware_concurrency()));
  return std::max<int64_t>(1, cores / env->local_world);
}

// Every rank must train the same recipe (resolved: overrides applied, paths absolute): the checksums of its TOML are
// compared; every rank refuses a run where one differs (exit code 2 everywhere, no rank left waiting).
void refuse_different_recipes(Run& run) {
  const auto mine = int64_t(fnv1a64(recipe_to_toml(run.recipe)));
  const auto all = run.group->all_gather(torch::tensor({mine}, torch::kLong)).cpu().view(-1);
  std::vector<int64_t> differ;
  for (int64_t r = 1; r < run.world; ++r)
    if (all[r].item<int64_t>() != all[0].item<int64_t>()) differ.push_back(r);
  if (differ.empty()) return;
  throw user_error(run.recipe.source, 0, "", fmt::format("the resolved recipe of rank(s) {} differs from rank 0's "
                   "(checksum {:016x} on rank 0, {:016x} on rank {})", fmt::join(differ, ", "),
                   uint64_t(all[0].item<int64_t>()), uint64_t(all[differ[0]].item<int64_t>()), differ[0]),
                   "start every rank with the same recipe file, the same --set overrides and the same paths");
}

// Rank 0 tells the others whether what only it does (lock, check and open the run directory) succeeded, so that
// its refusal stops them with exit code 2 too instead of leaving them waiting for it.
void agree(Run& run, bool failed) {
  if (!run.group) return;
  const bool any_failed = run.group->mean({failed ? 1.0 : 0.0})[0] > 0;
  if (any_failed && run.rank != 0)
    throw UserError(fmt::format("rank {}: rank 0 refused the run; its output says why", run.rank));
}

// Rank 0's weights, optimizer moments and counters copied into every rank (a fresh run, init_from or a resume).
void share_state(Run& run) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> tensors;
  std::vector<double> counters{double(run.step), run.elapsed_s};
  for (auto& g : run.optimizer.groups()) {
    counters.push_back(double(g.step));
    if (g.data.numel() > 0) tensors.insert(tensors.end(), {g.data, g.exp_avg});
    if (g.exp_avg_sq.numel() > 0) tensors.push_back(g.exp_avg_sq);
  }
  auto scalars = torch::tensor(counters, torch::kDouble).to(run.device);
  tensors.push_back(scalars);
  run.group->broadcast(tensors);
  scalars = scalars.cpu();
  run.step = int64_t(scalars[0].item<double>());
  run.elapsed_s = scalars[1].item<double>();
  for (size_t i = 0; i < run.optimizer.groups().size(); ++i)
    run.optimizer.groups()[i].step = int64_t(scalars[int64_t(i) + 2].item<double>());
}

// A resume continues every rank's generator from the checkpoint's "rng.cpu.ranks" (sent by rank 0, which read
// it). A fresh run, or a checkpoint that holds rank 0's generator alone (written by an older spread), starts the
// other ranks' generators from the seed, the rank and the step: their dropout masks must differ from rank 0's.
void share_generators(Run& run, const torch::Tensor& saved) {
  const int64_t bytes = at::detail::getDefaultCPUGenerator().get_state().numel();
  auto found = torch::zeros({1}, torch::kUInt8);
  auto states = torch::zeros({run.world, bytes}, torch::kUInt8);
  if (run.rank == 0 && saved.defined() && saved.sizes() == states.sizes()) {
    found.fill_(1);
    states.copy_(saved);
  }
  std::vector<torch::Tensor> tensors{found.to(run.device), states.to(run.device)};
  run.group->broadcast(tensors);
  if (tensors[0].cpu().item<uint8_t>() == 1) {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    // A copy, not the row's view: LibTorch 2.x's set_state ignores a view's storage offset (every rank but 0 then
    // failed with "Invalid mt19937 state").
    generator.set_state(tensors[1][run.rank].cpu().clone());
  } else if (run.rank != 0) {
    torch::manual_seed(uint64_t(run.recipe.run.seed) + 1000003ULL * uint64_t(run.rank) + uint64_t(run.step));
  }
}

// The largest stop signal any rank has received (0: none), so that every rank stops after the same step.
int agreed_stop_signal(Run& run) {
  if (!run.group) return g_stop_signal.load();
  return int(run.group->all_gather(torch::tensor({int64_t(g_stop_signal.load())}, torch::kLong)).max().item<int64_t>());
}

int train_run(const Recipe& recipe, TrainStart start);

}  // namespace

int train(const Recipe& recipe, TrainStart start) {
  try {
    return train_run(recipe, start);
  } catch (const PeerLost& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return kExitPeerLost;
  }
}

namespace {

// The recipe as the run saves it: paths absolute, so that a resume from another working directory finds its files.
Recipe recipe_to_save(const Recipe& given, TrainStart start) {
  // init_from of a model folder: its shape and tokenizer; a resumed run's recipe.toml holds them already (and the
  // folder may have moved since).
  Recipe recipe = start == TrainStart::Fresh ? adopt_model_folder(given) : given;
  for (auto& path : recipe.data.path) path = fs::absolute(path).lexically_normal().string();
  // Shard patterns too: glob(7) characters pass through fs::absolute untouched.
  for (std::string* pattern : {&recipe.data.shards, &recipe.data.val_shards})
    if (!pattern->empty()) *pattern = fs::absolute(*pattern).lexically_normal().string();
  for (auto& entry : recipe.data.mix) entry.shards = fs::absolute(entry.shards).lexically_normal().string();
  for (std::string* path : {&recipe.tokenizer.model, &recipe.train.init_from, &recipe.eval.sts, &recipe.eval.beir,
                            &recipe.data.root})
    if (!path->empty()) *path = fs::absolute(*path).lexically_normal().string();
  return recipe;
}

// This process's place: device, threads, and its rank among the data-parallel ones.
void join_ranks(Run& run) {
  run.dir = run.recipe.run_dir();
  run.device = recipe_device(run.recipe);
  run.dist = distributed_env();
  // One GPU per rank of a host: "cuda" is cuda:LOCAL_RANK (NCCL refuses two ranks on one GPU).
  if (run.dist && run.device.is_cuda() && !run.device.has_index())
    run.device = torch::Device(torch::kCUDA, c10::DeviceIndex(run.dist->local_rank));
  run.threads = apply_threads(rank_threads(run.recipe, run.dist));
  g_quiet = false;
  if (!run.dist) return;
  run.group = ProcessGroup::connect(*run.dist, run.device);
  run.rank = run.dist->rank;
  run.world = run.dist->world;
  g_quiet = run.rank != 0;
  refuse_different_recipes(run);
}

// The checkpoint a resume continues from, checked before anything is rebuilt or written.
Checkpoint checkpoint_to_resume(const Run& run) {
  Checkpoint c = checkpoint_to_use(run.dir, [](const std::string& w) { say("warning: " + w); });
  const int64_t trained_on = c.meta.value("world_size", int64_t(1));
  if (trained_on != run.world)
    throw user_error(c.path, 0, "WORLD_SIZE", fmt::format("this checkpoint was trained by {} rank(s), this run has {}",
                                                          trained_on, run.world),
                     fmt::format("resume with the same number of ranks (--nproc {} or torchrun --nproc-per-node {})",
                                 trained_on, trained_on));
  return c;
}

// Rank 0 locks the run directory and prepares the task's data in it; the other ranks then read what it built (on
// another host they build their own copy). Returns the checkpoint to resume from.
std::optional<Checkpoint> claim_run_dir(Run& run, TrainStart start) {
  if (start == TrainStart::Fresh && run.rank == 0) run.cleanup.emplace(run.dir);
  make_directories(run.dir);  // the lock lives inside; creating an empty directory harms no other process
  std::optional<Checkpoint> resume_from;
  if (run.rank == 0) {
    try {
      run.lock.emplace(run.dir);
      if (run.cleanup) run.cleanup->arm();
      if (start == TrainStart::Resume) resume_from = checkpoint_to_resume(run);
      open_run(run, start, say);
    } catch (const UserError&) {
      agree(run, true);
      throw;
    }
  }
  agree(run, false);
  if (run.rank != 0) run.task = make_task(run.recipe, run.dir, run.device, say, data_shard(run));
  return resume_from;
}

// The model and optimizer, from the seed, init_from or the checkpoint, the same on every rank.
void build_model(Run& run, TrainStart start, std::optional<Checkpoint> resume_from) {
  const Recipe& recipe = run.recipe;
  // Decided anew by every session: a checkpoint is float32 whatever the precision it was trained in.
  run.precision = plan_precision(recipe.train.precision, run.device);
  if (run.group) run.precision = agree_on_precision(run.precision, *run.group);
  torch::manual_seed(uint64_t(recipe.run.seed));
  check_lowercase_matches(recipe, run.task->tokenizer());
  TransformerConfig model_cfg = model_config(recipe, run.task->tokenizer().vocab_size());
  model_cfg.matmul_dtype = run.precision.matmul_dtype();
  run.model = Transformer(model_cfg);
  if (start == TrainStart::Fresh && !recipe.train.init_from.empty() && run.rank == 0) init_from_run(run);
  run.model->to(run.device);
  add_optimizer_groups(run.optimizer, run.model, recipe.train);  // after .to(): the flat buffers live on the device
  const auto& t = recipe.train;
  run.schedule = make_schedule(t);
  torch::Tensor saved_generators;  // every rank's, when the checkpoint holds them
  if (resume_from) {
    if (auto it = resume_from->tensors.find("rng.cpu.ranks"); it != resume_from->tensors.end())
      saved_generators = it->second;
    restore_checkpoint(run, *resume_from, resume_from->path);
    if (!output_is_finite(run.model, run.device))
      throw diverged_checkpoint_error(resume_from->path, "the model's output is NaN or Inf");
    resume_from.reset();  // its tensors were copied into the model and optimizer
  }
  if (!run.group) return;
  share_state(run);
  share_generators(run, saved_generators);
  if (run.dist->overlap && run.task->one_backward_per_micro_step())
    run.sync = std::make_unique<GradientSync>(*run.group, run.optimizer, run.model->parameters(), run.dist->bucket_bytes);
}

// Everything before the first step: the run directory, its data, the model and optimizer on every rank.
void start_run(Run& run, const Recipe& given, TrainStart start) {
  run.recipe = recipe_to_save(given, start);
  join_ranks(run);
  // Before the run directory, the data or the model: a shape this host cannot hold is refused, not killed later.
  run.memory = check_training_memory(run.recipe, estimated_vocab_size(run.recipe), run.world,
                                     run.dist ? run.dist->local_world : 1);
  build_model(run, start, claim_run_dir(run, start));
  run.blas = blas_info();
  if (run.rank == 0) write_run_info(run);
  print_header(run, start == TrainStart::Resume);
  if (run.group)
    say(fmt::format("data parallel: {} ranks ({} on this host), batch {} per rank, {} in all; gradient all-reduce {}",
                    run.world, run.dist->local_world, run.recipe.train.batch_size,
                    run.recipe.train.batch_size * run.world,
                    run.sync ? fmt::format("in {} buckets overlapping backward", run.sync->buckets())
                             : std::string("after backward")));
}

// The step's line in metrics.jsonl and on the console.
void log_step(const Run& run, const StepResult& r, Progress& progress, double comm_s, MetricsLog& log) {
  const WorkPerStep work = run.task->work_per_step();
  const double lr = run.schedule.at(run.step - 1);
  nlohmann::json line = {{"step", run.step}, {"loss", r.loss}, {"lr", lr}, {"grad_norm", r.grad_norm},
                         {work.log_key, progress.items_per_s()}, {"elapsed_s", run.elapsed_s}};
  for (const auto& [name, value] : r.parts) line["loss_" + name] = value;
  const TrainConfig& t = run.recipe.train;
  if (t.optimizer == "muon") line["muon_lr"] = t.muon_lr * run.schedule.scale(run.step - 1);
  if (run.group) line["comm_s"] = comm_s;
  log.write(line);
  say(progress.line(r.loss, lr));
}

// A step whose loss or gradient is not finite: it is consumed, so that the next one draws new data, and logged;
// like every line, it is numbered by the steps done (the console's "step N"). The reason to stop, when it is one
// too many in a row.
std::optional<std::string> skip_step(Run& run, const StepResult& r, int64_t& bad_in_a_row, MetricsLog& log) {
  ++bad_in_a_row;
  ++run.step;
  log.write({{"step", run.step}, {"event", "nan_skip"}, {"loss", r.loss}, {"grad_norm", r.grad_norm}});
  say(fmt::format("step {}: loss {} / grad norm {} is not finite; update skipped ({} in a row)", run.step, r.loss,
                  r.grad_norm, bad_in_a_row));
  if (bad_in_a_row < run.recipe.train.max_bad_steps) return std::nullopt;
  return fmt::format("{} non-finite steps in a row", bad_in_a_row);
}

// Evaluation and the geometry probe when due (rank 0 alone); the time they take is no training time.
void evaluate_when_due(Run& run, Progress& progress, MetricsLog& log) {
  const auto& t = run.recipe.train;
  if (run.rank != 0) return;
  if (due(t.eval_every, run.step, t.max_steps)) {
    Evaluation e = run.task->evaluate(run.model);
    e.metrics["step"] = run.step;
    log.write(e.metrics);
    say(fmt::format("eval step {}: {}", run.step, e.summary));
    note_best(run, e, log);
    progress.exclude_pause();
  }
  if (probe_due(run.recipe.diagnostics, run.step, t.max_steps)) {
    write_probe(run, log);
    progress.exclude_pause();
  }
}

// The steps from run.step to train.max_steps, with logging, evaluation, checkpoints and signals; the exit code.
int train_steps(Run& run, MetricsLog& log) {
  const auto& t = run.recipe.train;
  g_stop_signal = 0;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  run.model->train();
  const WorkPerStep work = run.task->work_per_step();
  Progress progress(run.step, t.max_steps, work.count * run.world, work.unit);
  // Condensation is present at initialisation: the probe sees the model before its first update.
  if (run.step == 0 && run.recipe.diagnostics.enabled() && run.rank == 0) write_probe(run, log);
  progress.exclude_pause();
  int64_t bad_in_a_row = 0;
  double comm_s = 0;  // data-parallel: seconds in gradient and loss collectives, this session
  while (run.step < t.max_steps) {
    const StepResult r = train_step(run);
    if (!r.finite) {
      if (auto stop = skip_step(run, r, bad_in_a_row, log)) return stop_diverged(run, log, *stop);
      continue;
    }
    bad_in_a_row = 0;
    comm_s += r.comm_s;
    progress.tick(run.step);
    run.elapsed_s += progress.last_step_seconds();
    if (due(t.log_every, run.step, t.max_steps) || run.step == 1) log_step(run, r, progress, comm_s, log);
    evaluate_when_due(run, progress, log);
    if (due(t.ckpt_every, run.step, t.max_steps)) {
      if (auto bad = save(run, log, "scheduled")) return stop_diverged(run, log, *bad);
      progress.exclude_pause();
    }
    if (const int sig = agreed_stop_signal(run); sig != 0)
      return stop_on_signal(run, log, due(t.ckpt_every, run.step, t.max_steps), sig);
  }
  log.write({{"step", run.step}, {"event", "end"}, {"elapsed_s", run.elapsed_s}, {"peak_rss_mib", peak_rss_mib()}});
  say(fmt::format("done: {} steps in {:.1f} s (peak RSS {:.0f} MiB); run dir {}", run.step, run.elapsed_s,
                  peak_rss_mib(), run.dir));
  return kExitOk;
}

int train_run(const Recipe& given, TrainStart start) {
  Run run;
  start_run(run, given, start);
  const bool resumed = start == TrainStart::Resume;
  MetricsLog log(run.rank == 0 ? run.dir : "", resumed ? run.step : -1);
  if (resumed) log.write({{"step", run.step}, {"event", "resume"}});
  if (resumed && run.rank == 0) run.best = read_best(run.dir);
  else log.write({{"step", 0}, {"event", "start"}, {"blas_core", run.blas.core}});
  if (run.cleanup) run.cleanup->keep();  // a run now, which compare and --resume know
  return train_steps(run, log);
}

}  // namespace
}  // namespace spread
