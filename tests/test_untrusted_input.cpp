// Files from outside as hostile input: the defects that a held-out probe found in the readers of model folders,
// tokenizers and outputs, each reproduced at the smallest scale (docs/untrusted_input.md states the limits).
//   D1  JSON nested 100k deep: refused before parsing (128 levels), never a stack overflow
//   D2  a FIFO at any file of a model or BEIR folder: refused, never a hang
//   D3  a tokenizer.json that is a link to /dev/zero, or larger than the limit: refused, never read without end
//   D4  a regex that backtracks without end: stopped at a step limit, with an error
//   D5  a Sequence nested 10k deep: refused by the depth limit, never gigabytes
//   D6  60k added tokens: loaded in linear time
//   D7  bad values that ended in an uncaught exception (abort): UserError, exit 2
//   D9  a FIFO at an --out name: refused, never replaced
//   D10 the sweep of stale temporaries: spread's own of this host only, never a user's file
//   D11 a dimension of 2^64 - 1; D15 a PyLate length past the positions; D12 a key projection of the wrong shape; D14 a size of 0; D16 module paths and
//   shard names outside the folder;
//   D17 a symbolic link at tokenize's --out; D18 a negative epsilon; D19 a folder's text length below 3;
//   D22 invalid UTF-8 in diagnose's texts
//   D8  memory in proportion to a long line: eval --sts reads a 20 MB sentence as far as the model does; tokenize
//   refuses a line it has no memory for; D13 config.json sizes beyond the weights refused before the model is
//   built; D21 a re-export refuses to delete a file the user put into the earlier export; ulimit -v counted as a
//   memory bound
// A command that could hang runs under `timeout`, so that a defect fails its test instead of stalling the suite. The
// tests run the binary (not the library in-process), so that SPREAD_TEST_BINARY=<an older build> shows them fail.
#include <gtest/gtest.h>
#include "test_paths.h"
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.h"
#include "spread/config/recipe.h"
#include "spread/data/safetensors.h"
#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_depth.h"
#include "spread/util/model_folder.h"
#include "user_error_message.h"

namespace fs = std::filesystem;
using spread::testing::CliResult;
using spread::testing::run_spread_env;

namespace {

const std::string kBeir = std::string(SPREAD_TEST_DATA_DIR) + "/beir_tiny";

// `spread ARGS` stopped after 120 s (exit 124): a hang fails the test. Address space is capped at 8 GB (a process
// of LibTorch maps 1-2 GB) so that a reader without a bound fails instead of taking the machine; not under ASan,
// which reserves terabytes of address space for its shadow.
#if defined(__SANITIZE_ADDRESS__)
const char* const kMemoryCap = "";
#else
const char* const kMemoryCap = "ulimit -v 8000000; ";
#endif

CliResult bounded_spread(const std::string& args) {
  return run_spread_env(std::string(kMemoryCap) + "SPREAD_BLAS_AUTO=0 timeout 120", args);
}

void expect_refused(const CliResult& r, const std::string& file, const std::string& what) {
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(file), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(what), std::string::npos) << r.output;
}

using spread::testing::user_error_message;

std::string deep_json(int depth) { return std::string(size_t(depth), '[') + std::string(size_t(depth), ']'); }

// The JSON file `p` with a value nested 100k deep as one more key of its object, or one more entry of its list.
void add_deep_value(const fs::path& p) {
  const auto doc = nlohmann::json::parse(std::ifstream(p));
  const std::string text = doc.dump();
  const std::string deep = deep_json(100000);
  std::ofstream(p, std::ios::trunc) << text.substr(0, text.size() - 1) << (doc.is_object() ? ",\"x\":" : ",") << deep
                                    << text.back();
}

// A safetensors file of header `json` (padded to 8 bytes) and `data`, as the specification lays it out.
std::string safetensors_file(std::string json, const std::string& data) {
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((uint64_t(json.size()) >> (8 * i)) & 0xff);
  return out + json + data;
}

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void make_fifo(const fs::path& p) {
  fs::remove(p);
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0) << p;
}

std::string pairs_recipe(const fs::path& dir, const std::string& name, const std::string& objective) {
  return "[run]\nname = \"" + name + "\"\nout_dir = \"" + dir.string() + "\"\nthreads = 1\n" +
         "[data]\nsource = \"pairs\"\npath = \"" + (dir / "pairs.tsv").string() + "\"\n" +
         "[tokenizer]\nkind = \"char\"\n" +
         "[model]\nn_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 64\nhead_dim = 8\ncausal = false\n" +
         "[train]\nobjective = \"" + objective + "\"\nbatch_size = 4\nmax_steps = 2\neval_every = 0\nckpt_every = 2\n" +
         "[loss.maxsim]\nquery_length = 16\ndocument_length = 64\n";
}

