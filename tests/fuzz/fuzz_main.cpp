// libFuzzer's entry points (build: scripts/build.sh --fuzz; run: scripts/fuzz.sh). One executable for every target:
// SPREAD_FUZZ_TARGET names the one to run, `spread_fuzz --list` prints them as "NAME MAX_LEN BOUND_MB: WHAT".
// A broken contract (an exception other than UserError) aborts, so that libFuzzer keeps the input as a crash.
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fuzz_targets.h"

namespace {

const spread::fuzz::Target* chosen = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  for (int i = 1; i < *argc; ++i)
    if (std::strcmp((*argv)[i], "--list") == 0) {
      for (const auto& t : spread::fuzz::targets())
        std::printf("%s %lld %lld: %s\n", t.name, static_cast<long long>(t.max_input_bytes),
                    static_cast<long long>(t.memory_bound_mb), t.reads);
      std::exit(0);
    }
  const char* name = std::getenv("SPREAD_FUZZ_TARGET");
  chosen = name ? spread::fuzz::target_named(name) : nullptr;
  if (!chosen) {
    std::fprintf(stderr, "spread_fuzz: set SPREAD_FUZZ_TARGET to one of the targets (spread_fuzz --list)\n");
    std::exit(2);
  }
  torch::set_num_threads(1);  // one input at a time; LibTorch's pool would only add noise to the coverage
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    spread::fuzz::run_one(*chosen, std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const spread::fuzz::ContractBroken& e) {
    std::fprintf(stderr, "spread_fuzz: broken contract: %s\n", e.what());
    std::abort();
  }
  return 0;
}
