#include "spread/train/distributed.h"

// ProcessGroupGloo.hpp declares its class only under USE_C10D_GLOO (LibTorch's own build defines it); Debian's
// libtorch_cpu.so exports the symbols, libgloo-dev provides the gloo headers it includes.
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/version.h>
#if defined(SPREAD_WITH_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>
#include <fmt/format.h>

#include "spread/train/optimizer.h"
#include "spread/util/error.h"

namespace spread {
namespace {

const char* kEnvSource = "environment";

// LibTorch 2 split the collectives of a backend (Gloo, NCCL) from the ProcessGroup front that dispatches to them;
// in 1.13 ProcessGroupGloo is itself a ProcessGroup. Either way the calls used here have the same signatures.
#if TORCH_VERSION_MAJOR >= 2
using Collectives = c10d::Backend;
#else
using Collectives = c10d::ProcessGroup;
#endif

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

int64_t env_int(const char* name, std::optional<int64_t> fallback, int64_t low, int64_t high, const char* hint) {
  auto text = env(name);
  if (!text) {
    if (fallback) return *fallback;
    throw user_error(kEnvSource, 0, name, "is not set", hint);
  }
  try {
    size_t used = 0;
    const int64_t v = std::stoll(*text, &used);
    if (used == text->size() && v >= low && v <= high) return v;
  } catch (const std::exception&) {
  }
  throw user_error(kEnvSource, 0, name, fmt::format("'{}' is not an integer in [{}, {}]", *text, low, high), hint);
}

bool is_loopback(const std::string& address) {
  return address == "localhost" || address.rfind("127.", 0) == 0 || address == "::1";
}

// The first line of an error: c10::Error's what() appends the C++ stack trace, which says nothing to a user.
std::string first_line(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  const std::string text = c10_error != nullptr ? c10_error->what_without_backtrace() : e.what();
  return text.substr(0, text.find('\n'));
}

PeerLost peer_lost(const std::string& what, const std::exception& e) {
  return PeerLost(fmt::format("{} failed: {} (another rank stopped, crashed or did not answer within "
                              "SPREAD_DIST_TIMEOUT; its own output says why)", what, first_line(e)));
}

const char* kPortHint = "set MASTER_PORT (torchrun --master-port) to a free TCP port on rank 0's host, the same for "
                        "every rank, or use spread train --nproc N, which needs no port";

// Each call runs the collective and waits for it; every c10d/gloo failure becomes PeerLost.
class C10dGroup : public ProcessGroup {
 public:
  C10dGroup(c10::intrusive_ptr<Collectives> group, int64_t rank, int64_t world, torch::Device device)
      : group_(std::move(group)) {
    rank_ = rank;
    world_ = world;
    device_ = device;
  }

  void broadcast(std::vector<torch::Tensor> tensors) override {
    try {
      std::vector<c10::intrusive_ptr<c10d::Work>> works;
      for (auto& t : tensors) {
        std::vector<at::Tensor> one{t};
        works.push_back(group_->broadcast(one, c10d::BroadcastOptions{0}));
      }
      for (auto& w : works) w->wait();
    } catch (const std::exception& e) {
      throw peer_lost(fmt::format("rank {}: broadcast", rank_), e);
    }
  }

  void all_reduce_sum(std::vector<torch::Tensor> tensors) override {
    try {
      std::vector<c10::intrusive_ptr<c10d::Work>> works;
      for (auto& t : tensors) {
        std::vector<at::Tensor> one{t};
        works.push_back(group_->allreduce(one));
      }
      for (auto& w : works) w->wait();
    } catch (const std::exception& e) {
      throw peer_lost(fmt::format("rank {}: all-reduce", rank_), e);
    }
  }

  std::function<void()> start_all_reduce_sum(torch::Tensor tensor) override {
    c10::intrusive_ptr<c10d::Work> work;
    try {
      std::vector<at::Tensor> one{tensor};
      work = group_->allreduce(one);
    } catch (const std::exception& e) {
      throw peer_lost(fmt::format("rank {}: all-reduce", rank_), e);
    }
    return [work, rank = rank_] {
      try {
        work->wait();
      } catch (const std::exception& e) {
        throw peer_lost(fmt::format("rank {}: all-reduce", rank), e);
      }
    };
  }