// Two tiny encoder runs (contrastive and maxsim, char tokenizer, one layer), exported once as a sentence-transformers
// folder and a PyLate folder without spread's own records, so that they read as folders from elsewhere (the
// tokenizer from tokenizer.json); each test changes a copy.
class UntrustedInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(spread::testing::fresh_temp_dir("untrusted_runs"));
    std::ofstream pairs(*dir_ / "pairs.tsv");
    pairs << "anchor\tpositive\n";
    const char* words[] = {"cells", "protein", "gene", "virus", "blood", "brain", "drug", "cancer"};
    for (int i = 0; i < 40; ++i)
      pairs << "what does " << words[i % 8] << " " << i << " do\tthe " << words[i % 8] << " number " << i << "\n";
    pairs.close();
    std::ofstream(*dir_ / "texts.txt") << "the cells\nthe brain acts\n";
    for (const auto& [name, objective] : {std::pair{"st", "contrastive"}, std::pair{"pylate", "maxsim"}}) {
      const fs::path recipe = *dir_ / (std::string(name) + ".toml");
      std::ofstream(recipe) << pairs_recipe(*dir_, name, objective);
      auto r = run_spread_env("SPREAD_BLAS_AUTO=0", "train " + recipe.string());
      ASSERT_EQ(r.code, 0) << r.output;
      const fs::path out = *dir_ / (std::string(name) + "_hf");
      r = run_spread_env("", "export --run " + (*dir_ / name).string() + " --out " + out.string());
      ASSERT_EQ(r.code, 0) << r.output;
      for (const char* own : {"spread_tokenizer.json", "spread_export.json", "tokenizer.chars"}) fs::remove(out / own);
    }
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  void SetUp() override {
    out_ = spread::testing::fresh_temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { fs::remove_all(out_); }

  // A copy of the exported folder `name` ("st" or "pylate") in this test's folder.
  fs::path folder(const std::string& name) const {
    const fs::path copy = out_ / name;
    fs::remove_all(copy);
    fs::copy(*dir_ / (name + "_hf"), copy, fs::copy_options::recursive);
    return copy;
  }
  static std::string texts() { return (*dir_ / "texts.txt").string(); }
  std::string encode(const fs::path& model) const {
    return "encode --model " + model.string() + " --in " + texts() + " --out " + (out_ / "e.npy").string();
  }
  static std::string tokenize(const fs::path& tokenizer) {
    return "tokenize --tokenizer " + tokenizer.string() + " --in " + texts();
  }

  static fs::path* dir_;
  fs::path out_;
};

fs::path* UntrustedInput::dir_ = nullptr;

// --- D1: nesting depth --------------------------------------------------------------------------------------------

TEST(JsonDepth, RefusesMoreThan128LevelsAndIgnoresBracketsInStrings) {
  EXPECT_FALSE(spread::json_too_deep(deep_json(spread::kMaxJsonDepth)));
  EXPECT_TRUE(spread::json_too_deep(deep_json(spread::kMaxJsonDepth + 1)));
  EXPECT_TRUE(spread::json_too_deep("{\"a\": " + deep_json(spread::kMaxJsonDepth) + "}"));
  EXPECT_FALSE(spread::json_too_deep("[\"" + std::string(1000, '[') + "\", \"\\\"[[[\"]"));
  const std::string m = user_error_message([] { spread::refuse_deep_json(deep_json(200), "x.json", 3); });
  EXPECT_NE(m.find("x.json:3"), std::string::npos) << m;
  EXPECT_NE(m.find("128"), std::string::npos) << m;
}

TEST_F(UntrustedInput, DeepJsonInAFoldersFilesIsRefusedNamingTheFile) {
  for (const char* file : {"config.json", "tokenizer.json", "modules.json", "1_Pooling/config.json"}) {
    SCOPED_TRACE(file);
    const fs::path f = folder("st");
    add_deep_value(f / file);
    expect_refused(bounded_spread(encode(f)), file, "nested more than 128");
  }
}

// The probe's crash left a half-made run directory behind; refused before the run starts, it leaves none.
TEST_F(UntrustedInput, InitFromAFolderWithDeepJsonLeavesNoRunDirectory) {
  const fs::path f = folder("st");
  add_deep_value(f / "config.json");
  // No tokenizer or model keys: the folder decides them.
  std::ofstream(out_ / "r.toml") << "[run]\nname = \"from_deep\"\nout_dir = \"" << out_.string() << "\"\n"
                                 << "[data]\nsource = \"pairs\"\npath = \"" << (*dir_ / "pairs.tsv").string() << "\"\n"
                                 << "[train]\nobjective = \"contrastive\"\nmax_steps = 1\ninit_from = \""
                                 << f.string() << "\"\n";
  const auto r = bounded_spread("train " + (out_ / "r.toml").string());
  expect_refused(r, "config.json", "nested more than 128");
  EXPECT_FALSE(fs::exists(out_ / "from_deep"));
}

TEST_F(UntrustedInput, DeepJsonInASafetensorsHeaderIsRefused) {
  const fs::path f = folder("st");
  const std::string bytes = file_bytes(f / "model.safetensors");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[size_t(i)])) << (8 * i);
  std::string header = nlohmann::json::parse(bytes.substr(8, n)).dump();
  header = header.substr(0, header.size() - 1) + ",\"x\":" + deep_json(100000) + "}";
  std::ofstream(f / "model.safetensors", std::ios::binary | std::ios::trunc)
      << safetensors_file(header, bytes.substr(8 + n));
  expect_refused(bounded_spread(encode(f)), "model.safetensors", "nested more than 128");
}

// --- D2, D3: what stands at a folder's file -----------------------------------------------------------------------

