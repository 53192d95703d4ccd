#include "fuzz_targets.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <torch/torch.h>
#include <zlib.h>

#include "spread/config/recipe.h"
#include "spread/data/beir.h"
#include "spread/data/hf/tokenizer.h"
#include "spread/data/npy.h"
#include "spread/data/pairs.h"
#include "spread/data/safetensors.h"
#include "spread/data/shard_writer.h"
#include "spread/data/token_file.h"
#include "spread/data/tokenizer.h"
#include "spread/eval/multiple_choice.h"
#include "spread/interchange/hf_import.h"
#include "spread/interchange/hf_tokenizer.h"
#include "spread/interchange/sentence_modules_record.h"
#include "spread/model/parameter_count.h"
#include "spread/run/checkpoint.h"
#include "spread/run/setup.h"
#include "spread/util/error.h"

namespace fs = std::filesystem;

namespace spread::fuzz {
namespace {

// --- scratch files -------------------------------------------------------------------------------------------------

// One folder per process under $TMPDIR (scripts/fuzz.sh points it at /dev/shm), emptied before every input.
const fs::path& scratch_root() {
  static const fs::path root = [] {
    fs::path p = fs::temp_directory_path() / ("spread-fuzz-" + std::to_string(::getpid()));
    fs::create_directories(p);
    std::atexit([] { std::error_code ec; fs::remove_all(fs::temp_directory_path() /
                                                          ("spread-fuzz-" + std::to_string(::getpid())), ec); });
    return p;
  }();
  return root;
}

fs::path fresh_scratch() {
  const fs::path dir = scratch_root() / "in";
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write_bytes(const fs::path& path, std::string_view bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
}

// The bytes as the one file `name` of a fresh folder; returns its path.
std::string as_file(std::string_view bytes, const std::string& name) {
  const fs::path path = fresh_scratch() / name;
  write_bytes(path, bytes);
  return path.string();
}

// The bundle's files in a fresh folder; returns the folder. A name that clashes with an earlier one ("a" and
// "a/b") is left out: the harness's own limit, not the reader's.
std::string as_folder(std::string_view bytes) {
  const fs::path dir = fresh_scratch();
  for (const auto& [name, contents] : split_bundle(bytes)) {
    try {
      write_bytes(dir / name, contents);
    } catch (const fs::filesystem_error&) {
    }
  }
  return dir.string();
}

bool bundle_name_ok(std::string_view name) {
  if (name.empty() || name.size() > 100 || name.front() == '/' || name.find("..") != std::string_view::npos)
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == '/';
  });
}

// --- using what a reader accepted ------------------------------------------------------------------------------------

const char* const kText = "Hello, World! Ünïcödé 東京 [MASK] a+b=c\tdone.  ";
constexpr std::string_view kTextMarker = "\n=== text\n";

// Every element read: a tensor the reader returned must own (or view) memory that holds all of it.
void read_every_element(const torch::Tensor& t) {
  if (t.numel() > 0) (void)t.to(torch::kDouble).sum().item<double>();
}

void use_hf_tokenizer(const hf::Tokenizer& tok, std::string_view text = kText) {
  (void)tok.encode(text);
  const hf::Encoding one = tok.encode(kText);
  (void)tok.decode(one.ids);
  (void)tok.decode(one.ids, /*skip_special_tokens=*/false);
  (void)tok.encode_pair("first part", "second part");
  (void)tok.encode_batch({kText, "", "x"}, true, /*threads=*/1);
  (void)char_offsets(one, kText);
  for (int32_t id = 0; id < std::min<int64_t>(tok.vocab_size(), 64); ++id) (void)tok.id_to_token(id);
  (void)tok.to_json();
}

// A char vocabulary refuses characters it lacks, so the text encoded is one made of the tokenizer's own entries.
void use_run_tokenizer(const Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < std::min<int64_t>(tok.vocab_size(), 48); ++id) ids.push_back(id);
  (void)tok.encode(tok.decode(ids));
  (void)tok.special_ids();
}

