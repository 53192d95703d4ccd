#pragma once
// Checkpoint files: a small header (magic, version, payload size, CRC-32 of the payload) followed by a LibTorch
// archive of named tensors and a JSON string of metadata. Written atomically (temporary file, fsync, rename,
// fsync of the directory), so a crash never leaves a half-written file under a checkpoint's name; read back
// with the checksum verified, so a truncated or corrupt file is reported and skipped instead of loaded.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include <torch/types.h>

namespace spread {

struct Checkpoint {
  int64_t step = 0;
  std::map<std::string, torch::Tensor> tensors;
  nlohmann::json meta;
};

// Writes dir/ckpt/step_XXXXXXXX.ckpt and deletes all but the newest `keep_last` checkpoints.
std::string save_checkpoint(const std::string& run_dir, const Checkpoint& ckpt, int64_t keep_last);

// Reads one file; throws UserError naming the file and what is wrong with it.
Checkpoint read_checkpoint(const std::string& path);

// Checkpoint files of a run, newest first.
std::vector<std::string> list_checkpoints(const std::string& run_dir);

// The newest checkpoint that reads back intact; warnings (one per skipped bad file) go to `warnings`.
std::optional<Checkpoint> load_latest_checkpoint(const std::string& run_dir, std::vector<std::string>* warnings);

// Atomically replaces `path` with `contents` (temporary file, fsync, rename, fsync of the directory).
void write_file_atomic(const std::string& path, const std::string& contents);

}  // namespace spread
