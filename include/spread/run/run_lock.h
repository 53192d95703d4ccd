#pragma once
// One training process per run directory. `spread train` and `spread train --resume` hold an exclusive flock(2)
// on RUN_DIR/train.lock from before they write anything until they exit; a second one is refused (UserError
// naming the directory and the holder's pid) instead of both training and one deleting the checkpoints the other
// writes. The kernel releases the lock when its process dies, however it dies, so a kill -9 leaves no stale lock:
// the file may remain, and only a held lock counts. Readers (eval, generate, diagnose, report, compare) take no
// lock and work on a live run.
#include <string>

namespace spread {

class RunLock {
 public:
  // Creates the lock file in run_dir (which must exist) and locks it, or throws UserError.
  explicit RunLock(const std::string& run_dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace spread
