// Token shards from text (data/shard_writer.h, `spread tokenize --shards`):
//   the shards read back equal each document's ids from the plain tokenizer, line by line, then the end of text,
//   across shard boundaries, on several threads, from several inputs, a glob and a JSONL column;
//   the ids of GPT-2's and BERT's tokenizers against the reference library (`tokenizers`, through
//   tests/oracles/hf_tokenize_ref.py; skipped, saying why, without the Python environment or the shared tokenizers);
//   the header: uint16 or uint32 from the vocabulary, and the byte count that TokenFile reads back, split across
//   shards as worked out by hand;
//   each bad input refused by FILE:LINE or the option (exit 2 from the command), and a failure leaving no shard.
#include <gtest/gtest.h>
#include "test_paths.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.h"
#include "python_env.h"
#include "shared_data.h"
#include "spread/data/hf/tokenizer.h"
#include "spread/data/shard_writer.h"
#include "spread/data/token_file.h"
#include "user_error_message.h"

namespace fs = std::filesystem;
using nlohmann::json;
using spread::testing::user_error_message;

namespace {

const std::string kRepo = std::string(SPREAD_TEST_DATA_DIR) + "/../..";

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("spread_shard_writer_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write_all(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The text's lines split at "\n" only, a final "\n" ending the last one (the shard writer's rule, and the
// reference script's).
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  size_t begin = 0;
  for (size_t end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1)
    lines.push_back(text.substr(begin, end - begin));
  if (begin < text.size()) lines.push_back(text.substr(begin));
  return lines;
}

std::string utf8(int code_point) {
  if (code_point < 0x80) return std::string(1, char(code_point));
  return {char(0xC0 | (code_point >> 6)), char(0x80 | (code_point & 0x3F))};
}

// A small GPT-2 layout (vocab.json + merges.txt, ByteLevel): the 256 byte symbols of GPT-2's bytes_to_unicode
// (printable bytes stand for themselves, the others for U+0100 onwards) as ids 0-255, `filler` unused entries, then
// four merges and <|endoftext|>. With filler 65,536 the vocabulary passes uint16.
fs::path byte_level_tokenizer(const fs::path& dir, int filler) {
  fs::create_directories(dir);
  json vocab = json::object();
  for (int b = 0, next = 256; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    vocab[utf8(printable ? b : next++)] = b;
  }
  int id = 256;
  for (int i = 0; i < filler; ++i) vocab[fmt::format("<filler_{}>", i)] = id++;
  for (const char* merged : {"th", "the", "\xC4\xA0t", "er", "<|endoftext|>"}) vocab[merged] = id++;  // Ġt: " t"
  write_all(dir / "vocab.json", vocab.dump());
  write_all(dir / "merges.txt", "#version: 0.2\nt h\nth e\n\xC4\xA0 t\ne r\n");
  return dir / "vocab.json";
}

// Each non-empty document's ids from the tokenizer, one text at a time, then the end of text.
std::vector<int32_t> expected_ids(const std::string& tokenizer, const std::vector<std::string>& documents,
                                  int32_t eot) {
  const auto tok = spread::hf::Tokenizer::load(tokenizer);
  std::vector<int32_t> ids;
  for (const auto& d : documents) {
    if (d.empty()) continue;
    const auto own = tok->encode(d, /*add_special_tokens=*/false).ids;
    ids.insert(ids.end(), own.begin(), own.end());
    ids.push_back(eot);
  }
  return ids;
}

std::vector<int32_t> read_tokens(const std::vector<std::string>& shards) {
  const spread::TokenFile file(shards, 0, "");
  std::vector<int64_t> wide(file.size());
  file.copy(0, file.size(), wide.data());
  return {wide.begin(), wide.end()};
}

int32_t header_int(const std::string& shard, int index) {
  const std::string bytes = read_all(shard);
  int32_t v = 0;
  std::memcpy(&v, bytes.data() + 4 * index, 4);
  return v;
}

spread::ShardRequest request_for(const fs::path& tokenizer, const std::vector<std::string>& inputs,
                                 const fs::path& out) {
  spread::ShardRequest r;
  r.tokenizer = tokenizer.string();
  r.inputs = inputs;
  r.out_dir = out.string();
  r.print_progress = false;
  return r;
}

// Lines of every kind the reader must cut right: empty ones, one far longer than a chunk, multi-byte characters,
// a "\r", and no "\n" at the end of the file.
const std::string kTextA =
    "the weather there\n\nthe other\tone\r\n" + std::string(300, 'x') + " then\nnaïve café — 東京 🙂\nthe end";
const std::string kTextB = "\nthere the thither\nquestions ether\n\n";

}  // namespace

