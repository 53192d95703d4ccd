#pragma once
// Fuzz targets: every reader of bytes from outside, each behind one function of the bytes, with the readers'
// contract checked on every input (docs/untrusted_input.md):
//   - the input is read, or refused with spread::UserError; any other exception is a broken contract
//     (ContractBroken), and so is a crash, a sanitizer report, a hang or an allocation past the target's bound;
//   - a reader that accepts is then used the way spread uses it (a tokenizer encodes and decodes a fixed text, a
//     model folder yields its recipe, tensors are read to the last byte), so that what it let through is exercised.
// The same functions serve libFuzzer (tests/fuzz/fuzz_main.cpp, built by scripts/build.sh --fuzz, run by
// scripts/fuzz.sh) and the replay of the committed corpora in the ordinary test suite (tests/test_fuzz_corpus.cpp),
// so that every crash a fuzzer ever found stays a test.
//
// Targets that read a folder take a bundle: files one after another, each introduced by a line "=== NAME" (a
// relative path of letters, digits, '_', '-', '.' and '/', without ".."), e.g.
//   === config.json
//   {"architectures": ["BertModel"], ...}
//   === 1_Pooling/config.json
//   {...}
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spread::fuzz {

// An input that broke the readers' contract (an exception other than UserError).
class ContractBroken : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Target {
  const char* name;
  const char* reads;         // what the bytes are, for --list and the docs
  int64_t max_input_bytes;   // libFuzzer's -max_len for this target
  int64_t memory_bound_mb;   // no single allocation, and no growth of the peak RSS, beyond this while reading
  void (*read)(std::string_view bytes);  // reads the bytes; throws UserError when it refuses them
};

const std::vector<Target>& targets();
const Target* target_named(std::string_view name);  // nullptr when there is none

enum class Outcome { accepted, refused };

// Reads one input: accepted, or refused with a UserError (its message into `refusal` when given). Throws
// ContractBroken for any other exception, naming it.
Outcome run_one(const Target& target, std::string_view bytes, std::string* refusal = nullptr);

// The files of a bundle (see above), in order; UserError for a bad name. Bytes before the first "=== " line are
// ignored.
std::vector<std::pair<std::string, std::string>> split_bundle(std::string_view bytes);

}  // namespace spread::fuzz
