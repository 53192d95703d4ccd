// Hugging Face tokenizers (include/spread/data/hf/tokenizer.h) against the reference library, `tokenizers`.
//   HfComponents: one small tokenizer per component and option (tests/data/tokenizer_text/hand_cases.py made
//     them and recorded what tokenizers 0.22 gives; the file needs no Python to check).
//   HfEquivalence: the real BERT and GPT-2 vocabularies and tokenizer.json fixtures made by the reference
//     library, on a fixed subset of the shared corpora plus tests/data/tokenizer_text/adversarial.txt, compared
//     field by field with tests/oracles/hf_tokenize_ref.py's output (skips, saying why, without the Python environment
//     or the shared data).
//   HfBadInput: each malformed file is one UserError naming the file and the problem.
#include <gtest/gtest.h>
#include "test_paths.h"
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "python_env.h"
#include "shared_data.h"
#include "spread/data/hf/tokenizer.h"
#include "spread/util/error.h"

namespace fs = std::filesystem;
using nlohmann::json;
using spread::hf::Encoding;
using spread::hf::Tokenizer;

namespace {

const std::string kData = SPREAD_TEST_DATA_DIR;
const std::string kText = kData + "/tokenizer_text";
const std::string kShared = spread::testing::shared_data_dir();  // SPREAD_DATA, else ../shared/data

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_all(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("spread_hf_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::unique_ptr<Tokenizer> from_json(const json& doc, const std::string& name) {
  const fs::path p = temp_dir("json") / (name + ".json");
  write_all(p.string(), doc.dump());
  return Tokenizer::load(p.string());
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  return lines;
}

json offsets_json(const std::vector<std::pair<int64_t, int64_t>>& offsets) {
  json a = json::array();
  for (const auto& [b, e] : offsets) a.push_back({b, e});
  return a;
}

// --- components, against the reference's recorded answers -----------------------------------------------------

TEST(HfComponents, EachCaseAsTheReferenceGives) {
  const json cases = json::parse(read_all(kText + "/hand_cases.json"));
  ASSERT_GE(cases.size(), 20u);
  for (auto it = cases.begin(); it != cases.end(); ++it) {
    SCOPED_TRACE(it.key());
    const json& c = *it;
    auto tok = from_json(c["json"], it.key());
    Encoding e;
    std::string first;
    if (c["text"].is_array()) {
      first = c["text"][0];
      e = tok->encode_pair(first, c["text"][1].get<std::string>());
    } else {
      first = c["text"];
      e = tok->encode(first);
    }
    EXPECT_EQ(json(e.ids), c["ids"]);
    EXPECT_EQ(json(e.tokens), c["tokens"]);
    EXPECT_EQ(json(e.type_ids), c["type_ids"]);
    EXPECT_EQ(json(e.attention_mask), c["attention_mask"]);
    EXPECT_EQ(json(e.special_tokens_mask), c["special_tokens_mask"]);
    if (!c["text"].is_array()) {
      EXPECT_EQ(offsets_json(spread::hf::char_offsets(e, first)), c["offsets"]);
    }
    EXPECT_EQ(tok->decode(e.ids, true), c["decoded"].get<std::string>());
  }
}

TEST(HfComponents, BertByteOffsetsAndMasksByHand) {
  // "Héllo, WORLDs!" through BertNormalizer (é -> e), BertPreTokenizer and WordPiece; é is two bytes.
  const json cases = json::parse(read_all(kText + "/hand_cases.json"));
  auto tok = from_json(cases["bert_basic"]["json"], "bert_basic");
  const Encoding e = tok->encode("H\xC3\xA9llo, WORLDs!");
  const std::vector<std::pair<int64_t, int64_t>> bytes{{0, 6}, {6, 7}, {8, 13}, {13, 14}, {14, 15}};
  EXPECT_EQ(e.offsets, bytes);
  EXPECT_EQ(e.attention_mask, std::vector<uint8_t>(5, 1));
  EXPECT_EQ(e.special_tokens_mask, std::vector<uint8_t>(5, 0));
}

TEST(HfComponents, BatchEqualsOneByOneOnTwoThreads) {
  const std::string path = kShared + "/tokenizers/gpt2";
  if (!fs::exists(path)) GTEST_SKIP() << "no shared data at " << path;
  auto tok = Tokenizer::load(path);
  std::vector<std::string> texts = split_lines(read_all(kText + "/adversarial.txt"));
  for (int i = 0; i < 50; ++i) texts.push_back("line " + std::to_string(i) + " of the batch, mostly the same words");
  const auto batch = tok->encode_batch(texts, true, 2);
  ASSERT_EQ(batch.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(batch[i].ids, tok->encode(texts[i]).ids) << texts[i];
}

// --- equivalence with the reference on real vocabularies and text ----------------------------------------------

// A fixed subset of the shared corpora: every 40th line of tiny shakespeare, the first scifact abstracts, stsb
// and SICK rows as they are (tabs and commas included), then the adversarial lines.
std::vector<std::string> equivalence_lines() {
  std::vector<std::string> out;
  const auto shakespeare = split_lines(read_all(kShared + "/tinyshakespeare/input.txt"));
  for (size_t i = 0; i < shakespeare.size() && out.size() < 120; i += 40) out.push_back(shakespeare[i]);
  const auto corpus = split_lines(read_all(kShared + "/scifact-train/corpus.jsonl"));
  for (size_t i = 0; i < corpus.size() && i < 60; ++i) {
    const json doc = json::parse(corpus[i]);
    std::string text = doc.value("text", "");
    for (char& ch : text)
      if (ch == '\n') ch = ' ';
    out.push_back(doc.value("title", "") + " " + text);
  }
  const auto stsb = split_lines(read_all(kShared + "/stsb/stsb-en-train.csv"));
  for (size_t i = 0; i < stsb.size() && i < 2000; i += 25) out.push_back(stsb[i]);
  const auto sick = split_lines(read_all(kShared + "/sick/SICK.txt"));
  for (size_t i = 0; i < sick.size() && i < 3000; i += 40) out.push_back(sick[i]);
  for (const auto& l : split_lines(read_all(kText + "/adversarial.txt"))) out.push_back(l);
  return out;
}

// Mismatching fields of line i, as "field: ours vs reference".
std::vector<std::string> compare(const Encoding& e, const std::string& line, const std::string& decoded,
                                 const json& ref) {
  std::vector<std::string> diffs;
  auto check = [&](const char* name, const json& ours) {
    if (ours != ref[name]) diffs.push_back(std::string(name) + ": " + ours.dump() + " vs " + ref[name].dump());
  };
  check("ids", e.ids);
  check("tokens", e.tokens);
  check("offsets", offsets_json(spread::hf::char_offsets(e, line)));
  check("type_ids", e.type_ids);
  check("attention_mask", e.attention_mask);
  check("special_tokens_mask", e.special_tokens_mask);
  // Where the reference itself panics in decode (hf_tokenize_ref.py's reference_decode) there is nothing to
  // compare the decoded text with; ids, tokens, offsets and masks still are.
  if (!ref["decoded"].is_object()) check("decoded", decoded);
  return diffs;
}

struct RefRun {
  std::string tokenizer;
  std::string lines_file;
  bool add_special;
};

// Runs the reference on every run at once (one Python start) and counts lines whose fields differ from ours,
// printing the counts and the first few mismatches.
void expect_equivalent(const std::vector<RefRun>& runs, const std::string& python, const fs::path& dir) {
  std::string jobs;
  for (size_t k = 0; k < runs.size(); ++k)
    jobs += runs[k].tokenizer + "\t" + runs[k].lines_file + "\t" + (dir / ("ref_" + std::to_string(k) + ".jsonl")).string() +
            (runs[k].add_special ? "" : "\t--no-special") + "\n";
  write_all((dir / "jobs.tsv").string(), jobs);
  const std::string cmd = "'" + python + "' '" + spread::testing::oracle_script("hf_tokenize_ref.py") + "' --jobs '" +
                          (dir / "jobs.tsv").string() + "' 2> '" + (dir / "ref.log").string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << read_all((dir / "ref.log").string());
  int64_t lines_total = 0, mismatched = 0;
  for (size_t k = 0; k < runs.size(); ++k) {
    const RefRun& run = runs[k];
    const auto lines = split_lines(read_all(run.lines_file));
    const auto refs = split_lines(read_all((dir / ("ref_" + std::to_string(k) + ".jsonl")).string()));
    ASSERT_EQ(refs.size(), lines.size()) << run.tokenizer;
    auto tok = Tokenizer::load(run.tokenizer);
    const auto batch = tok->encode_batch(lines, run.add_special, 1);
    int shown = 0, bad = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
      const auto diffs = compare(batch[i], lines[i], tok->decode(batch[i].ids, true), json::parse(refs[i]));
      if (diffs.empty()) continue;
      ++bad;
      if (shown++ < 3)
        ADD_FAILURE() << run.tokenizer << " line " << i << " " << json(lines[i]).dump() << "\n  " << diffs[0];
    }
    std::printf("[ equivalence ] %s%s: %zu lines, %d mismatches\n", fs::path(run.tokenizer).filename().c_str(),
                run.add_special ? "" : " (no special tokens)", lines.size(), bad);
    lines_total += static_cast<int64_t>(lines.size());
    mismatched += bad;
  }
  std::printf("[ equivalence ] %zu runs, %lld lines in all: %lld mismatches\n", runs.size(),
              static_cast<long long>(lines_total), static_cast<long long>(mismatched));
  EXPECT_EQ(mismatched, 0);
}

// The tokenizer.json fixtures: tests/oracles/gen_tokenizer_fixtures.py's when it exists, and this test's own small
// ones.
std::vector<std::string> fixture_tokenizers(const std::string& python) {
  const fs::path dir = temp_dir("fixtures");
  const std::string train = (dir / "train.txt").string();
  std::string text;
  const auto shakespeare = split_lines(read_all(kShared + "/tinyshakespeare/input.txt"));
  for (size_t i = 0; i < shakespeare.size() && i < 3000; ++i) text += shakespeare[i] + "\n";
  text += read_all(kText + "/adversarial.txt");
  write_all(train, text);
  std::vector<std::string> cmds{"'" + python + "' '" + kText + "/make_fixtures.py' '" + train + "' '" +
                                (dir / "own").string() + "'"};
  if (const std::string gen = spread::testing::oracle_script("gen_tokenizer_fixtures.py"); fs::exists(gen))
    cmds.push_back("'" + python + "' '" + gen + "' '" + (dir / "gen").string() + "'");
  for (const auto& cmd : cmds)
    if (std::system((cmd + " > /dev/null 2>&1").c_str()) != 0) ADD_FAILURE() << "fixture generator failed: " << cmd;
  std::vector<std::string> out;
  for (const char* sub : {"own", "gen"}) {
    if (!fs::exists(dir / sub)) continue;
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(dir / sub))
      if (entry.path().extension() == ".json") found.push_back(entry.path().string());
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

// Every tokenizer on the corpus subset with special tokens, and the real ones on the adversarial lines without.
TEST(HfEquivalence, RealVocabulariesAndFixturesMatchTheReference) {
  std::string why;
  const std::string python = spread::testing::reference_python({"tokenizers", "transformers"}, &why);
  if (python.empty()) GTEST_SKIP() << why;
  if (!fs::exists(kShared + "/tokenizers")) GTEST_SKIP() << "no shared data at " << kShared;
  const fs::path dir = temp_dir("equiv");
  std::string text;
  for (const auto& l : equivalence_lines()) text += l + "\n";
  const std::string lines_file = (dir / "lines.txt").string();
  write_all(lines_file, text);
  const std::string bert_json = kShared + "/tokenizers/bert-base-uncased/tokenizer.json";
  const std::string gpt2 = kShared + "/tokenizers/gpt2/vocab.json";
  std::vector<std::string> tokenizers{bert_json, kShared + "/tokenizers/bert-base-uncased/vocab.txt", gpt2};
  const auto fixtures = fixture_tokenizers(python);
  EXPECT_GE(fixtures.size(), 7u);
  tokenizers.insert(tokenizers.end(), fixtures.begin(), fixtures.end());
  // The legacy layouts as to_json() writes them, read by the reference itself as tokenizer.json files.
  for (const char* legacy : {"bert-base-uncased/vocab.txt", "gpt2/vocab.json"}) {
    const fs::path converted = dir / (fs::path(legacy).parent_path().string() + "_converted.json");
    write_all(converted.string(), Tokenizer::load(kShared + "/tokenizers/" + legacy)->to_json());
    tokenizers.push_back(converted.string());
  }
  std::vector<RefRun> runs;
  for (const auto& t : tokenizers) runs.push_back({t, lines_file, true});
  runs.push_back({bert_json, kText + "/adversarial.txt", false});
  runs.push_back({gpt2, kText + "/adversarial.txt", false});
  expect_equivalent(runs, python, dir);
}

// --- bad input -------------------------------------------------------------------------------------------------

// The message of the UserError that loading `path` throws ("" when none).
std::string load_error(const std::string& path) {
  try {
    Tokenizer::load(path);
  } catch (const spread::UserError& e) {
    return e.what();
  }
  return "";
}

json minimal_wordpiece() {
  return {{"model", {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"vocab", {{"[UNK]", 0}, {"a", 1}}}}}};
}

TEST(HfBadInput, InvalidUtf8NamesTheByteOffset) {
  auto tok = from_json(minimal_wordpiece(), "utf8");
  const auto lines = split_lines(read_all(kText + "/invalid_utf8.txt"));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NO_THROW(tok->encode(lines[0]));
  try {
    tok->encode(lines[1]);
    FAIL() << "no error for invalid UTF-8";
  } catch (const spread::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("invalid UTF-8 at byte offset 29"), std::string::npos) << e.what();
  }
}

TEST(HfBadInput, NotJson) {
  const fs::path p = temp_dir("bad") / "tokenizer.json";
  write_all(p.string(), "{\"model\": {");
  const std::string msg = load_error(p.string());
  EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
}

TEST(HfBadInput, NoModel) {
  const fs::path p = temp_dir("bad") / "tokenizer.json";
  write_all(p.string(), "{\"normalizer\": null}");
  const std::string msg = load_error(p.string());
  EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("'model'"), std::string::npos) << msg;
}