TEST(ShardWriter, ShardsHoldEachDocumentsIdsThenTheEndOfTextAcrossBoundaries) {
  const fs::path dir = scratch("stream");
  const fs::path tok = byte_level_tokenizer(dir / "tok", 0);
  fs::create_directories(dir / "in");
  write_all(dir / "in" / "a_1.txt", kTextA);
  write_all(dir / "in" / "a_2.txt", kTextB);
  write_all(dir / "b.jsonl", "{\"text\": \"the jsonl one\", \"id\": 1}\n{\"text\": \"\"}\n{\"id\": 3, \"text\": \"thé\\n2\"}\n");
  write_all(dir / "c.txt", "other theses\n");

  auto r = request_for(tok, {(dir / "c.txt").string(), (dir / "in" / "a_*.txt").string(), (dir / "b.jsonl").string()},
                       dir / "out");
  r.shard_tokens = 7;
  r.val_tokens = 5;
  r.threads = 3;
  r.chunk_bytes = 16;  // many chunks in flight, and a line longer than a chunk
  const spread::ShardResult result = spread::write_shards(r);

  // The documents in input order: c.txt, then the glob's matches by name, then the JSONL column's strings.
  std::vector<std::string> docs = lines_of(read_all(dir / "c.txt"));
  for (const char* name : {"a_1.txt", "a_2.txt"})
    for (const auto& l : lines_of(read_all(dir / "in" / name))) docs.push_back(l);
  for (const char* d : {"the jsonl one", "", "thé\n2"}) docs.push_back(d);
  const int32_t eot = 260;  // <|endoftext|>, the tokenizer's own end of text
  const std::vector<int32_t> expected = expected_ids(tok.string(), docs, eot);
  EXPECT_EQ(read_tokens(result.shards), expected);

  // "other theses" and its end of text: at least 5 tokens of whole documents, so the validation shard alone.
  ASSERT_GE(result.shards.size(), 3u);
  EXPECT_EQ(fs::path(result.shards[0]).filename(), "val_000000.bin");
  EXPECT_EQ(spread::TokenFile(result.shards[0]).size(), expected_ids(tok.string(), {"other theses"}, eot).size());
  for (size_t i = 1; i < result.shards.size(); ++i) {
    EXPECT_EQ(fs::path(result.shards[i]).filename(), fmt::format("train_{:06d}.bin", i - 1));
    if (i + 1 < result.shards.size()) EXPECT_EQ(spread::TokenFile(result.shards[i]).size(), 7u) << result.shards[i];
  }
  EXPECT_EQ(result.tokens, int64_t(expected.size()));
  EXPECT_EQ(result.eot_id, eot);
  EXPECT_EQ(result.documents, 10);  // c.txt 1, a_1.txt 5, a_2.txt 2, b.jsonl 2 (empty ones skipped)
  EXPECT_EQ(result.files, 4);

  // Bits per byte: the shards' byte counts add up to the documents' UTF-8 bytes, the validation shard's to its own.
  uint64_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  EXPECT_EQ(spread::TokenFile(result.shards, 0, "").source_bytes(), bytes);
  EXPECT_EQ(spread::TokenFile(result.shards[0]).source_bytes(), std::string("other theses").size());
  EXPECT_EQ(result.document_bytes, bytes);

  // The log: progress lines (if any) and the summary.
  const auto log = lines_of(read_all(dir / "out" / "tokenize.jsonl"));
  ASSERT_FALSE(log.empty());
  const json done = json::parse(log.back());
  EXPECT_EQ(done["event"], "done");
  EXPECT_EQ(done["tokens"], expected.size());
  EXPECT_EQ(done["eot_id"], eot);
  EXPECT_EQ(done["shards"], result.shards.size());
}

