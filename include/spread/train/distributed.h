#pragma once
// Data-parallel training over a c10d process group (Gloo on CPU; NCCL where LibTorch was built with CUDA and the
// run's device is cuda). Every rank holds the whole model; after the micro-steps of an optimizer step the gradients
// are averaged with bucketed all-reduces, so the update is that of one process seeing the global batch
// (world x train.batch_size rows, rank r draws rows [r B, (r + 1) B): tasks/task.h DataShard).
//
// Rendezvous from the environment torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT): a TCPStore at MASTER_ADDR:MASTER_PORT, hosted by rank 0, or, when TORCHELASTIC_USE_AGENT_STORE is
// True (torchrun's static rendezvous), hosted by torchrun's agent and used by every rank as a client under the
// prefix /worker/attempt_<TORCHELASTIC_RESTART_COUNT>. `spread train --nproc N` (SPREAD_STORE_FILE) rendezvous
// through a FileStore instead: LibTorch 1.13's TCPStore server listens on every address, a file opens no socket.
// Gloo's own connections bind to MASTER_ADDR when it is a loopback address, to GLOO_SOCKET_IFNAME's interface when
// set, and to the address of this host's name otherwise.
//
// Promises: a peer that fails or dies makes every collective of the others throw PeerLost (no hang) within
// SPREAD_DIST_TIMEOUT seconds (default 300); ranks whose resolved recipes differ are refused before training.
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>
#include <torch/types.h>

#include "spread/runtime/precision.h"

namespace torch::autograd {
struct Node;
}

namespace spread {

class FlatOptimizer;

// Where this process stands in the run, read from the environment.
struct DistributedEnv {
  int64_t rank = 0, world = 1;
  int64_t local_rank = 0, local_world = 1;
  std::string master_addr;
  int64_t master_port = 0;
  bool agent_store = false;     // TORCHELASTIC_USE_AGENT_STORE=True
  int64_t restart_count = 0;    // TORCHELASTIC_RESTART_COUNT
  std::string store_file;       // SPREAD_STORE_FILE (spread train --nproc)
  int64_t timeout_s = 300;      // SPREAD_DIST_TIMEOUT
  // Measurement switches (bench/bench_ddp.sh, tests), not recipe keys: SPREAD_DDP_OVERLAP=0 keeps the all-reduce
  // after the backward pass; SPREAD_DDP_BUCKET_KB sets the bucket size (default 25 MiB, PyTorch DDP's).
  bool overlap = true;
  int64_t bucket_bytes = 25 << 20;
};

// Nullopt when WORLD_SIZE is unset or 1 (a single process). A missing or malformed variable is a UserError
// naming it (exit code 2).
std::optional<DistributedEnv> distributed_env();

// A collective failed: a peer died, closed its connection or did not answer within the timeout.
class PeerLost : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ProcessGroup {
 public:
  // Joins the group (blocks until every rank has, or the timeout). `device`: cuda selects NCCL (CUDA builds).
  static std::unique_ptr<ProcessGroup> connect(const DistributedEnv& env, const torch::Device& device);
  virtual ~ProcessGroup() = default;

  int64_t rank() const { return rank_; }
  int64_t world() const { return world_; }

  // Tensors of rank 0 copied into every rank's (in place).
  virtual void broadcast(std::vector<torch::Tensor> tensors) = 0;
  // Element-wise sum over ranks, in place, of each tensor (one collective per tensor, all in flight together).
  virtual void all_reduce_sum(std::vector<torch::Tensor> tensors) = 0;
  // The ranks' equally shaped tensors stacked along a new dim 0, in rank order (no gradient; on the group's device).
  virtual torch::Tensor all_gather(const torch::Tensor& local) = 0;
  // Starts the element-wise sum over ranks of a contiguous tensor, in place, and returns at once; the returned
  // function waits for it (PeerLost on a failure). The tensor must not be touched before that.
  virtual std::function<void()> start_all_reduce_sum(torch::Tensor tensor) = 0;

  // Averages the optimizer's flat gradient buffers over ranks, in buckets of at most bucket_bytes each.
  void average_gradients(FlatOptimizer& optimizer, int64_t bucket_bytes = 25 << 20);
  // The mean over ranks of each value (losses for the log, flags).
  std::vector<double> mean(const std::vector<double>& values);

 protected:
  int64_t rank_ = 0, world_ = 1;
  torch::Device device_{torch::kCPU};  // where its collectives run (NCCL: cuda)
};

// Gradient averaging overlapped with the backward pass, as PyTorch DDP's reducer does it. The optimizer's flat
// gradients are cut into buckets of whole parameters in reverse parameter order (about the order in which backward
// finishes them). On the last micro-step (arm), a hook that runs after each parameter's gradient accumulation counts
// the parameter in; a bucket whose parameters are all in starts its all-reduce while backward goes on. Buckets start
// strictly in index order, a ready bucket waiting for the ones before it: Gloo and NCCL match collectives by their
// order, which must be the same on every rank. finish() starts the buckets left (parameters that got no gradient),
// waits for all of them and divides by the world size, as average_gradients does after the backward pass.
// It needs every parameter's gradient to be accumulated at most once in the last micro-step (one backward pass per
// micro-step, TrainingTask::one_backward_per_micro_step); a second accumulation makes finish() throw logic_error.
class GradientSync {
 public:
  // `params`: the model's parameters in their registration order, every one of them in one of the optimizer's groups.
  GradientSync(ProcessGroup& group, FlatOptimizer& optimizer, const std::vector<torch::Tensor>& params,
               int64_t bucket_bytes = 25 << 20);
  ~GradientSync();  // removes its hooks
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  void arm();     // the next backward pass is the last micro-step's
  void finish();  // after it: the gradients averaged over ranks (PeerLost on a failure)
  size_t buckets() const { return buckets_.size(); }
  size_t started() const { return next_; }  // buckets whose all-reduce has started since arm()

 private:
  struct Bucket {
    std::vector<torch::Tensor> slices;  // at most one contiguous slice per optimizer group
    int64_t params = 0, waiting = 0;    // parameters in it; of those, not yet final since arm()
  };
  void on_gradient(size_t param);
  void start_ready();

  ProcessGroup& group_;
  FlatOptimizer& optimizer_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // per parameter
  std::vector<char> arrived_;      // per parameter, since arm()
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;  // kept alive: the hooks live on them
  std::vector<uintptr_t> hooks_;
  std::vector<std::function<void()>> pending_;  // waits of the started all-reduces
  size_t next_ = 0;                             // the first bucket not started
  bool armed_ = false;
  std::exception_ptr error_;  // from a hook (never thrown through autograd), rethrown by finish()
  std::mutex mutex_;          // hooks may run on the autograd engine's device threads
};

// train.precision = "bf16" as all ranks can run it. Each rank decides on its own (CPU flags, a timed product,
// SPREAD_FORCE_NO_BF16), but the ranks must run the same arithmetic, or their averaged gradients mix two precisions:
// bf16 is used only where every rank chose it. A rank that falls back gives the others its reason, so that rank 0's
// header and run.json say which rank and why. A collective: every rank calls it, before the model is built.
PrecisionPlan agree_on_precision(const PrecisionPlan& mine, ProcessGroup& group);

}  // namespace spread