TEST(HfBadInput, IdOutOfRangeAndDuplicateIds) {
  json doc = minimal_wordpiece();
  doc["model"]["vocab"]["b"] = 7;
  const fs::path p = temp_dir("bad") / "range.json";
  write_all(p.string(), doc.dump());
  std::string msg = load_error(p.string());
  EXPECT_NE(msg.find("id 7, out of range"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.vocab"), std::string::npos) << msg;
  doc["model"]["vocab"]["b"] = 1;
  write_all(p.string(), doc.dump());
  msg = load_error(p.string());
  EXPECT_NE(msg.find("id 1 is given to both"), std::string::npos) << msg;
}

TEST(HfBadInput, DuplicateTokenInVocabTxt) {
  const fs::path p = temp_dir("bad") / "vocab.txt";
  write_all(p.string(), "[UNK]\n[CLS]\n[SEP]\nhello\nhello\n");
  const std::string msg = load_error(p.string());
  EXPECT_NE(msg.find(p.string() + ":5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("duplicate token 'hello'"), std::string::npos) << msg;
}

TEST(HfBadInput, MergesFileWithABadLine) {
  const fs::path d = temp_dir("bad");
  write_all((d / "vocab.json").string(), R"({"a": 0, "b": 1, "ab": 2})");
  write_all((d / "merges.txt").string(), "#version: 0.2\na b\na b c\n");
  const std::string msg = load_error(d.string());
  EXPECT_NE(msg.find((d / "merges.txt").string() + ":3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("two tokens"), std::string::npos) << msg;
}

TEST(HfBadInput, GitLfsPointerSaysTheFileWasNeverDownloaded) {
  const fs::path p = temp_dir("bad") / "tokenizer.json";
  write_all(p.string(), "version https://git-lfs.github.com/spec/v1\noid sha256:0123\nsize 711649\n");
  const std::string msg = load_error(p.string());
  EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("never downloaded"), std::string::npos) << msg;
  EXPECT_NE(msg.find("git lfs pull"), std::string::npos) << msg;
}

TEST(HfBadInput, UnknownComponentTypeOrOption) {
  const fs::path p = temp_dir("bad") / "tokenizer.json";
  json doc = minimal_wordpiece();
  doc["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
  write_all(p.string(), doc.dump());
  std::string msg = load_error(p.string());
  EXPECT_NE(msg.find("normalizer"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'Precompiled' is not implemented"), std::string::npos) << msg;
  doc = minimal_wordpiece();
  doc["model"] = {{"type", "Unigram"}, {"vocab", json::array()}};
  write_all(p.string(), doc.dump());
  msg = load_error(p.string());
  EXPECT_NE(msg.find("model type 'Unigram' is not implemented"), std::string::npos) << msg;
  doc = minimal_wordpiece();
  doc["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Sideways"}};
  write_all(p.string(), doc.dump());
  msg = load_error(p.string());
  EXPECT_NE(msg.find("pre_tokenizer.behavior"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'Sideways'"), std::string::npos) << msg;
}

TEST(HfBadInput, DecodeOfAnIdOutsideTheVocabulary) {
  auto tok = from_json(minimal_wordpiece(), "decode");
  EXPECT_THROW(tok->decode({1, 5}), spread::UserError);
}

}  // namespace