// --- the targets -------------------------------------------------------------------------------------------------

void read_safetensors_bytes(std::string_view bytes) {
  for (const auto& [name, tensor] : parse_safetensors(bytes, "fuzz.safetensors")) read_every_element(tensor);
}

void read_model_config(std::string_view bytes) {
  const fs::path dir = fs::path(as_file(bytes, "config.json")).parent_path();
  (void)recipe_of_model_folder(read_hf_model_folder(dir.string(), /*with_weights=*/false));
}

// What `--model` commands do with a folder: its recipe, then a model of its config with its weights copied in
// (for models of up to 16M values: the weights come from the input, so bigger ones cannot be well-formed here).
void read_model_folder(std::string_view bytes) {
  const HfModelFolder folder = read_hf_model_folder(as_folder(bytes), /*with_weights=*/true);
  (void)recipe_of_model_folder(folder);
  for (const auto& [name, tensor] : folder.weights) read_every_element(tensor);
  if (parameter_count(folder.config) > 16e6) return;
  Transformer model(folder.config, WeightInit::none);
  load_model_weights(model, folder.weights, folder.model_dir);
}

// The text to encode may follow the JSON after a line "=== text" (a pattern backtracks without end only on some
// texts: the probe's D4 needed 38 'a' and a 'b').
void read_tokenizer_json(std::string_view bytes) {
  const size_t text_at = bytes.find(kTextMarker);
  const std::string_view json = bytes.substr(0, text_at);
  const std::string_view text = text_at == std::string_view::npos ? kText : bytes.substr(text_at + kTextMarker.size());
  use_hf_tokenizer(*hf::Tokenizer::load(as_file(json, "tokenizer.json")), text);
}

void read_tokenizer_folder(std::string_view bytes) { use_hf_tokenizer(*hf::Tokenizer::load(as_folder(bytes))); }

void read_sentencepiece_model(std::string_view bytes) {
  (void)read_sentencepiece_pieces(std::string(bytes), "fuzz.model");
}

void read_char_tokenizer(std::string_view bytes) {
  const auto tok = load_char_tokenizer(as_file(bytes, "tokenizer.chars"));
  (void)tok->decode(std::vector<int32_t>{0});  // ids only: the fixed text may hold characters outside the vocabulary
}

void read_run_tokenizer(std::string_view bytes) { use_run_tokenizer(*load_tokenizer(as_folder(bytes))); }

// A recipe that parses must come back the same from the TOML spread writes for it (config/recipe.h promises it).
void check_round_trip(const Recipe& recipe) {
  const std::string once = recipe_to_toml(recipe);
  const std::string twice = recipe_to_toml(parse_recipe(once, "the recipe written back"));
  if (once != twice) throw ContractBroken("a parsed recipe written as TOML and parsed again differs");
}

void read_recipe(std::string_view bytes) { check_round_trip(parse_recipe(std::string(bytes), "fuzz.toml")); }

// Each line a --set override (section.key=value) of a small valid recipe.
void read_recipe_overrides(std::string_view bytes) {
  static const std::string kBase =
      "[run]\nname = \"fuzz\"\n[data]\npath = \"input.txt\"\n[tokenizer]\nkind = \"char\"\n"
      "[model]\nn_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 32\n[train]\nmax_steps = 2\n";
  std::vector<std::string> overrides;
  size_t start = 0;
  while (start <= bytes.size() && overrides.size() < 64) {
    const size_t end = std::min(bytes.find('\n', start), bytes.size());
    if (end > start) overrides.emplace_back(bytes.substr(start, end - start));
    start = end + 1;
  }
  check_round_trip(parse_recipe(kBase, "fuzz.toml", overrides));
}