TEST(ShardWriter, OneThreadAndLargeChunksWriteTheSameShards) {
  const fs::path dir = scratch("same");
  const fs::path tok = byte_level_tokenizer(dir / "tok", 0);
  write_all(dir / "a.txt", kTextA + "\n" + kTextB);
  std::vector<std::vector<int32_t>> streams;
  for (const int threads : {1, 4}) {
    auto r = request_for(tok, {(dir / "a.txt").string()}, dir / fmt::format("out{}", threads));
    r.shard_tokens = 30;
    r.threads = threads;
    r.chunk_bytes = threads == 1 ? 1 << 20 : 7;
    streams.push_back(read_tokens(spread::write_shards(r).shards));
  }
  EXPECT_EQ(streams[0], streams[1]);
  EXPECT_EQ(streams[0], expected_ids(tok.string(), lines_of(kTextA + "\n" + kTextB), 260));
}

TEST(ShardWriter, ADocumentCutAcrossShardsGivesEachPartItsShareOfTheBytes) {
  // "abcd": 4 byte tokens and the end of text, 4 bytes, in shards of 2 tokens. Shares in proportion to tokens,
  // rounded down at each cut: floor(4 * 2/5) = 1, floor(4 * 4/5) - 1 = 2, 4 - 3 = 1.
  const fs::path dir = scratch("bytes");
  const fs::path tok = byte_level_tokenizer(dir / "tok", 0);
  write_all(dir / "a.txt", "abcd\n");
  auto r = request_for(tok, {(dir / "a.txt").string()}, dir / "out");
  r.shard_tokens = 2;
  const auto result = spread::write_shards(r);
  ASSERT_EQ(result.shards.size(), 3u);
  const std::vector<uint64_t> want_bytes{1, 2, 1};
  const std::vector<uint64_t> want_tokens{2, 2, 1};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(spread::TokenFile(result.shards[i]).source_bytes(), want_bytes[i]) << result.shards[i];
    EXPECT_EQ(spread::TokenFile(result.shards[i]).size(), want_tokens[i]) << result.shards[i];
  }
  // The extension as token_file.h states it: the marker "SPRD" in header[3], the uint64 count in header[4..5].
  EXPECT_EQ(header_int(result.shards[1], 3), 0x44525053);
  EXPECT_EQ(header_int(result.shards[1], 4), 2);
  EXPECT_EQ(header_int(result.shards[1], 5), 0);
}

TEST(ShardWriter, TokenWidthComesFromTheVocabulary) {
  // Ids that fit uint16 either way ("a", "b" and "!" as the end of text): the width follows the vocabulary.
  const fs::path dir = scratch("width");
  write_all(dir / "a.txt", "ab\n");
  for (const int filler : {0, 65536}) {
    const fs::path tok = byte_level_tokenizer(dir / fmt::format("tok{}", filler), filler);
    auto r = request_for(tok, {(dir / "a.txt").string()}, dir / fmt::format("out{}", filler));
    r.eot = "!";
    const auto result = spread::write_shards(r);
    ASSERT_EQ(result.shards.size(), 1u);
    EXPECT_EQ(header_int(result.shards[0], 1), filler == 0 ? 1 : 2) << "vocabulary of " << 261 + filler;
    const size_t width = filler == 0 ? 2 : 4;  // version 1 = uint16, 2 = uint32
    EXPECT_EQ(fs::file_size(result.shards[0]), spread::kShardHeaderBytes + 3 * width);
    EXPECT_EQ(read_tokens(result.shards), (std::vector<int32_t>{'a', 'b', '!'}));
  }
}

