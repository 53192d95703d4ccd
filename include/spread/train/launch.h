#pragma once
// `spread train --nproc N`: N data-parallel workers on this host, started by spread itself. Each worker is this
// executable run again with `args` and the environment of a rank (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE)
// that meets the others through a FileStore in a fresh temporary directory; Gloo connects them over the loopback
// address only (train/distributed.h), so nothing listens beyond this host.
#include <string>
#include <vector>

namespace spread {

// Starts the workers, forwards SIGINT / SIGTERM to them and waits for all. Returns rank 0's exit code, or when
// that is 0 the first non-zero code of another rank.
int launch_local_workers(int nproc, const std::vector<std::string>& args);

}  // namespace spread