TEST_F(UntrustedInput, AFifoAtAnyFileOfAModelFolderIsRefusedNotWaitedOn) {
  for (const char* file : {"model.safetensors", "config.json", "modules.json", "1_Pooling/config.json",
                           "sentence_bert_config.json", "tokenizer.json"}) {
    SCOPED_TRACE(file);
    const fs::path f = folder("st");
    ASSERT_TRUE(fs::exists(f / file));
    make_fifo(f / file);
    expect_refused(bounded_spread(encode(f)), file, "FIFO");
  }
}

TEST_F(UntrustedInput, AFifoInABeirFolderIsRefusedNotWaitedOn) {
  const fs::path beir = out_ / "beir";
  fs::copy(kBeir, beir, fs::copy_options::recursive);
  make_fifo(beir / "corpus.jsonl");
  expect_refused(bounded_spread("eval --model " + folder("st").string() + " --beir " + beir.string()),
                 "corpus.jsonl", "FIFO");
}

// Qrels that judge every document irrelevant left no query: the metrics were 0 / 0, printed as NaN with exit 0.
TEST_F(UntrustedInput, QrelsWithoutARelevantDocumentAreRefused) {
  const fs::path beir = out_ / "beir_unjudged";
  fs::copy(kBeir, beir, fs::copy_options::recursive);
  std::string qrels = file_bytes(beir / "qrels" / "test.tsv");
  for (size_t at = qrels.find("\t1\n"); at != std::string::npos; at = qrels.find("\t1\n", at))
    qrels.replace(at, 3, "\t0\n");
  std::ofstream(beir / "qrels" / "test.tsv", std::ios::trunc) << qrels;
  const auto r = bounded_spread("eval --model " + folder("st").string() + " --beir " + beir.string());
  expect_refused(r, "test.tsv", "no query");
  EXPECT_EQ(r.output.find("nan"), std::string::npos) << r.output;
}

// A NUL marks a binary or UTF-16 file; tokenize and diagnose read on past it, as the training corpus does not.
TEST_F(UntrustedInput, ANulByteInTokenizeOrDiagnoseTextIsNamedByLine) {
  const fs::path texts = out_ / "nul.txt";
  std::ofstream(texts, std::ios::binary | std::ios::trunc) << "first line\nsecond" << '\0' << "line\n";
  expect_refused(bounded_spread("tokenize --tokenizer " + (folder("st") / "tokenizer.json").string() + " --in " +
                                texts.string() + " --out " + (out_ / "nul.jsonl").string()),
                 texts.string() + ":2", "a NUL byte at byte offset 6 of the line");
  expect_refused(bounded_spread("diagnose --run " + (*dir_ / "st").string() + " --texts " + texts.string()),
                 texts.string() + ":2", "a NUL byte at byte offset 6 of the line");
}

TEST_F(UntrustedInput, ATokenizerJsonLinkedToDevZeroIsRefused) {
  const fs::path f = folder("st");
  fs::remove(f / "tokenizer.json");
  fs::create_symlink("/dev/zero", f / "tokenizer.json");
  expect_refused(bounded_spread(encode(f)), "tokenizer.json", "a device");
  expect_refused(bounded_spread(tokenize(f / "tokenizer.json")), "tokenizer.json", "a device");
}

// A sparse file: its size is past the limit, its blocks cost nothing.
TEST_F(UntrustedInput, ATokenizerJsonLargerThanTheLimitIsRefusedBeforeItIsRead) {
  const fs::path f = folder("st");
  fs::resize_file(f / "tokenizer.json", uint64_t(300) << 20);
  expect_refused(bounded_spread(tokenize(f / "tokenizer.json")), "tokenizer.json", "more than the 268435456");
}

// --- D4, D5, D6: a tokenizer.json that costs without bound -------------------------------------------------------

// The folder's tokenizer.json with `change` applied.
template <typename Change>
fs::path changed_tokenizer(const fs::path& folder, Change&& change) {
  auto doc = nlohmann::json::parse(std::ifstream(folder / "tokenizer.json"));
  change(doc);
  std::ofstream(folder / "tokenizer.json", std::ios::trunc) << doc.dump();
  return folder / "tokenizer.json";
}

// 2^38 ways to split 38 a's before the b that fails every one of them: the match stops at a step limit.
TEST_F(UntrustedInput, ACatastrophicRegexStopsWithAnError) {
  const std::string text = std::string(38, 'a') + "b";
  std::ofstream(out_ / "aab.txt") << text << "\n";
  const auto split = changed_tokenizer(folder("st"), [](nlohmann::json& d) {
    d["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(a+)+$"}}}, {"behavior", "Isolated"},
                          {"invert", false}};
  });
  expect_refused(bounded_spread("tokenize --tokenizer " + split.string() + " --in " + (out_ / "aab.txt").string()),
                 "(a+)+$", "backtracks");
  const auto replace = changed_tokenizer(folder("st"), [](nlohmann::json& d) {
    d["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "(a+)+$"}}}, {"content", "x"}};
  });
  expect_refused(bounded_spread("tokenize --tokenizer " + replace.string() + " --in " + (out_ / "aab.txt").string()),
                 "(a+)+$", "backtracks");
}