TEST(ShardWriter, TheEndOfTextIsTheTokenizersOwnOrTheNamedOne) {
  const fs::path dir = scratch("eot");
  write_all(dir / "a.txt", "hello\n");
  // BERT's layout (vocab.txt): no <|endoftext|>, so [SEP].
  fs::create_directories(dir / "bert");
  write_all(dir / "bert" / "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n");
  auto r = request_for(dir / "bert" / "vocab.txt", {(dir / "a.txt").string()}, dir / "out_bert");
  EXPECT_EQ(read_tokens(spread::write_shards(r).shards), (std::vector<int32_t>{5, 3}));
  // Named: a vocabulary entry.
  r.out_dir = (dir / "out_named").string();
  r.eot = "[CLS]";
  EXPECT_EQ(read_tokens(spread::write_shards(r).shards), (std::vector<int32_t>{5, 2}));
  // None of its own: a vocabulary without any of the known end-of-text tokens.
  write_all(dir / "plain.json",
            R"({"model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[UNK]": 0, "hello": 1}}})");
  r = request_for(dir / "plain.json", {(dir / "a.txt").string()}, dir / "out_plain");
  const std::string msg = user_error_message([&] { spread::write_shards(r); });
  EXPECT_NE(msg.find("--eot"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no end-of-text token"), std::string::npos) << msg;
}

// --- against the reference library -----------------------------------------------------------------------------

TEST(ShardWriter, IdsMatchTheReferenceLibraryForGpt2AndBert) {
  std::string why;
  const std::string python = spread::testing::reference_python({"tokenizers", "transformers"}, &why);
  if (python.empty()) GTEST_SKIP() << why;
  const std::string tokenizers = spread::testing::shared_data_path("tokenizers");
  const std::string shakespeare = spread::testing::shared_data_path("tinyshakespeare/input.txt");
  if (tokenizers.empty() || shakespeare.empty())
    GTEST_SKIP() << "no shared tokenizers or tinyshakespeare under " << spread::testing::shared_data_dir();
  const fs::path dir = scratch("reference");
  // Short lines (BERT's tokenizer.json truncates at 256 tokens, which the shards never do).
  std::string text = read_all(kRepo + "/tests/data/tokenizer_text/adversarial.txt");
  const auto play = lines_of(read_all(shakespeare));
  for (size_t i = 0; i < 600 && i < play.size(); ++i) text += play[i] + "\n";
  write_all(dir / "lines.txt", text);
  struct Case {
    std::string name, tokenizer;
    int32_t eot;  // GPT-2's <|endoftext|> and BERT's [SEP], as their model cards give them
  };
  const std::vector<Case> cases{{"gpt2", tokenizers + "/gpt2/vocab.json", 50256},
                                {"bert", tokenizers + "/bert-base-uncased/tokenizer.json", 102}};
  // One Python start for both: a line of jobs per tokenizer.
  std::string jobs;
  for (const auto& c : cases)
    jobs += c.tokenizer + "\t" + (dir / "lines.txt").string() + "\t" + (dir / (c.name + ".jsonl")).string() +
            "\t--no-special\n";
  write_all(dir / "jobs.tsv", jobs);
  const std::string cmd = fmt::format("'{}' '{}' --jobs '{}' 2>&1", python,
                                      spread::testing::oracle_script("hf_tokenize_ref.py"),
                                      (dir / "jobs.tsv").string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  // A document past BERT's max_length (256 in its tokenizer.json) stays whole: 300 times "hello" (7592).
  std::string hellos;
  for (int i = 0; i < 300; ++i) hellos += "hello ";
  write_all(dir / "long.txt", text + hellos + "\n");
  for (const auto& c : cases) {
    // The reference's ids where its attention mask is 1 (its encode_batch pads BERT's batch to the longest).
    std::vector<int32_t> expected;
    const auto lines = lines_of(text);
    const auto refs = lines_of(read_all(dir / (c.name + ".jsonl")));
    ASSERT_EQ(refs.size(), lines.size());
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].empty()) continue;
      const json e = json::parse(refs[i]);
      for (size_t k = 0; k < e["ids"].size(); ++k)
        if (e["attention_mask"][k] == 1) expected.push_back(e["ids"][k].get<int32_t>());
      expected.push_back(c.eot);
    }
    const bool bert = c.name == "bert";
    if (bert) {
      expected.insert(expected.end(), 300, 7592);
      expected.push_back(c.eot);
    }
    auto r = request_for(c.tokenizer, {(dir / (bert ? "long.txt" : "lines.txt")).string()}, dir / ("out_" + c.name));
    r.shard_tokens = 1000;
    r.threads = 2;
    r.chunk_bytes = 512;
    const auto result = spread::write_shards(r);
    EXPECT_GT(result.shards.size(), 3u) << c.name;
    const auto got = read_tokens(result.shards);
    EXPECT_EQ(got.size(), expected.size()) << c.name;
    size_t first_difference = 0;
    while (first_difference < std::min(got.size(), expected.size()) && got[first_difference] == expected[first_difference])
      ++first_difference;
    EXPECT_EQ(first_difference, expected.size()) << c.name << ": the first difference at token " << first_difference;
    std::printf("[ reference ] %s: %zu tokens of %zu lines equal to tokenizers' encode_batch\n", c.name.c_str(),
                got.size(), lines.size());
  }
}