  torch::Tensor all_gather(const torch::Tensor& local) override {
    try {
      auto input = local.detach().to(device_).contiguous();
      std::vector<at::Tensor> outputs;
      for (int64_t r = 0; r < world_; ++r) outputs.push_back(torch::empty_like(input));
      std::vector<std::vector<at::Tensor>> out{outputs};
      std::vector<at::Tensor> in{input};
      group_->allgather(out, in)->wait();
      return torch::stack(out[0]);
    } catch (const std::exception& e) {
      throw peer_lost(fmt::format("rank {}: all-gather", rank_), e);
    }
  }

 private:
  c10::intrusive_ptr<Collectives> group_;
};

// Sends this process's stderr to /dev/null while it lives (nothing else runs yet when the store is opened).
class QuietStderr {
 public:
  QuietStderr() : saved_(::dup(2)) {
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) {
      ::dup2(null, 2);
      ::close(null);
    }
  }
  ~QuietStderr() {
    if (saved_ < 0) return;
    ::dup2(saved_, 2);
    ::close(saved_);
  }
  QuietStderr(const QuietStderr&) = delete;
  QuietStderr& operator=(const QuietStderr&) = delete;

 private:
  int saved_;
};

// LibTorch 2.x's TCPStore client pings the store once connected and waits for the answer without a timeout: a
// MASTER_PORT held by another program, which accepts connections and never answers, hung every rank but 0 for
// good. While it lives, this watchdog gives the store `timeout` (plus a grace) and then shuts down this process's
// connections to `port`, which makes the ping fail with an error instead.
class StoreWatchdog {
 public:
  StoreWatchdog(int64_t port, std::chrono::milliseconds timeout)
      : thread_([this, port, timeout] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (done_cv_.wait_for(lock, timeout + std::chrono::seconds(2), [this] { return done_; })) return;
          fired_ = true;
          shut_down_connections_to(port);
        }) {}
  ~StoreWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_all();
    thread_.join();
  }
  StoreWatchdog(const StoreWatchdog&) = delete;
  StoreWatchdog& operator=(const StoreWatchdog&) = delete;
  bool fired() {
    std::lock_guard<std::mutex> lock(mutex_);
    return fired_;
  }

 private:
  static void shut_down_connections_to(int64_t port) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
      int fd = -1;
      try {
        fd = std::stoi(entry.path().filename().string());
      } catch (const std::exception&) {
        continue;
      }
      sockaddr_storage peer{};
      socklen_t length = sizeof peer;
      if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0) continue;
      const int64_t peer_port = peer.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&peer)->sin_port)
                                : peer.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&peer)->sin6_port)
                                                             : -1;
      if (peer_port == port) ::shutdown(fd, SHUT_RDWR);
    }
  }

  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false, fired_ = false;
  std::thread thread_;  // last: it starts once the rest is made
};

// Joining through a TCP store failed: rank 0 hosts it, so another rank's failure there most often means the port
// was held by another program (rank 0 then exited with a MASTER_PORT error) and this rank waited on that program.
UserError rendezvous_failed(const DistributedEnv& env, const std::exception& e) {
  const std::string what = env.rank == 0
      ? fmt::format("rank 0 of {}: the other ranks did not join at {}:{}", env.world, env.master_addr, env.master_port)
      : fmt::format("rank {} of {} found no rendezvous at {}:{} (rank 0's output says whether it hosted it)",
                    env.rank, env.world, env.master_addr, env.master_port);
  return user_error(kEnvSource, 0, "MASTER_PORT",
                    fmt::format("{} within SPREAD_DIST_TIMEOUT = {} s: {}", what, env.timeout_s, first_line(e)),
                    kPortHint);
}

