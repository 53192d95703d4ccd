#pragma once
// `spread train --nproc N`: N data-parallel workers on this host, started by spread itself. Each worker is this
// executable run again with `args` and the environment of a rank (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE)
// that meets the others through a FileStore in a fresh temporary directory; Gloo connects them over the loopback
// address only (train/distributed.h), so nothing listens beyond this host.
#include <string>
#include <vector>

namespace spread {

// Starts the workers (a one-line warning when they outnumber the host's cores), forwards SIGINT / SIGTERM to them
// and waits for all. When one exits with a non-zero code, the others still running 2 s later are stopped (SIGTERM,
// then SIGKILL after 10 s) and that first failing code is returned, so a hung or stopped rank cannot keep the
// launcher waiting; after a forwarded signal the workers are left to save and exit, and rank 0's code is returned.
int launch_local_workers(int nproc, const std::vector<std::string>& args);

}  // namespace spread