// --- bad input ---------------------------------------------------------------------------------------------------

TEST(ShardWriter, BadInputIsNamedByFileAndLine) {
  const fs::path dir = scratch("bad");
  const fs::path tok = byte_level_tokenizer(dir / "tok", 0);
  struct Case {
    std::string file, text, expect;
  };
  const std::vector<Case> cases{
      {"utf8.txt", "fine\nalso fine\nbad \xC3\x28 here\n", "utf8.txt:3: invalid UTF-8 at byte 4"},
      {"array.jsonl", "{\"text\": \"ok\"}\n[1, 2]\n", "array.jsonl:2: a JSON array, not an object"},
      {"broken.jsonl", "{\"text\": \"ok\"\n", "broken.jsonl:1: not valid JSON"},
      {"missing.jsonl", "{\"text\": \"ok\"}\n{\"body\": \"x\"}\n", "missing.jsonl:2: key '--column': no key 'text'"},
      {"number.jsonl", "{\"text\": 7}\n", "number.jsonl:1: key '--column': 'text' is a number, not a string"},
      {"deep.jsonl", std::string(200, '[') + std::string(200, ']') + "\n", "deep.jsonl:1: JSON nested more than 128"},
  };
  for (const auto& c : cases) {
    write_all(dir / c.file, c.text);
    auto r = request_for(tok, {(dir / c.file).string()}, dir / ("out_" + c.file));
    r.chunk_bytes = 8;
    const std::string msg = user_error_message([&] { spread::write_shards(r); });
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.file << ": " << msg;
  }
  const std::string glob = (dir / "none_*.txt").string();
  std::string msg = user_error_message([&] { spread::write_shards(request_for(tok, {glob}, dir / "out_glob")); });
  EXPECT_NE(msg.find(glob + ": key '--in': matches no file"), std::string::npos) << msg;
  auto r = request_for(tok, {(dir / "utf8.txt").string()}, dir / "out_range");
  for (const int64_t n : {int64_t(0), int64_t(1) << 31}) {
    r.shard_tokens = n;
    msg = user_error_message([&] { spread::write_shards(r); });
    EXPECT_NE(msg.find("--shard-tokens"), std::string::npos) << msg;
  }
  r.shard_tokens = 10;
  r.eot = "<|not a token|>";
  msg = user_error_message([&] { spread::write_shards(r); });
  EXPECT_NE(msg.find("key '--eot': '<|not a token|>' is no token"), std::string::npos) << msg;
}

