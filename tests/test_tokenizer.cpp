// Tokenizers: char vocabulary order and errors against hand-worked cases; sentencepiece bpe/unigram round trips,
// byte fallback against the UTF-8 bytes written by hand, save/load, errors, and LibTorch still working once the
// sentencepiece shim (with its own protobuf) is loaded.
#include <gtest/gtest.h>
#include "test_paths.h"
#include <torch/torch.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "spread/data/tokenizer.h"
#include "spread/util/error.h"
#include "shared_data.h"
#include "user_error_message.h"

namespace spread {
namespace {
namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string fixture_text() { return read_text(std::string(SPREAD_TEST_DATA_DIR) + "/tokenizer/corpus.txt"); }

// This process's scratch folder, removed when the process exits.
const fs::path& temp_root() {
  struct Root {
    fs::path path = fs::temp_directory_path() / ("spread_test_tokenizer_" + std::to_string(::getpid()));
    ~Root() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  };
  static const Root root;
  return root.path;
}

// A fresh empty directory under temp_root().
std::string temp_dir(const std::string& name) {
  const fs::path dir = temp_root() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

using spread::testing::user_error_message;

// --- UTF-8 -----------------------------------------------------------------------------------------------------

TEST(Utf8, FirstInvalidOffsetMatchesHandWorkedCases) {
  const std::vector<std::pair<std::string, int64_t>> cases = {
      {"plain ascii", -1},
      {"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x99\x82", -1},  // é, €, 🙂
      {"ab\xC3(", 2},                                      // continuation byte missing
      {"x\xC0\xAF", 1},                                    // overlong '/'
      {"xy\xE0\x80\xAF", 2},                               // overlong 3-byte
      {"\xED\xA0\x80", 0},                                 // UTF-16 surrogate U+D800
      {"ok\xF4\x90\x80\x80", 2},                           // U+110000, above the Unicode range
      {"end\xE2\x82", 3},                                  // truncated at the end
      {"\x80", 0},                                         // lone continuation byte
      {"\xFF", 0},
  };
  for (const auto& [text, offset] : cases) EXPECT_EQ(first_invalid_utf8(text), offset) << text;
}

TEST(Utf8, CodePointsOfMultiByteText) {
  const std::vector<char32_t> expected = {U'a', 0xE9, 0x20AC, 0x1F642};
  EXPECT_EQ(utf8_code_points("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x99\x82", "t"), expected);
}

// --- char ------------------------------------------------------------------------------------------------------

TEST(CharTokenizer, VocabularyIsSortedCodePoints) {
  // sorted(set("bca\u00e9a\n")) = ['\n', 'a', 'b', 'c', 'é'] -> ids 0..4 in that order.
  const auto tok = make_char_tokenizer("bca\xC3\xA9" "a\n");
  EXPECT_EQ(tok->vocab_size(), 5);
  EXPECT_EQ(tok->kind(), "char");
  EXPECT_EQ(tok->encode("abc\n\xC3\xA9"), (std::vector<int32_t>{1, 2, 3, 0, 4}));
  EXPECT_EQ(tok->decode({4, 0, 1}), "\xC3\xA9\na");
}

TEST(CharTokenizer, RoundTripsAsciiAndMultiByteText) {
  const std::string ascii = "Hello, world!\nSecond line\twith a tab.";
  const std::string multi = "na\xC3\xAFve caf\xC3\xA9 \xE2\x80\x94 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x99\x82";
  for (const std::string& text : {ascii, multi}) {
    const auto tok = make_char_tokenizer(text);
    const auto ids = tok->encode(text);
    EXPECT_EQ(ids.size(), utf8_code_points(text, "t").size());  // one id per character, not per byte
    EXPECT_EQ(tok->decode(ids), text);
  }
}

TEST(CharTokenizer, TinyShakespeareGivesNanoGptVocabulary) {
  SHARED_DATA_OR_SKIP(path, "tinyshakespeare/input.txt");
  // nanoGPT's data/shakespeare_char/prepare.py prints this as ''.join(sorted(set(data))).
  const std::string nanogpt = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  const auto tok = make_char_tokenizer(read_text(path));
  ASSERT_EQ(tok->vocab_size(), 65);
  std::vector<int32_t> all(65);
  for (int32_t i = 0; i < 65; ++i) all[i] = i;
  EXPECT_EQ(tok->decode(all), nanogpt);
}

TEST(CharTokenizer, UnknownCharacterNamesItAndTheTrainingData) {
  const auto tok = make_char_tokenizer("abc");
  const std::string message = user_error_message([&] { tok->encode("abz"); });
  EXPECT_NE(message.find("'z' (U+007A)"), std::string::npos) << message;
  EXPECT_NE(message.find("byte offset 2"), std::string::npos) << message;
  EXPECT_NE(message.find("training data"), std::string::npos) << message;
}

TEST(CharTokenizer, InvalidUtf8NamesTheByteOffset) {
  const std::string in_training = user_error_message([] { make_char_tokenizer("abc\xC3("); });
  EXPECT_NE(in_training.find("invalid UTF-8 at byte offset 3"), std::string::npos) << in_training;
  const auto tok = make_char_tokenizer("abc");
  const std::string in_encode = user_error_message([&] { tok->encode("a\xFF"); });
  EXPECT_NE(in_encode.find("byte offset 1"), std::string::npos) << in_encode;
}

TEST(CharTokenizer, RejectsEmptyTrainingTextAndOutOfRangeIds) {
  EXPECT_THROW(make_char_tokenizer(""), UserError);
  const auto tok = make_char_tokenizer("ab");
  EXPECT_THROW(tok->decode({2}), UserError);
  EXPECT_THROW(tok->decode({-1}), UserError);
}

TEST(CharTokenizer, SaveAndLoadGiveTheSameIds) {
  const std::string text = "line one\nzwei \xC3\xBC \xF0\x9F\x99\x82\n";
  const auto tok = build_tokenizer(TokenizerSpec{"char", 0, ""}, text, temp_dir("char_work"));
  const std::string run_dir = temp_dir("char_run");
  tok->save(run_dir);
  EXPECT_TRUE(fs::exists(fs::path(run_dir) / "tokenizer.chars"));
  const auto loaded = load_tokenizer(run_dir);
  EXPECT_EQ(loaded->kind(), "char");
  EXPECT_EQ(loaded->vocab_size(), tok->vocab_size());
  EXPECT_EQ(loaded->encode(text), tok->encode(text));
}

TEST(CharTokenizer, CorruptCharsFileIsAUserError) {
  const std::string run_dir = temp_dir("char_corrupt");
  std::ofstream(fs::path(run_dir) / "tokenizer.chars") << R"({"kind": "char", "code_points": [98, 97]})";
  const std::string message = user_error_message([&] { load_tokenizer(run_dir); });
  EXPECT_NE(message.find("increasing"), std::string::npos) << message;
  std::ofstream(fs::path(run_dir) / "tokenizer.chars") << "not json";
  EXPECT_THROW(load_tokenizer(run_dir), UserError);
}

// --- sentencepiece ---------------------------------------------------------------------------------------------

constexpr int64_t kVocab = 400;  // 3 special + 256 byte pieces + the fixture's characters + learned pieces

// One trained model per kind, shared by the tests of that kind (training is the slow part).
const Tokenizer& trained(const std::string& kind) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[kind];
  if (!slot) slot = build_tokenizer(TokenizerSpec{kind, kVocab, ""}, fixture_text(), temp_dir("work_" + kind));
  return *slot;
}

class SentencePiece : public ::testing::TestWithParam<std::string> {};

TEST_P(SentencePiece, HasTheRequestedKindAndVocabularySize) {
  EXPECT_EQ(trained(GetParam()).kind(), GetParam());
  EXPECT_EQ(trained(GetParam()).vocab_size(), kVocab);
  EXPECT_EQ(trained(GetParam()).bos_id(), 1);
  EXPECT_EQ(trained(GetParam()).eos_id(), 2);
}

TEST_P(SentencePiece, RoundTripsTextIncludingUnseenCharacters) {
  const Tokenizer& tok = trained(GetParam());
  const std::vector<std::string> texts = {
      "",
      "The river ran low that summer.",
      fixture_text(),
      "  leading spaces, double  spaces, trailing space \n\n\nblank lines\r\nand CRLF",
      "tabs\tand UPPER case QXZJ 0123456789 {}[]<>|~^`@#%*+=_",
      "unseen: \xCE\xA9\xCE\xBC\xCE\xAD\xCE\xB3\xCE\xB1 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x99\x82",
  };
  for (const auto& text : texts) EXPECT_EQ(tok.decode(tok.encode(text)), text) << text;
}

TEST_P(SentencePiece, UnseenCharactersBecomeTheirUtf8Bytes) {
  // Byte pieces follow <unk>, <s>, </s>: byte b has id 3 + b. "日" is E6 97 A5, "🙂" is F0 9F 99 82.
  const Tokenizer& tok = trained(GetParam());
  EXPECT_EQ(tok.encode("\xE6\x97\xA5"), (std::vector<int32_t>{3 + 0xE6, 3 + 0x97, 3 + 0xA5}));
  EXPECT_EQ(tok.encode("\xF0\x9F\x99\x82"), (std::vector<int32_t>{3 + 0xF0, 3 + 0x9F, 3 + 0x99, 3 + 0x82}));
}

TEST_P(SentencePiece, LongTextEncodesAsItsLinesDo) {
  // encode() hands sentencepiece newline-cut pieces (2 KiB each, spread over threads beyond 256 KiB); the ids
  // must equal those of encoding every line on its own. 600 KB makes at least two threads' worth.
  const Tokenizer& tok = trained(GetParam());
  std::string text;
  while (text.size() < 600000) text += fixture_text() + "\xCE\xA9 no newline at the end of this copy ";
  std::map<std::string, std::vector<int32_t>> line_ids;  // the text repeats, so encode each line once
  std::vector<int32_t> by_line;
  for (size_t begin = 0; begin < text.size();) {
    const size_t end = std::min(text.find('\n', begin), text.size() - 1) + 1;
    const std::string line = text.substr(begin, end - begin);
    if (!line_ids.count(line)) line_ids[line] = tok.encode(line);
    by_line.insert(by_line.end(), line_ids[line].begin(), line_ids[line].end());
    begin = end;
  }
  EXPECT_EQ(tok.encode(text), by_line);
}

TEST_P(SentencePiece, ModelWithDummyPrefixIsNotCutAtNewlines) {
  // A model from elsewhere may add a dummy "▁" at the start of every encode call; cutting the text would then
  // add one per piece and the round trip would gain spaces. Patch our model's normalizer spec
  // (name "identity", charsmap "", add_dummy_prefix = field 3) from false to true and check the round trip.
  const std::string run_dir = temp_dir("dummy_" + GetParam());
  trained(GetParam()).save(run_dir);
  std::string model = read_text(run_dir + "/tokenizer.model");
  const std::string spec_false = std::string("identity\x12\x00\x18\x00", 12);
  const size_t at = model.find(spec_false);
  ASSERT_NE(at, std::string::npos);
  model[at + 11] = '\x01';
  std::ofstream(run_dir + "/dummy.model", std::ios::binary) << model;
  const auto tok = load_sentencepiece(run_dir + "/dummy.model");
  std::string text;
  while (text.size() < 10000) text += fixture_text();
  EXPECT_EQ(tok->decode(tok->encode(text)), text);
  EXPECT_NE(tok->encode("The"), trained(GetParam()).encode("The"));  // the patch did take effect
}

TEST_P(SentencePiece, SaveAndLoadGiveTheSameIds) {
  const Tokenizer& tok = trained(GetParam());
  const std::string run_dir = temp_dir("save_" + GetParam());
  tok.save(run_dir);
  EXPECT_TRUE(fs::exists(fs::path(run_dir) / "tokenizer.model"));
  const auto loaded = load_tokenizer(run_dir);
  EXPECT_EQ(loaded->kind(), GetParam());
  EXPECT_EQ(loaded->vocab_size(), kVocab);
  const std::string text = fixture_text() + " \xF0\x9F\x99\x82";
  EXPECT_EQ(loaded->encode(text), tok.encode(text));
  // The model alone (no tokenizer.json) loads too, and its kind comes from the model file.
  fs::remove(fs::path(run_dir) / "tokenizer.json");
  EXPECT_EQ(load_tokenizer(run_dir)->kind(), GetParam());
}

TEST_P(SentencePiece, TrainingTwiceGivesTheSameModelAndLeavesNoFiles) {
  // Same work dir both times: the model file records the training paths along with the pieces and scores.
  const std::string work = temp_dir("det_" + GetParam()), a = temp_dir("det_a"), b = temp_dir("det_b");
  build_tokenizer(TokenizerSpec{GetParam(), kVocab, ""}, fixture_text(), work)->save(a);
  EXPECT_TRUE(fs::is_empty(work));  // the training copy of the text and sentencepiece's files are gone
  build_tokenizer(TokenizerSpec{GetParam(), kVocab, ""}, fixture_text(), work)->save(b);
  const std::string model_a = read_text(a + "/tokenizer.model");
  EXPECT_GT(model_a.size(), 3000u);
  EXPECT_TRUE(model_a == read_text(b + "/tokenizer.model"));
}

TEST_P(SentencePiece, ImpossibleVocabularySizesAreUserErrors) {
  const std::string work = temp_dir("bad_vocab_" + GetParam());
  // Too small to hold the special and byte pieces plus the fixture's characters.
  EXPECT_THROW(build_tokenizer(TokenizerSpec{GetParam(), 100, ""}, fixture_text(), work), UserError);
  // More pieces than a 4 KB text can supply.
  const std::string message =
      user_error_message([&] { build_tokenizer(TokenizerSpec{GetParam(), 50000, ""}, fixture_text(), work); });
  EXPECT_NE(message.find("tokenizer.vocab_size"), std::string::npos) << message;
}

TEST_P(SentencePiece, GivenModelFileIsUsedAndItsKindChecked) {
  const std::string run_dir = temp_dir("given_" + GetParam());
  trained(GetParam()).save(run_dir);
  const std::string model = run_dir + "/tokenizer.model";
  const auto tok = build_tokenizer(TokenizerSpec{GetParam(), 12345, model}, "", temp_dir("given_work"));
  EXPECT_EQ(tok->vocab_size(), kVocab);  // the model decides the size
  const std::string other = GetParam() == "bpe" ? "unigram" : "bpe";
  EXPECT_THROW(build_tokenizer(TokenizerSpec{other, kVocab, model}, "", temp_dir("given_work")), UserError);
  EXPECT_THROW(build_tokenizer(TokenizerSpec{"char", kVocab, model}, "", temp_dir("given_work")), UserError);
}

TEST_P(SentencePiece, DecodeRejectsOutOfRangeIds) {
  EXPECT_THROW(trained(GetParam()).decode({5, kVocab}), UserError);
  EXPECT_THROW(trained(GetParam()).decode({-3}), UserError);
}

INSTANTIATE_TEST_SUITE_P(Kinds, SentencePiece, ::testing::Values("bpe", "unigram"));

TEST(SentencePieceErrors, MissingOrGarbageModelIsAUserError) {
  const std::string dir = temp_dir("garbage");
  EXPECT_THROW(load_sentencepiece(dir + "/missing.model"), UserError);
  std::ofstream(dir + "/garbage.model") << "this is not a protobuf\n\x01\x02\xFF";
  EXPECT_THROW(load_sentencepiece(dir + "/garbage.model"), UserError);
  // Valid protobuf wire format, but not a model: field 1 (pieces) holding nothing usable.
  std::ofstream(dir + "/empty.model", std::ios::binary) << std::string("\x0A\x00", 2);
  EXPECT_THROW(load_sentencepiece(dir + "/empty.model"), UserError);
  EXPECT_THROW(load_tokenizer(temp_dir("empty_run")), UserError);
}

TEST(SentencePieceErrors, UnknownKindIsAUserError) {
  const std::string message =
      user_error_message([] { build_tokenizer(TokenizerSpec{"wordpiece", 100, ""}, "abc", temp_dir("kind")); });
  EXPECT_NE(message.find("tokenizer.kind"), std::string::npos) << message;
}

TEST(SentencePieceShim, TorchStillComputesAfterTheShimIsLoaded) {
  // The shim carries sentencepiece's protobuf 3.14; LibTorch uses the system's 3.21. If the two met, the process
  // would have crashed by now. Run some real tensor code, forward and backward, against hand-computed values.
  ASSERT_EQ(trained("bpe").vocab_size(), kVocab);
  EXPECT_NE(sentencepiece_shim_path().find("libspread_sp_shim.so"), std::string::npos);
  const auto x = torch::tensor({1.0, 2.0, 3.0}, torch::requires_grad());
  const auto y = (x * x).sum();  // 14; dy/dx = 2x
  y.backward();
  EXPECT_DOUBLE_EQ(y.item<double>(), 14.0);
  EXPECT_TRUE(torch::allclose(x.grad(), torch::tensor({2.0, 4.0, 6.0})));
  const auto m = torch::matmul(torch::ones({2, 3}), torch::arange(3, torch::kFloat).reshape({3, 1}));
  EXPECT_TRUE(torch::equal(m, torch::full({2, 1}, 3.0f)));
}

TEST(SentencePieceShim, MissingShimExplainsHowToBuildIt) {
  const char* previous = std::getenv("SPREAD_SP_SHIM");
  const std::string saved = previous ? previous : "";
  ::setenv("SPREAD_SP_SHIM", "/nonexistent/libspread_sp_shim.so", 1);
  const std::string message = user_error_message([] { find_sentencepiece_shim(); });
  previous ? ::setenv("SPREAD_SP_SHIM", saved.c_str(), 1) : ::unsetenv("SPREAD_SP_SHIM");
  EXPECT_NE(message.find("/nonexistent/libspread_sp_shim.so"), std::string::npos) << message;
  EXPECT_NE(message.find("--target spread_sp_shim"), std::string::npos) << message;
}

TEST(SentencePieceShimDeathTest, UnloadableShimReportsTheLoaderError) {
  // A fresh process (the threadsafe style re-runs this binary) so that no shim is loaded yet; the "shim" is a
  // text file, so dlmopen fails and its dlerror() text must reach the message.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string not_a_library = std::string(SPREAD_TEST_DATA_DIR) + "/tokenizer/corpus.txt";
  EXPECT_EXIT(
      {
        ::setenv("SPREAD_SP_SHIM", not_a_library.c_str(), 1);
        std::cerr << user_error_message([] { sentencepiece_shim_path(); });
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "cannot load the sentencepiece shim: .*corpus.txt");
}

}  // namespace
}  // namespace spread
