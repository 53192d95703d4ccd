// A Hugging Face tokenizer as a run's tokenizer (data/hf_run_tokenizer.h).
#include "spread/data/hf_run_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "hf/unicode.h"
#include "spread/data/hf/tokenizer.h"
#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_depth.h"

namespace fs = std::filesystem;

namespace spread {
namespace {

// The vocabulary's own [PAD] [CLS] [SEP] [MASK], when it has all four.
SpecialIds vocabulary_special_ids(const hf::Tokenizer& hf) {
  const auto pad = hf.token_to_id("[PAD]"), cls = hf.token_to_id("[CLS]"), sep = hf.token_to_id("[SEP]"),
             mask = hf.token_to_id("[MASK]");
  SpecialIds ids;
  if (!pad || !cls || !sep || !mask) return ids;
  ids.pad = *pad, ids.cls = *cls, ids.sep = *sep, ids.mask = *mask;
  ids.ordinary_end = int32_t(hf.vocab_size());  // BERT's data collator draws random tokens from the whole vocabulary
  return ids;
}

// A marker is a token of the tokenizer: load_hf_run_tokenizer added it when the vocabulary had none.
int32_t marker_id(const hf::Tokenizer& hf, const std::string& marker, const char* key, const std::string& source) {
  if (auto id = hf.token_to_id(marker)) return int32_t(*id);
  throw user_error(source, 0, key, "'" + marker + "' is no token of this tokenizer");
}

class HfRunTokenizer final : public Tokenizer {
 public:
  HfRunTokenizer(std::unique_ptr<hf::Tokenizer> hf, std::string json_text, std::string source, HfRunOptions options)
      : hf_(std::move(hf)), json_text_(std::move(json_text)), source_(std::move(source)),
        options_(std::move(options)), special_(vocabulary_special_ids(*hf_)) {
    if (options_.query.empty()) return;
    special_.query = marker_id(*hf_, options_.query, "tokenizer.query_marker", source_);
    special_.document = marker_id(*hf_, options_.document, "tokenizer.document_marker", source_);
  }

  std::vector<int32_t> encode(const std::string& text) const override {
    if (options_.lowercase) return hf_->encode(hf::python_lower(text), /*add_special_tokens=*/false).ids;
    return hf_->encode(text, /*add_special_tokens=*/false).ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    return hf_->decode(ids, /*skip_special_tokens=*/false);
  }
  int64_t vocab_size() const override { return hf_->vocab_size(); }
  std::string kind() const override { return "hf"; }
  SpecialIds special_ids() const override { return special_; }
  bool lowercases() const override { return options_.lowercase; }
  std::optional<int32_t> entry_id(const std::string& entry) const override {
    if (auto id = hf_->token_to_id(entry)) return int32_t(*id);
    return std::nullopt;
  }

  void save(const std::string& run_dir) const override {
    write_tokenizer_files(run_dir, "hf", vocab_size(), kHfTokenizerFile, json_text_);
    // Where it came from, for the reader of the run directory; loading needs only tokenizer.hf.json.
    const fs::path meta_path = fs::path(run_dir) / "tokenizer.json";
    auto bytes = read_whole_file(meta_path.string());
    if (!bytes) throw user_error(meta_path.string(), 0, "", "cannot read the tokenizer description just written");
    refuse_deep_json(*bytes, meta_path.string());
    nlohmann::json meta = nlohmann::json::parse(*bytes);
    meta["source"] = fs::absolute(source_).lexically_normal().string();
    if (!options_.query.empty()) {
      meta["query_marker"] = options_.query;
      meta["document_marker"] = options_.document;
    }
    if (options_.lowercase) meta["lowercase"] = true;
    const std::string tmp = meta_path.string() + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << meta.dump(2) << "\n";
      if (!out) throw user_error(tmp, 0, "", "cannot write the tokenizer description");
    }
    rename_file(tmp, meta_path.string());
  }

 private:
  std::unique_ptr<hf::Tokenizer> hf_;
  std::string json_text_;  // what save() keeps: the file as read
  std::string source_;
  HfRunOptions options_;
  SpecialIds special_;
};

}  // namespace

std::unique_ptr<Tokenizer> load_hf_run_tokenizer(const std::string& path, const HfRunOptions& options) {
  // The run sets its own lengths (data.max_length): the file's truncation and padding would cut or pad behind it.
  auto hf = hf::Tokenizer::load(path, /*truncation_and_padding=*/false);
  // The markers are added as PyLate adds its prefixes (a no-op for a run's own copy, which lists them already).
  if (!options.query.empty())
    hf = hf::add_tokens(std::move(hf), {options.query, options.document}, path, /*truncation_and_padding=*/false);
  std::string json_text = hf->to_json();  // the file as read, truncation and padding included, for save()
  return std::make_unique<HfRunTokenizer>(std::move(hf), std::move(json_text), path, options);
}

}  // namespace spread
