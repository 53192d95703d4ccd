// sentence-transformers' do_lower_case is Python's str.lower() of each text before the tokenizer sees it
// (data/hf/unicode.h: python_lower). Unlike a lower-casing normalizer, which maps one character at a time, it
// applies Unicode's Final_Sigma rule. Judged by hand-checked cases and by Python itself on random mixed text.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "../src/data/hf/unicode.h"
#include "cli_run.h"
#include "python_env.h"

namespace {

using spread::hf::python_lower;

TEST(PythonLower, FinalSigmaAndTheFullMappingByHand) {
  EXPECT_EQ(python_lower("The Quick BROWN fox 42."), "the quick brown fox 42.");  // ASCII
  // Final sigma: after a cased letter and before none, skipping case-ignorable characters (the apostrophe).
  EXPECT_EQ(python_lower("\u039F\u0394\u03A5\u03A3\u03A3\u0395\u03A5\u03A3"),
            "\u03BF\u03B4\u03C5\u03C3\u03C3\u03B5\u03C5\u03C2");              // ΟΔΥΣΣΕΥΣ -> οδυσσευς
  EXPECT_EQ(python_lower("\u039F\u0394\u039F\u03A3'\u03A3"), "\u03BF\u03B4\u03BF\u03C3'\u03C2");  // ΟΔΟΣ'Σ
  EXPECT_EQ(python_lower("\u03A3"), "\u03C3");                                 // no cased letter before it
  EXPECT_EQ(python_lower("A\u03A3."), "a\u03C2.");
  EXPECT_EQ(python_lower("\u0391\u03A3\u0301\u0392"), "\u03B1\u03C3\u0301\u03B2");  // a cased letter follows
  // U+0130, whose full lower case is two characters; a title-case digraph; a letter number.
  EXPECT_EQ(python_lower("\u0130STANBUL"), "i\u0307stanbul");
  EXPECT_EQ(python_lower("\u01C5"), "\u01C6");
  EXPECT_EQ(python_lower("\u216B"), "\u217B");
  EXPECT_EQ(python_lower("A\u03A3\n\u03A3"), "a\u03C2\n\u03C3");  // lines are lowered one by one: the same
}

// Random strings of Greek capitals and small letters, case-ignorable marks and punctuation, spaces, Latin,
// Cyrillic, Cherokee and a few special-cased letters, lowered by spread and by the reference Python.
TEST(PythonLower, EqualsPythonsStrLowerOnRandomMixedText) {
  std::string why;
  const std::string python = spread::testing::reference_python({}, &why);
  if (python.empty()) GTEST_SKIP() << why;
  const std::vector<std::string> pieces = {
      "\u03A3", "\u03A3", "\u03A3", "\u0391", "\u039F", "\u03C3", "\u03C2", "\u03B1", "'", "\u00AD", "\u0301",
      "\u0345", ".", ",", " ", " ", "-", "A", "z", "\u0130", "\u0049", "\u00DF", "\u1E9E", "\u0414", "\u13A0",
      "\u01C5", "\u216B", "\u24B6", "\u2019", ":", "\u3000", "1", "\U00010400", "\u1F88", "\u03D2"};
  std::mt19937 rng(7);
  std::vector<std::string> texts;
  for (int i = 0; i < 3000; ++i) {
    std::string t;
    const int n = 1 + int(rng() % 12);
    for (int k = 0; k < n; ++k) t += pieces[rng() % pieces.size()];
    texts.push_back(t);
  }
  const std::string dir = spread::testing::fresh_temp_dir("python_lower").string();
  {
    std::ofstream out(dir + "/in.txt", std::ios::binary);
    for (const auto& t : texts) out << t << "\n";
  }
  const std::string cmd = "'" + python + "' -c 'import sys; d = sys.argv[1]; " +
                          "lines = open(d + \"/in.txt\", encoding=\"utf-8\").read().split(\"\\n\")[:-1]; " +
                          "open(d + \"/out.txt\", \"w\", encoding=\"utf-8\").write(\"\".join(l.lower() + \"\\n\" " +
                          "for l in lines))' '" + dir + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(dir + "/out.txt", std::ios::binary);
  std::string line;
  size_t i = 0, differ = 0, sigmas = 0;
  while (std::getline(in, line) && i < texts.size()) {
    if (python_lower(texts[i]) != line && ++differ <= 5) ADD_FAILURE() << "'" << texts[i] << "': python '" << line << "'";
    sigmas += line.find("\u03C2") != std::string::npos && texts[i].find("\u03C2") == std::string::npos;
    ++i;
  }
  EXPECT_EQ(i, texts.size());
  EXPECT_EQ(differ, 0u);
  EXPECT_GT(sigmas, 100u) << "too few final sigmas made by the rule for the comparison to mean much";
}

}  // namespace
