#pragma once
// The files a run's checkpoints depend on: the tokenizer (an id means the character or piece it meant in
// training) and the tokenised splits (LM: the windows a resumed run draws). Their sizes and CRC-32s are recorded
// in RUN_DIR/checksums.json when the run starts. A resume with one of them missing or changed is refused, naming
// the file and how to recover: a tokenizer rebuilt from changed data gives a model whose ids mean other text.
#include <string>

namespace spread {

inline constexpr const char* kRunFilesName = "checksums.json";

// Records whichever of tokenizer.{json,model,chars}, train.bin and val.bin exist in run_dir.
void record_run_files(const std::string& run_dir);
// False for a run started by a spread older than the record.
bool has_run_files_record(const std::string& run_dir);

// Allowed: a missing token file is no error, since it is rebuilt from the data (and then checked with Refused).
// A missing tokenizer file never is.
enum class MissingTokenFiles { Allowed, Refused };
// Throws UserError naming the first recorded file that is missing or differs. No record: nothing to check.
void verify_run_files(const std::string& run_dir, MissingTokenFiles missing);

}  // namespace spread
