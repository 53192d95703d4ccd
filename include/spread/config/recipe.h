#pragma once
// A recipe is the whole description of a run: TOML on disk, typed structs in memory.
// Every key has a type and a range; unknown keys, wrong types and out-of-range values are UserErrors that name
// the file, the line and the key. `--set section.key=value` overrides go through the same checks.
#include <cstdint>
#include <string>
#include <vector>

#include "spread/config/objective.h"

namespace spread {

struct RunConfig {
  std::string name = "run";
  std::string out_dir = "checkpoints";
  int64_t seed = 1337;
  int64_t threads = 0;  // 0 = automatic (the fastest setting measured on 2-core CPUs, see runtime/threads)
  std::string device = "cpu";
};

// One [[data.mix]] entry: a shard file pattern and its share of the training windows.
struct ShardMix {
  std::string shards;
  double weight = 1.0;
};

struct DataConfig {
  // Text for lm / mlm: text | wordnet. Pairs for contrastive: pairs | wordnet_pairs | stsb | sick | beir.
  std::string source = "wordnet";
  std::vector<std::string> path;   // text or pair files, the STS-B / SICK file, the BEIR folder
  double val_fraction = 0.1;       // text: the last fraction of the corpus; pairs: a seeded sample of examples
  int64_t max_length = 0;          // encoder objectives: tokens per text with [CLS]/[SEP] (0 = model.block_size)
  std::vector<std::string> columns;  // pair files: [anchor, positive, negative...] column names (empty = by name)
  bool strict = false;             // pair files: a bad row is an error instead of being skipped and counted
  bool hard_negatives = false;     // sick: only the entailment pairs that have a contradiction, as a hard negative
  std::string qrels;               // beir: the split qrels/<qrels>.tsv ("" = train.tsv when present, else the only one)
  // lm: token shards instead of text (data/token_file.h: llm.c / modded-nanogpt shards or spread's token files),
  // a file pattern ("DIR/train_*.bin", glob(7)) whose files, in name order, are read as one stream; val_shards
  // the validation split's. The tokenizer must be the one they were made with (tokenizer.path or .model).
  std::string shards, val_shards;
  // lm: a weighted mixture of shard sets instead of data.shards ([[data.mix]] entries). Each window of a batch is
  // drawn from entry i with probability weight_i / (sum of the weights), from a stream fixed by (run.seed, step,
  // micro-step), so a resume continues it bitwise. The validation split stays data.val_shards.
  std::vector<ShardMix> mix;
  bool sharded() const { return !shards.empty() || !mix.empty(); }
  // Where the data sets are: "${data_root}" in data.path, eval.sts, eval.beir or tokenizer.model stands for it.
  // Empty = the environment variable SPREAD_DATA, else "../shared/data" (relative to the working directory). The
  // resolved recipe holds the folder and the paths it gave.
  std::string root;
};

struct TokenizerConfig {
  std::string kind = "bpe";  // char | bpe | unigram | hf
  int64_t vocab_size = 2048;  // not used by char and hf
  std::string model;  // an existing sentencepiece model file; empty = train one from the data
  std::string path;   // kind hf: a Hugging Face tokenizer.json, vocab.txt, vocab.json or their folder
  // kind hf, objective maxsim: the tokens that serve as the [Q] / [D] markers, added to the vocabulary where it
  // lacks them as PyLate adds its prefixes (a PyLate folder's query_prefix / document_prefix, PyLate's default
  // "[Q] " / "[D] " from any other model folder, or two unused BERT entries such as "[unused0]", "[unused1]")
  std::string query_marker, document_marker;
  // kind hf: each text through Python's str.lower() before tokenizing, as a sentence-transformers folder's
  // do_lower_case (adopted from it); Unicode's full lower case with the final-sigma rule, which a lower-casing
  // normalizer (bert-base-uncased's) does not apply
  bool lowercase = false;
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
  int64_t head_dim = 128;  // objective maxsim: width of the multi-vector head (other objectives have no head)
  // The architecture options of imported models (model/transformer.h); the defaults are spread's own model. A
  // model folder given as train.init_from sets them, and a recipe value that contradicts the folder is an error.
  std::string norm_position = "pre";  // pre | post (BERT: LayerNorm after each residual add and the embeddings)
  std::string activation = "gelu";    // gelu (exact) | gelu_tanh (GPT-2's gelu_new)
  int64_t intermediate_size = 0;      // MLP width; 0 = 4 * n_embd
  double layer_norm_eps = 1e-5;
  int64_t type_vocab_size = 0;        // BERT's token types (2); 0 = none
  bool mlm_transform = false;         // BERT's MLM prediction head (dense, activation, LayerNorm, decoder bias)
  int64_t vocab_size = 0;             // embedding rows; 0 = the tokenizer's ids (more: a table padded past them,
                                      // as models padded to a multiple of 8 or 64 have)
  // The modern blocks (Llama-style decoders, ModernBERT); the defaults are spread's own model.
  std::string positions = "learned";  // learned | rope (rotary positions on q and k, no position table)
  double rope_theta = 10000.0;        // the rotary base
  std::string norm = "layernorm";     // layernorm | rmsnorm
  bool norm_bias = true;              // LayerNorm's bias (RMSNorm has none)
  std::string mlp = "gelu";           // gelu: proj(act(fc x)) | geglu: proj(gelu(gate x) * up x) | swiglu: with SiLU
  int64_t n_kv_head = 0;              // grouped-query attention: k/v heads, a divisor of n_head; 0 = n_head
  bool tie_embeddings = true;         // false: an output matrix of its own
  // ModernBERT's local attention and norms.
  int64_t attention_window = 0;       // > 0: local layers see keys within attention_window / 2 positions either way
  int64_t global_every = 0;           // with a window: layer i is global when i % global_every == 0; 0 = none is
  double local_rope_theta = 0;        // the local layers' rotary base; 0 = rope_theta
  bool embedding_norm = false;        // a norm after the token embeddings (pre-norm models; post-norm ones have it)
  bool first_block_norm = true;       // false: block 0 attends to the embedding norm's output directly
  bool mlm_dense_bias = true;         // the MLM head's dense bias (mlm_transform)
};

struct TrainConfig {
  Objective objective = Objective::lm;  // config/objective.h: lm | mlm | contrastive | maxsim
  std::string init_from;         // a run directory whose newest checkpoint gives the initial model weights, or a
                                 // Hugging Face GPT-2 folder of the same shape (spread export; interchange/export.h)
  int64_t batch_size = 12;
  int64_t grad_accum = 1;
  int64_t max_steps = 2000;
  double lr = 1e-3;
  double min_lr = 1e-4;
  int64_t warmup_steps = 100;
  std::string schedule = "cosine";    // cosine | linear | wsd (train/schedule.h)
  double decay_fraction = 0.2;        // wsd: the final share of max_steps over which lr decays to min_lr
  std::string decay_shape = "linear"; // wsd: linear | cosine | sqrt (1 - sqrt)
  // adamw: AdamW on every parameter. muon: Muon (train/optimizer.h) on the blocks' 2-D weights at muon_lr, AdamW at
  // lr on the rest (embeddings, output and projection heads, norms, biases); both follow the schedule's shape.
  std::string optimizer = "adamw";
  double muon_lr = 0.02;
  double muon_momentum = 0.95;
  bool muon_nesterov = true;
  int64_t muon_ns_steps = 5;
  std::string muon_ns_precision = "bf16";   // bf16 (as torch.optim.Muon) | fp32
  std::string muon_adjust_lr = "original";  // original: sqrt(max(1, rows / cols)) | match_rms_adamw: 0.2 sqrt(max)
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;  // 0 = no clipping
  int64_t eval_every = 250;
  int64_t eval_batches = 20;
  int64_t ckpt_every = 500;
  int64_t keep_last = 3;
  // A metric of the evaluations ("ndcg@10", "sts_spearman", "val_loss", ...; "" = off): the checkpoint of its best
  // value (the lowest for a name ending in "loss", else the highest) is kept beside the newest keep_last ones and
  // named in RUN/best.json (spread export --best). Every evaluation step must be a checkpoint step.
  std::string keep_best;
  int64_t log_every = 10;
  int64_t max_bad_steps = 5;  // consecutive non-finite steps before training stops
  std::string precision = "fp32";  // fp32 | bf16: linear layers compute in bfloat16 (float32 weights, optimizer
                                   // state and checkpoints; runtime/precision.h says what runs in bf16)
};

struct DispersionConfig {
  bool enabled = false;
  double lambda = 0.1;
  std::string variant = "angular";  // angular | cosine | l2_repel | hinge | decorrelation
  double tau = 0.5;    // docs/design.md §3.2 (the reference's tau_cos); was 1.0 before the design review
  double clamp = 1e-4;  // straight-through clamp t; was 0.1, which flattened the loss above cos 0.9
  int64_t max_tokens = 256;
  std::vector<int64_t> layers;  // layer indices 0..n_layer (0 = embedding output); empty = last; see layers_mode
  std::string layers_mode = "last";  // last | all | list
  bool after_norm = true;  // the last block's output after the final LayerNorm, as the reference and HF's
                           // hidden_states[-1] (what the LM head sees); was false before the design review
};

// Masked-language-model pretraining of an encoder (BERT): mask_prob of the non-special tokens are chosen; of
// those 80% become [MASK], 10% a random token, 10% stay; the loss is over chosen positions only.
struct MlmConfig {
  double mask_prob = 0.15;
};

// In-batch InfoNCE on pooled text embeddings (docs/design.md §5).
struct ContrastiveConfig {
  double temperature = 0.05;
  bool symmetric = false;
  bool mask_duplicates = true;           // a candidate whose text equals the anchor's positive is not a negative
  int64_t mini_batch = 0;                // > 0: cached mode (GradCache) with mini-batches of this many texts
  bool simcse = false;                   // unsupervised: the positive is the anchor under another dropout mask
  std::vector<int64_t> matryoshka_dims;  // empty = the full width only
  std::string pooling = "mean";          // mean | cls | last | max | weightedmean
  bool gather = false;                   // data-parallel: every rank scores against the whole global batch
};

// Late interaction (docs/design.md §6): MaxSim of normalised token vectors, contrastive over in-batch and hard-negative
// documents. Queries are "[CLS] [Q] text [SEP]", documents "[CLS] [D] text [SEP]".
struct MaxSimConfig {
  int64_t query_length = 32;      // tokens per query, markers included
  int64_t document_length = 180;  // tokens per document, markers included
  bool query_expansion = true;    // queries padded with [MASK] to query_length, which attend and score (ColBERT)
  bool skiplist = false;          // document tokens that are punctuation only take no part in MaxSim
  // With skiplist and kind hf: the vocabulary entries left out of documents instead (PyLate's skiplist_words, each
  // the entry's id or [UNK]'s, as its convert_tokens_to_ids); empty = the punctuation rule
  std::vector<std::string> skiplist_words;
  bool gather = false;            // data-parallel: every query is scored against the global batch's documents
  double temperature = 1.0;       // scores / temperature before the cross-entropy (docs/design.md §6.2: 1)
};

// The loss on full plus Ward-pooled documents (docs/design.md §6.5, pooling-aware loss).
struct PoolingAwareConfig {
  bool enabled = false;
  double pool_factor = 4;
  double weight_full = 1;
  double weight_pooled = 1;
  std::string ste = "mean";             // mean | identity: how the pooled vectors' gradient reaches the members
  std::string ward_distance = "cosine";  // cosine | euclidean
  int64_t protected_tokens = 1;         // leading document tokens never pooled ([CLS])
};

struct LossConfig {
  DispersionConfig dispersion;
  MlmConfig mlm;
  ContrastiveConfig contrastive;
  MaxSimConfig maxsim;
  PoolingAwareConfig pooling_aware;
};

// Evaluations of encoders during training (every train.eval_every steps) and their defaults for `spread eval`.
struct EvalConfig {
  std::string sts;   // an STS CSV (sentence1, sentence2, score) or SICK.txt: Spearman of cosine vs gold
  std::string beir;  // a BEIR folder: nDCG@10, MRR@10, Recall@100 by exact search
  std::string qrels; // its split qrels/<qrels>.tsv ("" = train.tsv when present, else the only one)
  // lm runs: multiple-choice files (eval/multiple_choice.h), scored at each evaluation as NAME_acc and
  // NAME_acc_norm, NAME the file's name without its extension.
  std::vector<std::string> choices;
};

struct DiagnosticsConfig {
  bool enabled() const { return every > 0 || early_every > 0; }
  int64_t every = 0;          // 0 = off; otherwise every N steps on a fixed probe batch from the val split
  int64_t early_every = 0;    // also every N steps up to step early_until (0 = off): early curves need dense probes
  int64_t early_until = 0;
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
  EvalConfig eval;

  std::string run_dir() const;  // run.out_dir / run.name
  const ObjectiveTraits& objective() const { return traits_of(train.objective); }
  bool is_encoder_objective() const { return objective().encoder(); }
};

// Parses TOML text; `source_name` names it in messages. Applies `overrides` ("section.key=value") afterwards.
Recipe parse_recipe(const std::string& toml_text, const std::string& source_name,
                    const std::vector<std::string>& overrides = {});
Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides = {});

// The resolved recipe as TOML (every key, in schema order); parse_recipe(to_toml(r)) == r.
std::string recipe_to_toml(const Recipe& recipe);

// Every recipe key with its type, default, allowed values and meaning: a Markdown page (docs/recipe_reference.md)
// or plain text (`spread recipe --keys`).
std::string recipe_reference(bool markdown);

}  // namespace spread
