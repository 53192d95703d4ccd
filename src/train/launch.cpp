#include "spread/train/launch.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <optional>
#include <string>
#include <thread>

#include "spread/util/error.h"

namespace spread {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<pid_t> g_workers;
volatile sig_atomic_t g_forwarded = 0;  // a SIGINT / SIGTERM reached the launcher and went on to the workers

extern "C" void forward_signal(int sig) {
  g_forwarded = 1;
  for (pid_t pid : g_workers) ::kill(pid, sig);
}

void warn_above_core_count(int nproc) {
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores > 0 && unsigned(nproc) > cores)
    fmt::print(stderr, "warning: --nproc {} starts more workers than this host has cores ({}): they share them, and "
               "the run is slower than with --nproc {}\n", nproc, cores, cores);
}

pid_t start_worker(int rank, int nproc, const std::string& store, std::vector<std::string> argv_text) {
  const pid_t pid = ::fork();
  if (pid < 0) throw UserError("cannot start a worker process (fork failed)");
  if (pid > 0) return pid;
  // A group of its own: a Ctrl-C reaches the workers once, forwarded by this process, not twice.
  ::setpgid(0, 0);
  ::setenv("RANK", std::to_string(rank).c_str(), 1);
  ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
  ::setenv("SPREAD_STORE_FILE", store.c_str(), 1);
  ::unsetenv("TORCHELASTIC_USE_AGENT_STORE");
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(argv[0], argv.data());
  std::_Exit(127);
}

int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// Asks the workers still running to stop: SIGTERM, and SIGCONT so that a stopped one can act on it.
void terminate_running(const std::vector<int>& codes) {
  for (size_t r = 0; r < codes.size(); ++r)
    if (codes[r] < 0) {
      ::kill(g_workers[r], SIGTERM);
      ::kill(g_workers[r], SIGCONT);
    }
}

void kill_running(const std::vector<int>& codes) {
  for (size_t r = 0; r < codes.size(); ++r)
    if (codes[r] < 0) ::kill(g_workers[r], SIGKILL);
}

struct Outcome {
  std::vector<int> codes;  // per rank; -1 while it runs
  int first_failed = -1;
};

// After a rank fails, the others get kSettle to end on their own (a bad recipe stops every rank, a lost peer is
// noticed at once), then SIGTERM, then SIGKILL after kStopGrace.
constexpr auto kSettle = std::chrono::seconds(2);
constexpr auto kStopGrace = std::chrono::seconds(10);

// Waits for every worker. The first worker to fail makes the others stop: a rank that hangs or was stopped would
// otherwise keep the launcher waiting forever after the others gave up on it. After a signal the user sent, the
// workers are left to finish: they are saving a checkpoint, which a second signal would cut short.
Outcome wait_for_workers() {
  Outcome out;
  out.codes.assign(g_workers.size(), -1);
  enum class Stop { None, Settling, Terminated, Killed } stop = Stop::None;
  Clock::time_point next_stop{};
  for (size_t running = g_workers.size(); running > 0;) {
    int status = 0;
    const bool polling = stop == Stop::Settling || stop == Stop::Terminated;
    const pid_t pid = ::waitpid(-1, &status, polling ? WNOHANG : 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pid == 0) {
      if (Clock::now() >= next_stop && stop == Stop::Settling) {
        const auto r = size_t(out.first_failed);
        fmt::print(stderr, "rank {} exited with code {}: stopping the other ranks (SIGTERM, SIGKILL after {} s)\n", r,
                   out.codes[r], kStopGrace.count());
        terminate_running(out.codes);
        stop = Stop::Terminated;
        next_stop = Clock::now() + kStopGrace;
      } else if (Clock::now() >= next_stop && stop == Stop::Terminated) {
        kill_running(out.codes);
        stop = Stop::Killed;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    for (size_t r = 0; r < g_workers.size(); ++r) {
      if (g_workers[r] != pid) continue;
      out.codes[r] = exit_code_of(status);
      --running;
      if (out.codes[r] == 0 || out.first_failed >= 0) continue;
      out.first_failed = int(r);
      if (g_forwarded) continue;
      stop = Stop::Settling;
      next_stop = Clock::now() + kSettle;
    }
  }
  return out;
}

}  // namespace

int launch_local_workers(int nproc, const std::vector<std::string>& args) {
  if (nproc < 1) throw user_error("command line", 0, "--nproc", fmt::format("{} is not a number of workers", nproc),
                                  "give 1 or more");
  warn_above_core_count(nproc);
  std::string dir_template = (std::filesystem::temp_directory_path() / "spread_store_XXXXXX").string();
  if (::mkdtemp(dir_template.data()) == nullptr)
    throw UserError("cannot create a temporary directory for the workers' rendezvous (check TMPDIR)");
  const std::string store = dir_template + "/store";
  std::vector<std::string> argv_text{"/proc/self/exe"};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  g_workers.clear();
  g_forwarded = 0;
  for (int rank = 0; rank < nproc; ++rank) g_workers.push_back(start_worker(rank, nproc, store, argv_text));
  struct sigaction action {}, old_int {}, old_term {};
  action.sa_handler = forward_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);
  const Outcome outcome = wait_for_workers();
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  const bool interrupted = g_forwarded != 0;
  g_workers.clear();
  std::error_code ignored;
  std::filesystem::remove_all(dir_template, ignored);
  // Interrupted: rank 0's code says whether its checkpoint was saved (130, 143).
  if (interrupted && outcome.codes[0] != 0) return outcome.codes[0];
  return outcome.first_failed >= 0 ? outcome.codes[size_t(outcome.first_failed)] : 0;
}

}  // namespace spread