TEST(ShardWriter, AFolderHoldingShardsIsRefusedAndLeftAsItWas) {
  const fs::path dir = scratch("existing");
  const fs::path tok = byte_level_tokenizer(dir / "tok", 0);
  write_all(dir / "a.txt", "the text\n");
  fs::create_directories(dir / "out");
  write_all(dir / "out" / "train_000003.bin", "someone's shard");
  const std::string msg =
      user_error_message([&] { spread::write_shards(request_for(tok, {(dir / "a.txt").string()}, dir / "out")); });
  EXPECT_NE(msg.find("already holds 1 shard(s) (train_000003.bin)"), std::string::npos) << msg;
  EXPECT_EQ(read_all(dir / "out" / "train_000003.bin"), "someone's shard");
}

TEST(ShardWriter, AFailurePartWayLeavesNoShard) {
  // Many shards complete before the bad line: the run removes them and its temporaries, so that a rerun after
  // the fix is not refused over them.
  const fs::path dir = scratch("partway");
  const fs::path tok = byte_level_tokenizer(dir / "tok", 0);
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the other weather\n";
  write_all(dir / "a.txt", text + "\xFF\n");
  auto r = request_for(tok, {(dir / "a.txt").string()}, dir / "out");
  r.shard_tokens = 10;
  r.val_tokens = 3;
  r.chunk_bytes = 64;
  r.threads = 2;
  const std::string msg = user_error_message([&] { spread::write_shards(r); });
  EXPECT_NE(msg.find("a.txt:41: invalid UTF-8"), std::string::npos) << msg;
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir / "out")) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"tokenize.jsonl"});
}

TEST(ShardWriter, TheCommandWritesShardsAndRefusesBadInputWithExitTwo) {
  const fs::path dir = scratch("cli");
  const fs::path tok = byte_level_tokenizer(dir / "tok", 0);
  write_all(dir / "a.txt", "the weather\nthe other\n");
  write_all(dir / "b.jsonl", "{\"body\": \"there\"}\n");
  const std::string base = "tokenize --tokenizer '" + tok.string() + "' ";
  auto r = spread::testing::run_spread(base + "--shards '" + (dir / "out").string() + "' --in '" +
                                       (dir / "a.txt").string() + "' --in '" + (dir / "b.jsonl").string() +
                                       "' --column body --shard-tokens 4");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto expected = expected_ids(tok.string(), {"the weather", "the other", "there"}, 260);
  const size_t shards = (expected.size() + 3) / 4;
  EXPECT_NE(r.output.find(fmt::format("wrote {} shard(s)", shards)), std::string::npos) << r.output;
  std::vector<std::string> paths;
  for (size_t i = 0; i < shards; ++i) paths.push_back((dir / "out" / fmt::format("train_{:06d}.bin", i)).string());
  EXPECT_EQ(read_tokens(paths), expected);

  const std::string in = " --in '" + (dir / "a.txt").string() + "'";
  const std::vector<std::pair<std::string, std::string>> refused{
      {"--shards '" + (dir / "out").string() + "'" + in, fmt::format("already holds {} shard(s)", shards)},
      {"--shards '" + (dir / "o2").string() + "' --in '" + (dir / "b.jsonl").string() + "'", "b.jsonl:1"},
      {"--shards '" + (dir / "o3").string() + "' --in '" + (dir / "nothing*.txt").string() + "'", "matches no file"},
      {"--shards '" + (dir / "o4").string() + "'" + in + " --shard-tokens 2147483648", "--shard-tokens"},
      {"--shards '" + (dir / "o5").string() + "'" + in + " --eot nope", "--eot"},
      {in + " --shard-tokens 5", "--shard-tokens is an option of --shards"},
  };
  for (const auto& [args, expect] : refused) {
    const auto bad = spread::testing::run_spread(base + args);
    EXPECT_EQ(bad.code, 2) << args << "\n" << bad.output;
    EXPECT_NE(bad.output.find(expect), std::string::npos) << args << "\n" << bad.output;
  }
}
