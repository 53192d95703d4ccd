#include "spread/train/launch.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <string>

#include "spread/util/error.h"

namespace spread {
namespace {

std::vector<pid_t> g_workers;

extern "C" void forward_signal(int sig) {
  for (pid_t pid : g_workers) ::kill(pid, sig);
}

}  // namespace

int launch_local_workers(int nproc, const std::vector<std::string>& args) {
  if (nproc < 1) throw user_error("command line", 0, "--nproc", fmt::format("{} is not a number of workers", nproc),
                                  "give 1 or more");
  std::string dir_template = (std::filesystem::temp_directory_path() / "spread_store_XXXXXX").string();
  if (::mkdtemp(dir_template.data()) == nullptr)
    throw UserError("cannot create a temporary directory for the workers' rendezvous (check TMPDIR)");
  const std::string store = dir_template + "/store";
  std::vector<std::string> argv_text{"/proc/self/exe"};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  g_workers.clear();
  for (int rank = 0; rank < nproc; ++rank) {
    const pid_t pid = ::fork();
    if (pid < 0) throw UserError("cannot start a worker process (fork failed)");
    if (pid == 0) {
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
    g_workers.push_back(pid);
  }
  struct sigaction action {}, old_int {}, old_term {};
  action.sa_handler = forward_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);
  std::vector<int> codes(size_t(nproc), 0);
  for (int done = 0; done < nproc;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int rank = 0; rank < nproc; ++rank)
      if (g_workers[size_t(rank)] == pid) {
        codes[size_t(rank)] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        ++done;
      }
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  g_workers.clear();
  std::error_code ignored;
  std::filesystem::remove_all(dir_template, ignored);
  if (codes[0] != 0) return codes[0];
  for (int code : codes)
    if (code != 0) return code;
  return 0;
}

}  // namespace spread
