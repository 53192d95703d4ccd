// TextStream against the tokenizer's own decode of the whole sequence: for every split into prompt and sampled
// ids, the prompt's text followed by the streamed pieces must equal decode(all ids). Sentencepiece is the hard
// case (a dropped leading space, byte-fallback characters split over several ids); the window restart is
// crossed by a sequence longer than it.
#include <gtest/gtest.h>
#include "test_paths.h"
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "spread/data/text_stream.h"
#include "spread/data/tokenizer.h"

namespace spread {
namespace {

namespace fs = std::filesystem;

std::string streamed(const Tokenizer& tok, const std::vector<int32_t>& ids, size_t prompt_size) {
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + std::ptrdiff_t(prompt_size));
  std::string text = tok.decode(prompt);
  TextStream stream(tok, prompt);
  for (size_t i = prompt_size; i < ids.size(); ++i) text += stream.push(ids[i]);
  return text + stream.finish();
}

// The first prompt length >= n that ends on a whole character, as the prompt of encoded text does.
size_t whole_characters(const Tokenizer& tok, const std::vector<int32_t>& ids, size_t n) {
  auto ends_mid_character = [&](size_t k) {
    const std::string text = tok.decode(std::vector<int32_t>(ids.begin(), ids.begin() + std::ptrdiff_t(k)));
    return text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0;
  };
  while (n < ids.size() && ends_mid_character(n)) ++n;
  return n;
}

void expect_streams_like_decode(const Tokenizer& tok, const std::string& text) {
  const auto ids = tok.encode(text);
  ASSERT_GT(ids.size(), 70u) << "longer than the stream's window";
  const std::string whole = tok.decode(ids);
  for (size_t n = 0; n < ids.size(); n += 7) {
    const size_t prompt = whole_characters(tok, ids, n);
    EXPECT_EQ(streamed(tok, ids, prompt), whole) << "prompt of " << prompt << " ids";
  }
}

const std::string kText =
    "The quick brown fox jumps over the lazy dog. Ünïcödé and € and 日本語 and 🙂 too; "
    "then   three spaces, a tab\tand a newline\nat the end of a fairly long line of text, long enough.";

}  // namespace

TEST(TextStream, CharTokenizerStreamsExactlyTheDecodedText) {
  const auto tok = make_char_tokenizer(kText);
  expect_streams_like_decode(*tok, kText);
}

TEST(TextStream, SentencePieceWithByteFallbackStreamsExactlyTheDecodedText) {
  std::ifstream in(std::string(SPREAD_TEST_DATA_DIR) + "/tokenizer/corpus.txt", std::ios::binary);
  std::ostringstream corpus;
  corpus << in.rdbuf();
  const auto work = fs::temp_directory_path() / ("spread_test_stream_" + std::to_string(::getpid()));
  fs::create_directories(work);
  const auto tok = build_tokenizer(TokenizerSpec{"bpe", 400, ""}, corpus.str(), work.string());
  fs::remove_all(work);
  // 日本語 and 🙂 are not in the fixture: they decode from byte pieces, a character only once all have arrived.
  expect_streams_like_decode(*tok, kText);
}

}  // namespace spread
