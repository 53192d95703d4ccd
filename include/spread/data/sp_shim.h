#pragma once
// The C ABI between spread and its sentencepiece shim (libspread_sp_shim.so, src/shim/sentencepiece_shim.cpp).
//
// Why a shim: Debian's libsentencepiece bundles and exports protobuf 3.14 while LibTorch links the system's 3.21;
// a process that links both crashes at start. spread loads the shim with dlmopen(LM_ID_NEWLM) so sentencepiece,
// its protobuf and its own copy of libstdc++ live in a separate linker namespace. Across this boundary only C
// data passes: no C++ types, no exceptions, and memory the shim allocates is freed by the shim (its namespace
// has its own copy of libc, hence its own malloc).
//
// Every function that can fail returns 0 on success and nonzero on failure; the message of the last failure on
// the calling thread is then available from last_error().
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Bumped whenever SpreadSpApi changes; the loader refuses a shim built for another version.
#define SPREAD_SP_SHIM_ABI_VERSION 1

typedef struct SpreadSpModel SpreadSpModel;  // opaque: a loaded sentencepiece processor

typedef struct SpreadSpTrainOptions {
  const char* input_path;    // UTF-8 text, one sentence per line
  const char* model_prefix;  // writes <prefix>.model and <prefix>.vocab
  const char* model_type;    // "bpe" or "unigram"
  int32_t vocab_size;
  int32_t num_threads;
  int32_t input_sentence_size;   // cap on sentences sampled from the input (0 = all)
  int32_t max_sentence_length;   // bytes; longer lines are skipped by sentencepiece
  uint32_t seed;                 // sentencepiece's random generator seed (sentence sampling)
} SpreadSpTrainOptions;

typedef struct SpreadSpApi {
  int32_t abi_version;  // SPREAD_SP_SHIM_ABI_VERSION of the shim

  int (*train)(const SpreadSpTrainOptions* options);

  // Loads a model from the bytes of a .model file; *out receives a handle to release with free_model.
  int (*load)(const char* model_bytes, size_t n_bytes, SpreadSpModel** out);
  void (*free_model)(SpreadSpModel* model);

  int32_t (*vocab_size)(const SpreadSpModel* model);
  // Reserved ids, -1 when the model has none.
  int32_t (*bos_id)(const SpreadSpModel* model);
  int32_t (*eos_id)(const SpreadSpModel* model);

  // UTF-8 text -> ids. *ids is allocated by the shim (release with free_ids), *n_ids its length.
  int (*encode)(const SpreadSpModel* model, const char* text, size_t text_len, int32_t** ids, size_t* n_ids);
  void (*free_ids)(int32_t* ids);

  // ids -> UTF-8 text. *text is allocated by the shim (release with free_text), *text_len its length in bytes.
  int (*decode)(const SpreadSpModel* model, const int32_t* ids, size_t n_ids, char** text, size_t* text_len);
  void (*free_text)(char* text);

  // Copies the calling thread's last error message into buf (NUL-terminated, truncated to cap - 1 bytes);
  // returns the full message length.
  size_t (*last_error)(char* buf, size_t cap);
} SpreadSpApi;

// The shim's only exported symbol.
const SpreadSpApi* spread_sp_get_api(void);
typedef const SpreadSpApi* (*SpreadSpGetApiFn)(void);

#ifdef __cplusplus
}  // extern "C"
#endif
