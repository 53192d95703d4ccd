#pragma once
// A recipe is the whole description of a run: TOML on disk, typed structs in memory.
// Every key has a type and a range; unknown keys, wrong types and out-of-range values are UserErrors that name
// the file, the line and the key. `--set section.key=value` overrides go through the same checks.
#include <cstdint>
#include <string>
#include <vector>

namespace spread {

struct RunConfig {
  std::string name = "run";
  std::string out_dir = "checkpoints";
  int64_t seed = 1337;
  int64_t threads = 0;  // 0 = automatic (the fastest setting measured on 2-core CPUs, see runtime/threads)
  std::string device = "cpu";
};

struct DataConfig {
  std::string source = "wordnet";  // text | wordnet
  std::vector<std::string> path;   // text files (source = "text")
  double val_fraction = 0.1;       // the last fraction of the corpus is the validation split
};

struct TokenizerConfig {
  std::string kind = "bpe";  // char | bpe | unigram
  int64_t vocab_size = 2048;
  std::string model;  // an existing sentencepiece model file; empty = train one from the data
};

struct ModelConfig {
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  int64_t block_size = 64;
  double dropout = 0.0;
  bool bias = true;
  bool causal = true;  // false = bidirectional encoder (embedding models)
  bool recompute = true;  // recompute attention probabilities and GELU outputs in backward: less memory
};

struct TrainConfig {
  int64_t batch_size = 12;
  int64_t grad_accum = 1;
  int64_t max_steps = 2000;
  double lr = 1e-3;
  double min_lr = 1e-4;
  int64_t warmup_steps = 100;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;  // 0 = no clipping
  int64_t eval_every = 250;
  int64_t eval_batches = 20;
  int64_t ckpt_every = 500;
  int64_t keep_last = 3;
  int64_t log_every = 10;
  int64_t max_bad_steps = 5;  // consecutive non-finite steps before training stops
};

struct DispersionConfig {
  bool enabled = false;
  double lambda = 0.1;
  std::string variant = "angular";  // angular | cosine | l2_repel | hinge | decorrelation
  double tau = 1.0;
  double clamp = 0.1;
  int64_t max_tokens = 256;
  std::vector<int64_t> layers;  // block indices 1..n_layer; empty = last; see layers_mode
  std::string layers_mode = "last";  // last | all | list
  bool after_norm = false;
};

struct LossConfig {
  DispersionConfig dispersion;
};

struct DiagnosticsConfig {
  int64_t every = 0;          // 0 = off; otherwise every N steps on a fixed probe batch from the val split
  int64_t probe_texts = 16;   // sequences in the probe batch
  int64_t max_pairs = 4096;   // sampled cross-text token pairs for batch_mean_cos
  bool socm = false;          // also log SOCM over all pairs of probe texts (last layer)
};

struct Recipe {
  std::string source;  // file the recipe came from (for messages)
  RunConfig run;
  DataConfig data;
  TokenizerConfig tokenizer;
  ModelConfig model;
  TrainConfig train;
  LossConfig loss;
  DiagnosticsConfig diagnostics;

  std::string run_dir() const;  // run.out_dir / run.name
};

// Parses TOML text; `source_name` names it in messages. Applies `overrides` ("section.key=value") afterwards.
Recipe parse_recipe(const std::string& toml_text, const std::string& source_name,
                    const std::vector<std::string>& overrides = {});
Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides = {});

// The resolved recipe as TOML (every key, in schema order); parse_recipe(to_toml(r)) == r.
std::string recipe_to_toml(const Recipe& recipe);

}  // namespace spread
