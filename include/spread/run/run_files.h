#pragma once
// The files a run's checkpoints depend on: the tokenizer (an id means the character or piece it meant in
// training) and the tokenised splits (LM: the windows a resumed run draws). Their sizes and CRC-32s are recorded
// in RUN_DIR/checksums.json when the run starts. A resume with one of them missing or changed is refused, naming
// the file and how to recover: a tokenizer rebuilt from changed data gives a model whose ids mean other text.
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace spread {

inline constexpr const char* kRunFilesName = "checksums.json";

// The files one recipe key names (data.shards, data.mix[i].shards, data.val_shards), in the order they are read.
struct ShardList {
  std::string key;
  std::vector<std::string> files;
};

// Records whichever of tokenizer.{json,model,chars}, train.bin and val.bin exist in run_dir, and the token shards
// the run reads where they are. A shard's fingerprint is its size and the CRC-32 of its first and last MiB (not of
// all of it: a resume over 20 GB of shards would read them all first); a shard made again from other text differs
// in its size or in those bytes all but surely.
void record_run_files(const std::string& run_dir, const std::vector<ShardList>& shards = {});
// False for a run started by a spread older than the record.
bool has_run_files_record(const std::string& run_dir);

// Allowed: a missing token file is no error, since it is rebuilt from the data (and then checked with Refused).
// A missing tokenizer file never is.
enum class MissingTokenFiles { Allowed, Refused };
// Throws UserError naming the first recorded file that is missing or differs, or the key whose pattern now names
// other shards than `shards` (the recipe's, globbed now) recorded. No record: nothing to check. Without `shards`
// the shards are not checked (a second check of the run's own files, after the shards were checked once).
void verify_run_files(const std::string& run_dir, MissingTokenFiles missing,
                      const std::optional<std::vector<ShardList>>& shards = std::nullopt);

// What a fresh start made, removed again when it fails before training: a half-made run directory (recipe.toml,
// train.lock, tokenizer files) would be listed by `compare` as "running or stopped". Only what the start made
// goes: the directories it created (the run directory, and run.out_dir when it was missing too), or in a
// directory that existed, the entries it added. Construct it before the run directory is created; arm() once the
// run's lock is held (before that, what is in the directory may be another trainer's); keep() once training
// starts. Not copyable.
class FreshStartCleanup {
 public:
  explicit FreshStartCleanup(const std::string& run_dir);
  ~FreshStartCleanup();
  FreshStartCleanup(const FreshStartCleanup&) = delete;
  FreshStartCleanup& operator=(const FreshStartCleanup&) = delete;
  void arm() { armed_ = true; }
  void keep() { armed_ = false; }

 private:
  std::string run_dir_;
  std::string created_root_;          // the outermost directory that did not exist; empty when run_dir existed
  std::set<std::string> entries_before_;  // names in run_dir when it existed
  bool armed_ = false;
};

}  // namespace spread