c10::intrusive_ptr<c10d::Store> open_store(const DistributedEnv& env, std::chrono::milliseconds timeout) {
  if (!env.store_file.empty())
    return c10::make_intrusive<c10d::FileStore>(env.store_file, int(env.world));
  c10d::TCPStoreOptions options;
  options.port = uint16_t(env.master_port);
  options.isServer = !env.agent_store && env.rank == 0;
  options.numWorkers = size_t(env.world);
  options.waitWorkers = false;  // the process group's own rendezvous waits for everyone
  options.timeout = timeout;
  c10::intrusive_ptr<c10d::Store> store;
  StoreWatchdog watchdog(env.master_port, timeout);
  try {
    // LibTorch logs each failed bind to stderr (glog lines) before it throws; the error below says it in one line.
    const QuietStderr quiet;
    store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
  } catch (const std::exception& e) {
    if (watchdog.fired())
      throw user_error(kEnvSource, 0, "MASTER_PORT",
                       fmt::format("rank {} reached {}:{} but no rendezvous store answered there within "
                                   "SPREAD_DIST_TIMEOUT = {} s", env.rank, env.master_addr, env.master_port,
                                   env.timeout_s),
                       kPortHint);
    if (options.isServer && std::string(e.what()).find("in use") != std::string::npos)
      throw user_error(kEnvSource, 0, "MASTER_PORT", fmt::format("rank 0 cannot host the rendezvous store at {}:{}: "
                       "the port is in use", env.master_addr, env.master_port), kPortHint);
    throw user_error(kEnvSource, 0, "MASTER_ADDR",
                     fmt::format("rank {} cannot {} the rendezvous store at {}:{}: {}", env.rank,
                                 options.isServer ? "host" : "reach", env.master_addr, env.master_port, first_line(e)),
                     "check MASTER_ADDR and MASTER_PORT: rank 0's host and a port it listens on");
  }
  if (env.agent_store)  // torchrun's agent keeps one namespace per restart of the workers
    return c10::make_intrusive<c10d::PrefixStore>(fmt::format("/worker/attempt_{}", env.restart_count), store);
  return store;
}

std::shared_ptr<gloo::transport::Device> gloo_device(const DistributedEnv& env) {
  if (auto ifname = spread::env("GLOO_SOCKET_IFNAME"))
    return c10d::ProcessGroupGloo::createDeviceForInterface(*ifname);
  if (!env.store_file.empty() || is_loopback(env.master_addr))
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

}  // namespace

std::optional<DistributedEnv> distributed_env() {
  const char* hint = "launch with torchrun --no-python --nproc-per-node N spread train ..., or spread train --nproc N";
  DistributedEnv e;
  e.world = env_int("WORLD_SIZE", int64_t(1), 1, 1 << 20, hint);
  if (e.world == 1) return std::nullopt;
  e.rank = env_int("RANK", std::nullopt, 0, e.world - 1, "set RANK to this process's rank, 0 .. WORLD_SIZE - 1");
  e.local_rank = env_int("LOCAL_RANK", e.rank, 0, e.world - 1, hint);
  e.local_world = env_int("LOCAL_WORLD_SIZE", e.world, 1, e.world, "the number of ranks on this host");
  e.timeout_s = env_int("SPREAD_DIST_TIMEOUT", int64_t(300), 1, 1 << 30, "seconds a collective may wait for a peer");
  e.overlap = env("SPREAD_DDP_OVERLAP").value_or("1") != "0";
  e.bucket_bytes = 1024 * env_int("SPREAD_DDP_BUCKET_KB", int64_t(25 << 10), 1, int64_t(1) << 30,
                                  "the size of a gradient bucket in KiB (default 25600)");
  e.store_file = env("SPREAD_STORE_FILE").value_or("");
  if (e.store_file.empty()) {
    auto addr = env("MASTER_ADDR");
    if (!addr) throw user_error(kEnvSource, 0, "MASTER_ADDR", "is not set", "set it to rank 0's host address");
    e.master_addr = *addr;
    e.master_port = env_int("MASTER_PORT", std::nullopt, 1, 65535, "set it to a free TCP port on rank 0's host");
    const std::string agent = env("TORCHELASTIC_USE_AGENT_STORE").value_or("");
    e.agent_store = agent == "True" || agent == "true" || agent == "1";
    e.restart_count = env_int("TORCHELASTIC_RESTART_COUNT", int64_t(0), 0, 1 << 30, "torchrun sets it");
  }
  return e;
}