// Each Sequence is two JSON levels: the depth limit bounds the nesting (the probe: 10k deep took 1.7 GB).
TEST_F(UntrustedInput, ANormalizerSequenceNestedTenThousandDeepIsRefused) {
  const fs::path f = folder("st");
  std::string nested = "{\"type\":\"Lowercase\"}";
  for (int i = 0; i < 10000; ++i) nested = "{\"type\":\"Sequence\",\"normalizers\":[" + nested + "]}";
  auto doc = nlohmann::json::parse(std::ifstream(f / "tokenizer.json"));
  doc["normalizer"] = "NESTED";
  std::string text = doc.dump();
  text.replace(text.find("\"NESTED\""), 8, nested);
  std::ofstream(f / "tokenizer.json", std::ios::trunc) << text;
  expect_refused(bounded_spread(tokenize(f / "tokenizer.json")), "tokenizer.json", "nested more than 128");
}

// The probe: 20k added tokens took 9.5 s to load, 200k over a minute (the reference: 0.5 s); quadratic, 60k would
// take some 85 s (not measured). Linear, they take a second or two; 30 s leaves room for a loaded machine.
TEST_F(UntrustedInput, SixtyThousandAddedTokensLoadInSeconds) {
  const auto t = changed_tokenizer(folder("st"), [](nlohmann::json& d) {
    for (int i = 0; i < 60000; ++i)
      d["added_tokens"].push_back({{"content", "tok" + std::to_string(i)}, {"single_word", false}, {"lstrip", false},
                                   {"rstrip", false}, {"normalized", false}, {"special", true}});
  });
  const auto r = run_spread_env("SPREAD_BLAS_AUTO=0 timeout 30", tokenize(t));
  EXPECT_EQ(r.code, 0) << r.output.substr(0, 2000);
}

// --- D7: values that aborted --------------------------------------------------------------------------------------

TEST_F(UntrustedInput, AnStsFileOfOnePairIsAUserError) {
  std::ofstream(out_ / "one.csv") << "the cells act,the brain acts,2.5\n";
  expect_refused(bounded_spread("eval --model " + folder("st").string() + " --sts " + (out_ / "one.csv").string()),
                 "one.csv", "at least 2");
}

TEST_F(UntrustedInput, AVocabJsonIdThatIsNoIntegerIsAUserError) {
  std::ofstream(out_ / "vocab.json") << R"({"a": 0, "b": 1, "ab": 2, "<|endoftext|>": "x"})";
  std::ofstream(out_ / "merges.txt") << "#version: 0.2\na b\n";
  expect_refused(bounded_spread(tokenize(out_ / "vocab.json")), "vocab.json", "not an integer");
}

TEST_F(UntrustedInput, APaddingOfTenBillionTokensIsRefused) {
  const fs::path f = folder("st");
  auto doc = nlohmann::json::parse(std::ifstream(f / "tokenizer.json"));
  doc["padding"] = {{"strategy", {{"Fixed", 1e10}}}, {"direction", "Right"}, {"pad_to_multiple_of", nullptr},
                    {"pad_id", 0}, {"pad_type_id", 0}, {"pad_token", "[PAD]"}};
  std::ofstream(f / "tokenizer.json", std::ios::trunc) << doc.dump();
  expect_refused(bounded_spread(tokenize(f / "tokenizer.json")), "tokenizer.json", "Fixed");
  doc["padding"]["strategy"] = {{"Fixed", int64_t(1) << 40}};
  std::ofstream(f / "tokenizer.json", std::ios::trunc) << doc.dump();
  expect_refused(bounded_spread(tokenize(f / "tokenizer.json")), "tokenizer.json", "Fixed");
}

// Counts the reference reads unsigned (a pad id, a type id, Strip's counts, WordPiece's word limit): a negative one
// was accepted and cast. An id past int64's range was printed as a negative number.
TEST_F(UntrustedInput, NegativeCountsAndHugeIdsInATokenizerAreRefusedAsGiven) {
  const auto pad = changed_tokenizer(folder("st"), [](nlohmann::json& d) {
    d["padding"] = {{"strategy", "BatchLongest"}, {"direction", "Right"}, {"pad_to_multiple_of", nullptr},
                    {"pad_id", -1}, {"pad_type_id", 0}, {"pad_token", "[PAD]"}};
  });
  expect_refused(bounded_spread(tokenize(pad)), "padding.pad_id", "is -1, outside 0 to");
  const auto strip = changed_tokenizer(folder("st"), [](nlohmann::json& d) {
    d["decoder"] = {{"type", "Strip"}, {"content", " "}, {"start", -5}, {"stop", 0}};
  });
  expect_refused(bounded_spread(tokenize(strip)), "decoder.start", "is -5");
  const auto huge = changed_tokenizer(folder("st"), [](nlohmann::json& d) {
    d["model"]["vocab"]["[unused0]"] = uint64_t(INT64_MAX) + 6;  // 2^63 + 5
  });
  expect_refused(bounded_spread(tokenize(huge)), "tokenizer.json", "9223372036854775813");
}

// A word the vocabulary cannot spell, with an unk_token that is no entry of it: the error named the text being
// tokenized; it is the tokenizer's vocabulary that needs the fix, so the error names its file and key.
TEST_F(UntrustedInput, AnUnknownWordWithoutAnUnkEntryNamesTheTokenizer) {
  for (const char* model : {R"("type": "WordPiece", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100)",
                            R"("type": "BPE", "merges": [], "dropout": null)"}) {
    std::ofstream(out_ / "tokenizer.json", std::ios::trunc)
        << R"({"version": "1.0", "added_tokens": [], "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},)"
        << R"( "post_processor": null, "decoder": null, "model": {)" << model
        << R"(, "unk_token": "[UNK]", "vocab": {"a": 0, "b": 1}}})";
    std::ofstream(out_ / "lines.txt", std::ios::trunc) << "a b\na c\n";
    expect_refused(bounded_spread("tokenize --tokenizer " + (out_ / "tokenizer.json").string() + " --in " +
                                  (out_ / "lines.txt").string() + " --out " + (out_ / "ids.jsonl").string()),
                   "tokenizer.json", "model.unk_token");
  }
}