void read_pairs_file(std::string_view bytes, const std::string& name) {
  PairSourceSpec spec;
  spec.paths = {as_file(bytes, name)};
  (void)load_pairs(spec);
}
void read_pairs_tsv(std::string_view bytes) { read_pairs_file(bytes, "pairs.tsv"); }
void read_pairs_csv(std::string_view bytes) { read_pairs_file(bytes, "pairs.csv"); }
void read_pairs_jsonl(std::string_view bytes) { read_pairs_file(bytes, "pairs.jsonl"); }

void read_sts_file(std::string_view bytes) { (void)load_sts_csv(as_file(bytes, "sts.csv")); }

void read_beir_folder(std::string_view bytes) { (void)load_beir(as_folder(bytes)); }

void read_npy_file(std::string_view bytes) { (void)read_npy_matrix(as_file(bytes, "m.npy")).sum(); }

void read_choices_file(std::string_view bytes) { (void)read_choices(as_file(bytes, "items.jsonl")); }

// `spread tokenize --shards` on a .jsonl input: each line's UTF-8 checked, then its document taken from "text".
void read_jsonl_documents(std::string_view bytes) {
  int64_t line = 0;
  for (std::string_view rest = bytes; !rest.empty(); ++line) {
    const size_t end = std::min(rest.find('\n'), rest.size());
    const std::string_view text = rest.substr(0, end);
    rest.remove_prefix(std::min(end + 1, rest.size()));
    if (text.empty()) continue;
    if (first_invalid_utf8(std::string(text)) >= 0) throw UserError("invalid UTF-8");  // the writer refuses it first
    (void)jsonl_document(text, "text", "docs.jsonl:" + std::to_string(line + 1));
  }
}

void read_token_file(std::string_view bytes) {
  const TokenFile tokens(as_file(bytes, "train.tok"));
  std::vector<int64_t> chunk(4096);
  for (uint64_t at = 0; at < tokens.size(); at += chunk.size())
    tokens.copy(at, std::min<uint64_t>(chunk.size(), tokens.size() - at), chunk.data());
}

// The checkpoint's payload (version 2: safetensors) behind a valid header: its checksum would stop nearly every
// mutation before the payload's reader, which is what the bytes of a hostile file reach (a CRC is no signature).
// Version 1's payload, a LibTorch archive, is not fuzzed: TorchScript's unpickler crashes on crafted bytes
// (docs/untrusted_input.md), which is why version 2 exists.
void read_checkpoint_payload(std::string_view payload) {
  std::string file = "SPRDCKPT";
  const auto put = [&file](auto value) { file.append(reinterpret_cast<const char*>(&value), sizeof value); };
  put(uint32_t{2});
  put(uint64_t(payload.size()));
  put(uint32_t(crc32(0L, reinterpret_cast<const Bytef*>(payload.data()), uInt(payload.size()))));
  file.append(payload);
  const Checkpoint ckpt = read_checkpoint(as_file(file, "step_00000001.ckpt"));
  (void)first_non_finite(ckpt);
}

void read_sentence_modules_record(std::string_view bytes) {
  const fs::path dir = fs::path(as_file(bytes, kSentenceModulesRecord)).parent_path();
  (void)recorded_sentence_modules(dir.string());
}

}  // namespace

std::vector<std::pair<std::string, std::string>> split_bundle(std::string_view bytes) {
  std::vector<std::pair<std::string, std::string>> files;
  size_t at = bytes.rfind("=== ", 0) == 0 ? 0 : bytes.find("\n=== ");
  while (at != std::string_view::npos && files.size() < 32) {
    const size_t name_begin = at + (bytes[at] == '\n' ? 5 : 4);
    const size_t name_end = std::min(bytes.find('\n', name_begin), bytes.size());
    const std::string name(bytes.substr(name_begin, name_end - name_begin));
    if (!bundle_name_ok(name)) throw user_error("fuzz bundle", 0, "", "bad file name '" + name.substr(0, 100) + "'");
    const size_t body = std::min(name_end + 1, bytes.size());
    at = bytes.find("\n=== ", body);
    files.emplace_back(name, std::string(bytes.substr(body, (at == std::string_view::npos ? bytes.size() : at) - body)));
  }
  return files;
}