std::unique_ptr<ProcessGroup> ProcessGroup::connect(const DistributedEnv& env, const torch::Device& device) {
  const std::chrono::milliseconds timeout(env.timeout_s * 1000);
  // A write to a peer that died raises SIGPIPE, which killed this rank silently (exit 141) before the collective
  // could fail with the error that says a rank was lost; ignored, the write fails with EPIPE instead.
  std::signal(SIGPIPE, SIG_IGN);
  auto store = open_store(env, timeout);
  c10::intrusive_ptr<Collectives> group;
  try {
    if (device.is_cuda()) {
#if defined(SPREAD_WITH_NCCL)
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, int(env.rank), int(env.world), options);
#else
      throw user_error("recipe", 0, "run.device", "data-parallel training on cuda needs a LibTorch built with NCCL",
                       "build spread against a CUDA LibTorch (-DCMAKE_PREFIX_PATH=...) or use device = \"cpu\"");
#endif
    } else {
      auto options = c10d::ProcessGroupGloo::Options::create(timeout);
      options->devices.push_back(gloo_device(env));
      options->threads = 2;
      group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, int(env.rank), int(env.world), options);
    }
  } catch (const UserError&) {
    throw;
  } catch (const std::exception& e) {
    // Through a TCP store the usual cause is the port: held by another program, rank 0 never hosted the store and
    // this rank waited on whatever answers there.
    if (env.store_file.empty() && !env.agent_store) throw rendezvous_failed(env, e);
    throw peer_lost(fmt::format("joining the process group as rank {} of {}", env.rank, env.world), e);
  }
  return std::make_unique<C10dGroup>(std::move(group), env.rank, env.world, device);
}

void ProcessGroup::average_gradients(FlatOptimizer& optimizer, int64_t bucket_bytes) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> buckets;
  for (auto& g : optimizer.groups()) {
    const int64_t n = g.grad.numel(), per = std::max<int64_t>(1, bucket_bytes / int64_t(g.grad.element_size()));
    for (int64_t first = 0; first < n; first += per) buckets.push_back(g.grad.narrow(0, first, std::min(per, n - first)));
  }
  all_reduce_sum(buckets);
  for (auto& g : optimizer.groups())
    if (g.grad.numel() > 0) g.grad.div_(double(world_));
}

namespace {

// Where a parameter lives in the optimizer: its group and its element range in that group's flat buffers.
struct FlatPlace {
  size_t group = 0;
  int64_t offset = 0, numel = 0;
};

// Runs `fn` after a parameter's gradient accumulation. Our own FunctionPostHook: LibTorch's LambdaPostHook changed its
// signature after 1.13, FunctionPostHook's call did not.
class AfterAccumulation : public torch::autograd::FunctionPostHook {
 public:
  explicit AfterAccumulation(std::function<void()> fn) : fn_(std::move(fn)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    fn_();
    return outputs;
  }

 private:
  std::function<void()> fn_;
};

FlatPlace flat_place(const FlatOptimizer& optimizer, const torch::Tensor& param) {
  for (size_t g = 0; g < optimizer.groups().size(); ++g) {
    int64_t offset = 0;
    for (const auto& p : optimizer.groups()[g].params) {
      if (p.unsafeGetTensorImpl() == param.unsafeGetTensorImpl()) return {g, offset, p.numel()};
      offset += p.numel();
    }
  }
  throw std::logic_error("GradientSync: a model parameter is in none of the optimizer's groups");
}

}  // namespace