// NaN weights in PyLate's Dense made every vector NaN; ward pooling then threw std::invalid_argument (abort).
TEST_F(UntrustedInput, NonFiniteWeightsInAFolderAreRefusedNamingTheTensor) {
  const fs::path f = folder("pylate");
  const std::string dense = (f / "1_Dense" / "model.safetensors").string();
  auto tensors = spread::read_safetensors(dense);
  ASSERT_EQ(tensors.count("linear.weight"), 1u);
  tensors["linear.weight"][0][0] = std::numeric_limits<float>::quiet_NaN();
  spread::write_safetensors(dense, tensors);
  expect_refused(bounded_spread("eval --model " + f.string() + " --beir " + kBeir + " --pool-factors 1,2"),
                 "1_Dense/model.safetensors", "linear.weight");
}

// --- D11, D16: sizes and names in a folder's files ----------------------------------------------------------------

// 2^64 - 1 read as a signed size is -1; with a 0 beside it, the product passed the byte count (exit 1 from LibTorch).
TEST_F(UntrustedInput, ASafetensorsDimensionOfTwoToThe64IsRefused) {
  const fs::path f = folder("st");
  std::ofstream(f / "model.safetensors", std::ios::binary | std::ios::trunc)
      << safetensors_file(R"({"x":{"dtype":"F32","shape":[0,18446744073709551615],"data_offsets":[0,0]}})", "");
  expect_refused(bounded_spread(encode(f)), "model.safetensors", "not a size");
}

// D12: torch::cat failed with exit 1, naming neither the file nor the tensor.
TEST_F(UntrustedInput, AKeyProjectionOfTheWrongShapeIsNamed) {
  const fs::path f = folder("st");
  const std::string weights = (f / "model.safetensors").string();
  auto tensors = spread::read_safetensors(weights);
  const std::string key = "encoder.layer.0.attention.self.key.weight";
  ASSERT_EQ(tensors.count(key), 1u);
  tensors[key] = torch::zeros({tensors[key].size(0), tensors[key].size(1) + 1});
  spread::write_safetensors(weights, tensors);
  // Named beside config.json, as every shape that disagrees with it (HfTensors' source).
  expect_refused(bounded_spread(encode(f)), key, "has shape");
}

TEST_F(UntrustedInput, ModulePathsAndShardNamesStayInsideTheFolder) {
  fs::path f = folder("st");
  auto modules = nlohmann::json::parse(std::ifstream(f / "modules.json"));
  modules[0]["path"] = "../../other";
  std::ofstream(f / "modules.json", std::ios::trunc) << modules.dump();
  expect_refused(bounded_spread(encode(f)), "modules.json", "outside the folder");

  f = folder("st");
  fs::remove(f / "model.safetensors");
  std::ofstream(f / "model.safetensors.index.json") << R"({"weight_map": {"embeddings.word_embeddings.weight":
                                                          "/etc/passwd"}})";
  const auto r = bounded_spread(encode(f));
  expect_refused(r, "model.safetensors.index.json", "outside the folder");
  EXPECT_EQ(r.output.find("root:"), std::string::npos) << r.output;
}

// D14: a size of 0 failed in LibTorch with exit 1; D18: a negative epsilon gave NaN vectors with exit 0.
TEST_F(UntrustedInput, ZeroSizesAndNonPositiveEpsilonsAreRefused) {
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* problem;
  };
  for (const Case& c : {Case{"hidden_size", 0, "not a size"}, Case{"max_position_embeddings", 0, "not a size"},
                        Case{"layer_norm_eps", -1.0, "not a positive number"}}) {
    SCOPED_TRACE(c.key);
    const fs::path f = folder("st");
    auto config = nlohmann::json::parse(std::ifstream(f / "config.json"));
    ASSERT_TRUE(config.contains(c.key));
    config[c.key] = c.value;
    std::ofstream(f / "config.json", std::ios::trunc) << config.dump();
    expect_refused(bounded_spread(encode(f)), "config.json", c.problem);
  }
}

