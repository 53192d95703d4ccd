// The sentencepiece shim: a C ABI (include/spread/data/sp_shim.h) over sentencepiece, loaded by spread with
// dlmopen() into its own linker namespace because sentencepiece's bundled protobuf clashes with LibTorch's.
// Nothing here may throw across the boundary: every entry point catches and stores the message in a
// thread-local string that last_error() copies out.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <exception>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "spread/data/sp_shim.h"

struct SpreadSpModel {
  sentencepiece::SentencePieceProcessor processor;
};

namespace {

thread_local std::string g_last_error;

int fail(const std::string& message) {
  g_last_error = message;
  return 1;
}

// Runs `body` (returning 0 or fail(...)), turning any C++ exception into an error code.
template <typename Body>
int guarded(Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return fail(e.what());
  } catch (...) {
    return fail("unknown C++ exception in the sentencepiece shim");
  }
}

// Options chosen so that any text round-trips exactly and small corpora train quietly:
// - identity normalization, no dummy prefix, keep whitespace runs: decode(encode(x)) == x, and encoding
//   pieces of a text split at newlines gives the same ids as encoding the whole text;
// - byte_fallback with full character coverage: characters never seen in training become UTF-8 byte pieces
//   instead of <unk>;
// - hard vocab limit: the model has exactly vocab_size pieces or training fails with sentencepiece's message.
std::unordered_map<std::string, std::string> train_arguments(const SpreadSpTrainOptions& o) {
  return {
      {"input", o.input_path},
      {"model_prefix", o.model_prefix},
      {"model_type", o.model_type},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"num_threads", std::to_string(o.num_threads)},
      {"input_sentence_size", std::to_string(o.input_sentence_size)},
      {"shuffle_input_sentence", "true"},
      {"max_sentence_length", std::to_string(o.max_sentence_length)},
      {"character_coverage", "1.0"},
      {"byte_fallback", "true"},
      {"normalization_rule_name", "identity"},
      {"add_dummy_prefix", "false"},
      {"remove_extra_whitespaces", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"hard_vocab_limit", "true"},
      {"minloglevel", "2"},  // errors only; they come back through the returned status anyway
  };
}

int train(const SpreadSpTrainOptions* options) {
  return guarded([&] {
    if (options == nullptr || options->input_path == nullptr || options->model_prefix == nullptr ||
        options->model_type == nullptr)
      return fail("train: missing option");
    // Measured with sentencepiece 0.1.97: sampling input_sentence_size lines of a larger corpus already gives
    // the same model in every run and for any seed; the seed pins down the generator for versions that use it.
    sentencepiece::SetRandomGeneratorSeed(options->seed);
    const auto status = sentencepiece::SentencePieceTrainer::Train(train_arguments(*options));
    if (!status.ok()) return fail(status.ToString());
    return 0;
  });
}

int load(const char* model_bytes, size_t n_bytes, SpreadSpModel** out) {
  return guarded([&] {
    *out = nullptr;
    auto model = std::make_unique<SpreadSpModel>();
    const auto status = model->processor.LoadFromSerializedProto(std::string_view(model_bytes, n_bytes));
    if (!status.ok()) return fail(status.ToString());
    *out = model.release();
    return 0;
  });
}

void free_model(SpreadSpModel* model) { delete model; }

int32_t vocab_size(const SpreadSpModel* model) { return model->processor.GetPieceSize(); }
int32_t bos_id(const SpreadSpModel* model) { return model->processor.bos_id(); }
int32_t eos_id(const SpreadSpModel* model) { return model->processor.eos_id(); }

// Copies `values` into a malloc'd buffer owned by the shim's libc.
template <typename T>
T* copy_out(const T* values, size_t n) {
  T* buffer = static_cast<T*>(std::malloc(n == 0 ? 1 : n * sizeof(T)));
  if (buffer == nullptr) throw std::bad_alloc();
  if (n > 0) std::memcpy(buffer, values, n * sizeof(T));
  return buffer;
}

int encode(const SpreadSpModel* model, const char* text, size_t text_len, int32_t** ids, size_t* n_ids) {
  return guarded([&] {
    std::vector<int> out;
    const auto status = model->processor.Encode(std::string_view(text, text_len), &out);
    if (!status.ok()) return fail(status.ToString());
    static_assert(sizeof(int) == sizeof(int32_t), "sentencepiece ids are int");
    *ids = copy_out(reinterpret_cast<const int32_t*>(out.data()), out.size());
    *n_ids = out.size();
    return 0;
  });
}

void free_ids(int32_t* ids) { std::free(ids); }

int decode(const SpreadSpModel* model, const int32_t* ids, size_t n_ids, char** text, size_t* text_len) {
  return guarded([&] {
    // sentencepiece aborts the process on an out-of-range id, so check here.
    const int32_t size = model->processor.GetPieceSize();
    for (size_t i = 0; i < n_ids; ++i)
      if (ids[i] < 0 || ids[i] >= size)
        return fail("id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                    " is outside the vocabulary [0, " + std::to_string(size) + ")");
    std::string out;
    const auto status = model->processor.Decode(std::vector<int>(ids, ids + n_ids), &out);
    if (!status.ok()) return fail(status.ToString());
    *text = copy_out(out.data(), out.size());
    *text_len = out.size();
    return 0;
  });
}

void free_text(char* text) { std::free(text); }

size_t last_error(char* buf, size_t cap) {
  if (buf != nullptr && cap > 0) {
    const size_t n = std::min(cap - 1, g_last_error.size());
    std::memcpy(buf, g_last_error.data(), n);
    buf[n] = '\0';
  }
  return g_last_error.size();
}

const SpreadSpApi kApi = {SPREAD_SP_SHIM_ABI_VERSION, train, load, free_model, vocab_size, bos_id, eos_id,
                          encode, free_ids, decode, free_text, last_error};

}  // namespace

extern "C" __attribute__((visibility("default"))) const SpreadSpApi* spread_sp_get_api(void) { return &kApi; }