GradientSync::GradientSync(ProcessGroup& group, FlatOptimizer& optimizer, const std::vector<torch::Tensor>& params,
                           int64_t bucket_bytes)
    : group_(group), optimizer_(optimizer), bucket_of_(params.size()), arrived_(params.size(), 0) {
  // Walking the parameters backwards visits each group's in decreasing offsets without a gap (a group keeps the
  // model's order), so a bucket's parameters of one group form one contiguous slice of its flat gradient.
  const size_t groups = optimizer.groups().size();
  std::vector<int64_t> low(groups), high(groups), covered(groups);
  int64_t bytes = 0;
  auto close = [&] {
    Bucket b;
    for (size_t g = 0; g < groups; ++g) {
      if (high[g] == low[g]) continue;
      if (covered[g] != high[g] - low[g]) throw std::logic_error("GradientSync: a group is not in model order");
      b.slices.push_back(optimizer.groups()[g].grad.narrow(0, low[g], high[g] - low[g]));
    }
    for (size_t i = 0; i < params.size(); ++i) b.params += bucket_of_[i] == buckets_.size() ? 1 : 0;
    buckets_.push_back(std::move(b));
    std::fill(covered.begin(), covered.end(), 0);
    bytes = 0;
  };
  std::fill(bucket_of_.begin(), bucket_of_.end(), size_t(-1));
  for (size_t i = params.size(); i-- > 0;) {
    const FlatPlace place = flat_place(optimizer, params[i]);
    const int64_t size = place.numel * int64_t(optimizer.groups()[place.group].grad.element_size());
    if (bytes > 0 && bytes + size > bucket_bytes) close();
    if (bytes == 0) {
      for (size_t g = 0; g < groups; ++g) low[g] = high[g] = 0;
    }
    auto& lo = low[place.group];
    auto& hi = high[place.group];
    if (hi == lo) hi = place.offset + place.numel;
    lo = place.offset;
    covered[place.group] += place.numel;
    bytes += std::max<int64_t>(size, 1);
    bucket_of_[i] = buckets_.size();
  }
  if (bytes > 0) close();
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].requires_grad()) {  // a frozen parameter never arrives: its bucket does not wait for it
      --buckets_[bucket_of_[i]].params;
      continue;
    }
    auto accumulator = torch::autograd::impl::grad_accumulator(params[i]);
    hooks_.push_back(accumulator->add_post_hook(std::make_unique<AfterAccumulation>([this, i] { on_gradient(i); })));
    accumulators_.push_back(std::move(accumulator));
  }
}

GradientSync::~GradientSync() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hooks_[i]);
}

void GradientSync::arm() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::fill(arrived_.begin(), arrived_.end(), 0);
  for (auto& b : buckets_) b.waiting = b.params;
  pending_.clear();
  next_ = 0;
  error_ = nullptr;
  armed_ = true;
}

void GradientSync::on_gradient(size_t param) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!armed_ || error_) return;
  if (arrived_[param]) {
    error_ = std::make_exception_ptr(std::logic_error("GradientSync: a parameter's gradient was accumulated twice "
                                                      "in the last micro-step, after its bucket's all-reduce began"));
    return;
  }
  arrived_[param] = 1;
  --buckets_[bucket_of_[param]].waiting;
  try {
    start_ready();
  } catch (...) {
    error_ = std::current_exception();
  }
}

void GradientSync::start_ready() {
  while (next_ < buckets_.size() && buckets_[next_].waiting == 0) {
    for (auto& slice : buckets_[next_].slices) pending_.push_back(group_.start_all_reduce_sum(slice));
    ++next_;
  }
}

void GradientSync::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = false;
    for (auto& b : buckets_) b.waiting = 0;  // parameters without a gradient this step: their bucket goes as it is
    start_ready();
  }
  for (auto& wait : pending_) wait();
  pending_.clear();
  if (error_) std::rethrow_exception(error_);
  torch::NoGradGuard no_grad;
  for (auto& g : optimizer_.groups())
    if (g.grad.numel() > 0) g.grad.div_(double(group_.world()));
}

std::vector<double> ProcessGroup::mean(const std::vector<double>& values) {
  auto t = torch::tensor(values, torch::kDouble).to(device_);
  all_reduce_sum({t});
  t = t.div(double(world_)).cpu();
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

PrecisionPlan agree_on_precision(const PrecisionPlan& mine, ProcessGroup& group) {
  if (mine.requested != "bf16") return mine;  // the same on every rank: their recipes were compared
  // One row per rank: whether it chose bf16, then its reason (cut to fit), which only rank 0 prints.
  constexpr int64_t kRow = 256;
  auto row = torch::zeros({kRow}, torch::kUInt8);
  row[0] = mine.used == "bf16" ? 1 : 0;
  std::memcpy(row.data_ptr<uint8_t>() + 1, mine.reason.data(), std::min<size_t>(mine.reason.size(), kRow - 2));
  const auto rows = group.all_gather(row).cpu().contiguous();
  PrecisionPlan agreed = mine;
  for (int64_t r = 0; r < group.world() && agreed.used == "bf16"; ++r) {
    if (rows[r][0].item<uint8_t>() == 1) continue;
    const std::string reason(reinterpret_cast<const char*>(rows[r].data_ptr<uint8_t>() + 1));
    agreed.used = "fp32";
    agreed.reason = fmt::format("rank {} cannot use bf16 ({})", r, reason);
  }
  return agreed;
}

}  // namespace spread