// Python's json module writes NaN and Infinity and reads 1e999 as infinity; none is JSON. They were reported as
// "is not a JSON object", which sent the user looking for a structural fault.
TEST_F(UntrustedInput, NonJsonNumbersInConfigJsonAreNamedWithTheirPlace) {
  for (const std::string value : {"NaN", "Infinity", "1e999"}) {
    SCOPED_TRACE(value);
    const fs::path f = folder("st");
    std::string config = file_bytes(f / "config.json");
    const auto at = config.find("\"layer_norm_eps\"");
    ASSERT_NE(at, std::string::npos);
    const auto colon = config.find(':', at), end = config.find_first_of(",}", colon);
    config.replace(colon + 1, end - colon - 1, " " + value);
    std::ofstream(f / "config.json", std::ios::trunc) << config;
    const auto r = bounded_spread(encode(f));
    expect_refused(r, "config.json", "is not valid JSON");
    // Where (line and column) for a word that is no JSON; the number itself for one beyond the double range.
    EXPECT_NE(r.output.find(value == "1e999" ? "'1e999'" : "column"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("not a JSON object"), std::string::npos) << r.output;
  }
}

// A JSON error quoted the token it stopped in whole: for an unterminated string, the rest of the file, which through a
// link may be another user's file. A few bytes of it, the line and the column say where.
TEST_F(UntrustedInput, AJsonErrorQuotesAtMostAFewBytesOfTheFile) {
  const fs::path f = folder("st");
  const std::string hidden = "SECRET" + std::string(200, 's') + "TAIL";
  std::ofstream(out_ / "elsewhere.json") << "{\"model_type\": \"" << hidden << "\n";
  fs::remove(f / "config.json");
  fs::create_symlink(out_ / "elsewhere.json", f / "config.json");
  const auto r = bounded_spread(encode(f));
  expect_refused(r, "config.json", "is not valid JSON");
  EXPECT_NE(r.output.find("column"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("SECRET"), std::string::npos) << r.output;  // where it stopped
  EXPECT_EQ(r.output.find("TAIL"), std::string::npos) << r.output;
  EXPECT_LT(r.output.size(), 600u) << r.output;
}

// A number where an activation's name belongs picked the default activation without a word.
TEST_F(UntrustedInput, AWrongTypedStringKeyIsRefusedNotDefaulted) {
  const fs::path f = folder("st");
  auto config = nlohmann::json::parse(std::ifstream(f / "config.json"));
  config["hidden_act"] = 5;
  std::ofstream(f / "config.json", std::ios::trunc) << config.dump();
  expect_refused(bounded_spread(encode(f)), "config.json", "hidden_act");
}

// Integer and boolean tensors where weights belong were cast to float silently.
TEST_F(UntrustedInput, IntegerWeightsAreRefusedNamingTheTensor) {
  const fs::path f = folder("st");
  const std::string weights = (f / "model.safetensors").string();
  auto tensors = spread::read_safetensors(weights);
  const std::string key = "encoder.layer.0.attention.self.query.weight";
  ASSERT_EQ(tensors.count(key), 1u);
  tensors[key] = tensors[key].to(torch::kLong);
  spread::write_safetensors(weights, tensors);
  expect_refused(bounded_spread(encode(f)), key, "not of floating-point weights");
}

// The safetensors library refuses anything but spaces after the header's JSON; a NUL was read as its end.
TEST_F(UntrustedInput, ANulInASafetensorsHeaderIsRefused) {
  const fs::path f = folder("st");
  std::ofstream(f / "model.safetensors", std::ios::binary | std::ios::trunc)
      << safetensors_file(std::string(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})") + '\0' + "  ",
                          std::string(4, '\0'));
  expect_refused(bounded_spread(encode(f)), "model.safetensors", "NUL");
}

// generate --model on an encoder folder named a recipe.toml the folder does not have.
TEST_F(UntrustedInput, GenerateFromAnEncoderFolderNamesItsConfig) {
  const fs::path f = folder("st");
  const auto r = bounded_spread("generate --model " + f.string() + " --max-new-tokens 2");
  expect_refused(r, (f / "config.json").string(), "encoder");
  EXPECT_EQ(r.output.find("recipe.toml"), std::string::npos) << r.output;
}

// D19: a length of 1 or 2 keeps only [CLS] and [SEP], so that every text got the same vector, with exit 0.
TEST_F(UntrustedInput, AFoldersTextLengthBelowThreeIsRefused) {
  const fs::path st = folder("st");
  auto sbert = nlohmann::json::parse(std::ifstream(st / "sentence_bert_config.json"));
  sbert["max_seq_length"] = 2;
  std::ofstream(st / "sentence_bert_config.json", std::ios::trunc) << sbert.dump();
  expect_refused(bounded_spread(encode(st)), "sentence_bert_config.json", "at least 3");
  const fs::path pylate = folder("pylate");
  auto colbert = nlohmann::json::parse(std::ifstream(pylate / "config_sentence_transformers.json"));
  colbert["document_length"] = 1;
  std::ofstream(pylate / "config_sentence_transformers.json", std::ios::trunc) << colbert.dump();
  expect_refused(bounded_spread("eval --model " + pylate.string() + " --beir " + kBeir), "document_length",
                 "at least 3");
}

// D15: a PyLate length past the model's positions failed mid-run with exit 1 (train refused it).
TEST_F(UntrustedInput, APyLateLengthPastThePositionsIsRefused) {
  const fs::path pylate = folder("pylate");
  auto colbert = nlohmann::json::parse(std::ifstream(pylate / "config_sentence_transformers.json"));
  colbert["document_length"] = 100000;
  std::ofstream(pylate / "config_sentence_transformers.json", std::ios::trunc) << colbert.dump();
  expect_refused(bounded_spread("eval --model " + pylate.string() + " --beir " + kBeir), "document_length",
                 "positions");
}

// D22: the tokenizer refused the line without naming the file or the line.
TEST_F(UntrustedInput, DiagnoseNamesTheLineOfInvalidUtf8) {
  std::ofstream(out_ / "bad.txt") << "the cells\nthe \xff brain\nthe gene\n";
  expect_refused(bounded_spread("diagnose --run " + (*dir_ / "st").string() + " --texts " +
                                (out_ / "bad.txt").string()),
                 (out_ / "bad.txt").string() + ":2", "UTF-8");
}

// --- D9, D10, D17: outputs ----------------------------------------------------------------------------------------

TEST_F(UntrustedInput, AFifoAtAnOutputNameIsRefusedAndKept) {
  const fs::path fifo = out_ / "e.npy";
  make_fifo(fifo);
  expect_refused(bounded_spread(encode(folder("st"))), "e.npy", "FIFO");
  EXPECT_TRUE(fs::is_fifo(fifo));
  expect_refused(bounded_spread(tokenize(folder("st") / "tokenizer.json") + " --out " + fifo.string()), "e.npy",
                 "FIFO");
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST_F(UntrustedInput, TokenizeRefusesASymbolicLinkAtItsOutput) {
  std::ofstream(out_ / "victim.txt") << "keep";
  fs::create_symlink(out_ / "victim.txt", out_ / "t.jsonl");
  expect_refused(bounded_spread(tokenize(folder("st") / "tokenizer.json") + " --out " + (out_ / "t.jsonl").string()),
                 "t.jsonl", "symbolic link");
  EXPECT_TRUE(fs::is_symlink(out_ / "t.jsonl"));
  EXPECT_EQ(file_bytes(out_ / "victim.txt"), "keep");
}

// A pid that no process has: a child's, after it has exited and been reaped.
pid_t dead_pid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

// `encode --out` sweeps its folder before writing.
TEST_F(UntrustedInput, TheSweepRemovesOnlySpreadsTemporariesOfThisHost) {
  const std::string dead = std::to_string(dead_pid());
  // Ours: the temporary name of a process of this host that has ended.
  std::string ours = spread::temporary_name(out_ / "a.npy").filename().string();
  ours = ours.substr(0, ours.rfind('-') + 1) + dead;
  // A user's file and folder that only look like temporaries, and one of a dead process on another host.
  const std::string users_file = ".notes.tmp-" + dead, users_folder = ".photos.tmp-" + dead;
  const std::string other_host = ".a.npy.spread-tmp-otherhost-" + dead;
  for (const auto& name : {ours, users_file, other_host}) std::ofstream(out_ / name) << "x";
  fs::create_directories(out_ / users_folder / "inner");
  std::ofstream(out_ / users_folder / "inner" / "keep.jpg") << "x";
  const auto r = bounded_spread(encode(*dir_ / "st_hf"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(fs::exists(out_ / ours));
  EXPECT_TRUE(fs::exists(out_ / users_file));
  EXPECT_TRUE(fs::exists(out_ / users_folder / "inner" / "keep.jpg"));
  EXPECT_TRUE(fs::exists(out_ / other_host));
  EXPECT_EQ(spread::stale_temporary_of(ours), std::optional<std::string>("a.npy"));
}

// The probe: a tokenize killed while writing left NAME.tmpPID, which no sweep removed. Its temporary is named as
// every writer's now, so the next command writing to that folder removes it (here: the next tokenize).
TEST_F(UntrustedInput, TheTemporaryOfAKilledTokenizeIsRemovedByTheNextOne) {
  std::string left = spread::temporary_name(out_ / "ids.jsonl").filename().string();
  left = left.substr(0, left.rfind('-') + 1) + std::to_string(dead_pid());
  std::ofstream(out_ / left) << "[1, 2";  // cut off mid-line, as a kill leaves it
  const auto r =
      bounded_spread(tokenize(*dir_ / "st_hf" / "tokenizer.json") + " --out " + (out_ / "ids.jsonl").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(out_ / "ids.jsonl"));
  EXPECT_FALSE(fs::exists(out_ / left));
}

// --- D8, D13, D21 ----------------------------------------------------------------------------------------------------

// The whole of each STS sentence was tokenized to check it: a 20 MB sentence peaked at 5.3 GB (now it is read as far
// as the model reads it). Under a 4 GB address space, that was a crash.
TEST_F(UntrustedInput, AnStsSentenceOfTwentyMegabytesIsReadAsFarAsTheModelReads) {
  {
    std::ofstream sts(out_ / "long.csv");
    sts << "sentence1,sentence2,score\n";
    for (int i = 0; i < 2000000; ++i) sts << "the cells ";
    sts << ",the brain acts,2.5\nthe cells act,the brain,1.0\nthe brain,the cells act,4.0\n";
  }
  const auto r = run_spread_env(std::string(kMemoryCap).empty() ? "" : "ulimit -v 4000000; OMP_NUM_THREADS=1",
                                "eval --model " + folder("st").string() + " --sts " + (out_ / "long.csv").string());
  EXPECT_EQ(r.code, 0) << r.output.substr(0, 2000);
  EXPECT_NE(r.output.find("STS Spearman"), std::string::npos) << r.output.substr(0, 2000);
}

// A line that needs more memory than there is (here: under ulimit -v) is refused by file and line before any of
// it is tokenized, instead of failing half-way with exit 1.
TEST_F(UntrustedInput, TokenizeRefusesALineItHasNoMemoryFor) {
  if (std::string(kMemoryCap).empty()) GTEST_SKIP() << "ASan reserves terabytes of address space: no ulimit -v";
  {
    std::ofstream text(out_ / "long.txt");
    text << "short line\n";
    for (int i = 0; i < 3000000; ++i) text << "the cells ";
    text << "\n";
  }
  const auto r = run_spread_env("ulimit -v 3000000; OMP_NUM_THREADS=1",
                                tokenize(folder("st") / "tokenizer.json") + " --in " + (out_ / "long.txt").string() +
                                    " --out " + (out_ / "t.jsonl").string());
  expect_refused(r, "long.txt:2", "ulimit -v");
  EXPECT_FALSE(fs::exists(out_ / "t.jsonl"));
}

// config.json's sizes went to the allocator before the weights were compared with them: 1e9 positions were a
// 64 GB table (exit 1, or the machine's memory).
TEST_F(UntrustedInput, ConfigSizesBeyondTheWeightsAreRefusedBeforeTheModelIsBuilt) {
  for (const char* key : {"max_position_embeddings", "vocab_size", "intermediate_size"}) {
    const fs::path f = folder("st");
    auto config = nlohmann::json::parse(std::ifstream(f / "config.json"));
    config[key] = 1000000000;
    std::ofstream(f / "config.json", std::ios::trunc) << config.dump();
    const auto r = bounded_spread(encode(f));
    expect_refused(r, "config.json", "does not belong to the weights");
  }
}

// An export into the folder of an earlier one replaced the whole folder, deleting what the user had put there.
TEST_F(UntrustedInput, AReExportRefusesToDeleteAUsersFileAndKeepsTheEarlierExport) {
  const std::string run = (*dir_ / "st").string(), out = (out_ / "hf").string();
  auto r = bounded_spread("export --run " + run + " --out " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  r = bounded_spread("export --run " + run + " --out " + out);  // its own files only: replaced
  ASSERT_EQ(r.code, 0) << r.output;
  std::ofstream(out_ / "hf" / "NOTES.md") << "my notes";
  const std::string weights = file_bytes(out_ / "hf" / "model.safetensors");
  expect_refused(bounded_spread("export --run " + run + " --out " + out), "NOTES.md", "no spread export wrote");
  EXPECT_EQ(file_bytes(out_ / "hf" / "NOTES.md"), "my notes");
  EXPECT_EQ(file_bytes(out_ / "hf" / "model.safetensors"), weights);
}

// --- two of the probe's smaller items -------------------------------------------------------------------------------

// tokenize --out naming its own --in replaced the input with the output (encode the same with its text file).
TEST_F(UntrustedInput, AnOutputThatIsTheInputIsRefusedAndTheInputKept) {
  std::ofstream(out_ / "in.txt") << "the cells\n";
  fs::create_symlink(out_ / "in.txt", out_ / "alias.txt");
  for (const std::string& out : {(out_ / "in.txt").string(), (out_ / "alias.txt").string()}) {
    expect_refused(bounded_spread(tokenize(folder("st") / "tokenizer.json") + " --in " + (out_ / "in.txt").string() +
                                  " --out " + out),
                   "--out", "is the input file");
    EXPECT_EQ(file_bytes(out_ / "in.txt"), "the cells\n");
  }
  expect_refused(bounded_spread("encode --model " + folder("st").string() + " --in " + (out_ / "in.txt").string() +
                                " --out " + (out_ / "in.txt").string()),
                 "--out", "is the input file");
  EXPECT_EQ(file_bytes(out_ / "in.txt"), "the cells\n");
}

// An error that quotes what a hostile file holds (here a recipe key of 60 KB) printed all of it on one line.
TEST_F(UntrustedInput, AnErrorLineIsAtMostTwoKilobytes) {
  std::ofstream(out_ / "r.toml") << "[train]\n" << std::string(60000, 'k') << " = 1\n";
  const auto r = bounded_spread("train " + (out_ / "r.toml").string());
  EXPECT_EQ(r.code, 2) << r.output.substr(0, 500);
  EXPECT_NE(r.output.find("r.toml"), std::string::npos) << r.output.substr(0, 500);
  EXPECT_NE(r.output.find("bytes left out"), std::string::npos) << r.output.substr(0, 500);
  EXPECT_LT(r.output.size(), 2200u);
}

}  // namespace

// Found by fuzzing recipe_set: `--set train.init_from=` a name of 300 bytes (past NAME_MAX) made the question "is
// this a model folder?" throw std::filesystem's error (status: File name too long) instead of answering no.
TEST(UntrustedInputPaths, ANamePastTheSystemsLimitIsNoModelFolder) {
  const std::string too_long = (fs::temp_directory_path() / std::string(300, 'a')).string();
  EXPECT_NO_THROW({
    EXPECT_FALSE(spread::is_model_folder(too_long));
    EXPECT_FALSE(spread::is_foreign_model_folder(too_long));
    EXPECT_FALSE(spread::is_hf_model_dir(too_long));
  });
}

// The same found at a second place: a ${data_root} path whose name is past the limit threw std::filesystem's error
// while the recipe was checked; it is the key's UserError now.
TEST(UntrustedInputPaths, ADataRootPathPastTheSystemsLimitIsTheKeysError) {
  const std::string too_long = "data.path=${data_root}/" + std::string(300, 'a');
  try {
    spread::parse_recipe("", "r.toml", {"data.root=/tmp", too_long});
    ADD_FAILURE() << "accepted";
  } catch (const spread::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("data.path"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot be looked at"), std::string::npos) << e.what();
  }
}