const std::vector<Target>& targets() {
  static const std::vector<Target> all = {
      {"safetensors", "a .safetensors file (header and data)", 1 << 16, 256, read_safetensors_bytes},
      {"model_config", "config.json of a Hugging Face model folder (BERT, GPT-2, Llama, ModernBERT)", 1 << 16, 256,
       read_model_config},
      {"model_folder", "a bundle: a model folder (config.json, model.safetensors or the shard index and shards, the "
                       "sentence-transformers and PyLate wrapper files)", 1 << 17, 512, read_model_folder},
      {"tokenizer_json", "a tokenizer.json, then encode and decode of a fixed text and of the text after a line "
                         "\"=== text\" when there is one", 1 << 16, 512,
       read_tokenizer_json},
      {"tokenizer_folder", "a bundle: vocab.txt (+ tokenizer_config.json) or vocab.json + merges.txt", 1 << 16, 512,
       read_tokenizer_folder},
      {"sentencepiece", "a sentencepiece .model (protobuf): its pieces", 1 << 16, 256, read_sentencepiece_model},
      {"char_tokenizer", "a run's tokenizer.chars", 1 << 14, 256, read_char_tokenizer},
      {"run_tokenizer", "a bundle: a run's tokenizer.json with tokenizer.hf.json or tokenizer.chars", 1 << 16, 512,
       read_run_tokenizer},
      {"recipe", "a recipe (TOML), then written back and parsed again", 1 << 14, 256, read_recipe},
      {"recipe_set", "--set overrides (one per line) of a small recipe", 1 << 12, 256, read_recipe_overrides},
      {"pairs_tsv", "a pairs file (.tsv)", 1 << 15, 256, read_pairs_tsv},
      {"pairs_csv", "a pairs file (.csv)", 1 << 15, 256, read_pairs_csv},
      {"pairs_jsonl", "a pairs file (.jsonl)", 1 << 15, 256, read_pairs_jsonl},
      {"sts_csv", "an STS file (CSV: sentence1, sentence2, score)", 1 << 15, 256, read_sts_file},
      {"beir", "a bundle: a BEIR folder (corpus.jsonl, queries.jsonl, qrels/*.tsv)", 1 << 16, 256, read_beir_folder},
      {"npy", "a .npy matrix", 1 << 15, 256, read_npy_file},
      {"token_file", "a token file (.tok) or an llm.c shard", 1 << 15, 256, read_token_file},
      {"choices", "a multiple-choice file (.jsonl)", 1 << 15, 256, read_choices_file},
      {"jsonl_documents", "the documents of a .jsonl input of tokenize --shards", 1 << 15, 256, read_jsonl_documents},
      {"checkpoint", "a checkpoint's safetensors payload behind a valid version-2 header", 1 << 16, 512,
       read_checkpoint_payload},
      {"sentence_record", "a run's sentence_transformers.json", 1 << 12, 256, read_sentence_modules_record},
  };
  return all;
}

const Target* target_named(std::string_view name) {
  for (const Target& t : targets())
    if (name == t.name) return &t;
  return nullptr;
}

Outcome run_one(const Target& target, std::string_view bytes, std::string* refusal) {
  try {
    target.read(bytes);
    return Outcome::accepted;
  } catch (const UserError& e) {
    if (refusal) *refusal = e.what();
    return Outcome::refused;
  } catch (const ContractBroken&) {
    throw;
  } catch (const std::exception& e) {
    throw ContractBroken(std::string(target.name) + ": not a UserError: " + std::string(e.what()).substr(0, 2000));
  } catch (...) {
    throw ContractBroken(std::string(target.name) + ": an exception that is no std::exception");
  }
}

}  // namespace spread::fuzz
