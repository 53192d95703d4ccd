#pragma once
// Checkpoint files: a 24-byte header (magic "SPRDCKPT", version, payload size, CRC-32 of the payload) followed by
// a safetensors file of the named tensors whose "__metadata__" holds the metadata as one JSON string under
// "spread.checkpoint" (version 2; any safetensors reader opens the payload: file bytes [24:]). Version 1, written
// before 2026-12-06, held a LibTorch archive instead and is still read. Written atomically (temporary file, fsync, rename,
// fsync of the directory), so a crash never leaves a half-written file under a checkpoint's name; read back
// with the checksum verified, so a truncated or corrupt file is reported and skipped instead of loaded.
// The trainer never saves a checkpoint holding NaN or Inf (a diverged run; see first_non_finite), and a run is
// never continued or used from one (checkpoint_to_use).
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "spread/util/error.h"

namespace spread {

struct Checkpoint {
  int64_t step = 0;
  std::map<std::string, torch::Tensor> tensors;
  nlohmann::json meta;
  std::string path;  // the file it was read from (empty before it is saved)
};

// The name of the first floating-point tensor holding a NaN or Inf, or nullopt when every value is finite.
std::optional<std::string> first_non_finite(const Checkpoint& ckpt);

// Writes dir/ckpt/step_XXXXXXXX.ckpt and deletes all but the newest `keep_last` checkpoints and the one of step
// `keep_step` (the best evaluation's, train.keep_best).
std::string save_checkpoint(const std::string& run_dir, const Checkpoint& ckpt, int64_t keep_last,
                            std::optional<int64_t> keep_step = std::nullopt);

// dir/ckpt/step_XXXXXXXX.ckpt
std::string checkpoint_path(const std::string& run_dir, int64_t step);

// Reads one file; throws UserError naming the file and what is wrong with it.
Checkpoint read_checkpoint(const std::string& path);

// Checkpoint files of a run, newest first.
std::vector<std::string> list_checkpoints(const std::string& run_dir);

// The newest checkpoint that reads back intact; warnings (one per skipped bad file) go to `warnings`.
std::optional<Checkpoint> load_latest_checkpoint(const std::string& run_dir, std::vector<std::string>* warnings);

// "PATH: PROBLEM (delete this file to use the previous checkpoint, ...)", for a checkpoint of a diverged run.
UserError diverged_checkpoint_error(const std::string& path, const std::string& problem);

// The checkpoint to continue or use a run from: the newest intact one, which must hold finite values. Otherwise a
// UserError naming run_dir (no checkpoint yet; every one truncated or corrupt) or the file (NaN or Inf, written
// by a spread without the check above), with the way out. `warn` sees each skipped file first.
Checkpoint checkpoint_to_use(const std::string& run_dir, const std::function<void(const std::string&)>& warn);

}  // namespace spread
