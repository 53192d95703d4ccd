// Pair data: the CSV/TSV readers against hand-written rows; each kind of bad row of a pairs file with its message,
// line and the skip count; strict mode; the validation split sharing no text with training; the batch sampler's
// determinism, duplicate-free batches and epoch crossing against a walk done by hand; and the real datasets'
// counts against independent counts (awk / Python one-liners quoted in the comments, or the datasets' READMEs).
#include <gtest/gtest.h>
#include "test_paths.h"
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "spread/data/beir.h"
#include "spread/data/pairs.h"
#include "spread/util/csv.h"
#include "spread/util/error.h"
#include "shared_data.h"
#include "user_error_message.h"

namespace spread {
namespace {

const std::string kFixtures = std::string(SPREAD_TEST_DATA_DIR) + "/pairs";

using spread::testing::user_error_message;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

PairSourceSpec spec_for(const std::string& source, std::vector<std::string> paths) {
  PairSourceSpec spec;
  spec.source = source;
  spec.paths = std::move(paths);
  spec.val_fraction = 0;  // counts tests see every example in train
  spec.recipe_file = "recipe.toml";
  return spec;
}

std::vector<std::string> texts_of(const PairExample& ex) {
  std::vector<std::string> t = {ex.anchor, ex.positive};
  t.insert(t.end(), ex.negatives.begin(), ex.negatives.end());
  return t;
}

// --- CSV / TSV readers -----------------------------------------------------------------------------------------

TEST(Csv, QuotedFieldsHoldCommasAndDoubledQuotesAcrossCrlf) {
  const auto rows = read_rows("a,\"b, c\",\"say \"\"hi\"\"\"\r\n\"\",x,\r\n5\" pipe,\"\",z", RowFormat::csv);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].fields, (std::vector<std::string>{"a", "b, c", "say \"hi\""}));
  EXPECT_EQ(rows[1].fields, (std::vector<std::string>{"", "x", ""}));
  EXPECT_EQ(rows[2].fields, (std::vector<std::string>{"5\" pipe", "", "z"}));  // a quote inside a field is literal
  for (const auto& r : rows) EXPECT_EQ(r.error, "");
  EXPECT_EQ(rows[2].line, 3);
}

TEST(Csv, QuotedNewlineKeepsTheFileLineNumbers) {
  const auto rows = read_rows("\xEF\xBB\xBFh1,h2\n\n\"two\nlines\",b\r\nc,d\n", RowFormat::csv);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].fields, (std::vector<std::string>{"h1", "h2"}));  // the byte order mark is gone
  EXPECT_EQ(rows[1].fields, (std::vector<std::string>{"two\nlines", "b"}));
  EXPECT_EQ(rows[1].line, 3);  // line 2 is blank
  EXPECT_EQ(rows[2].line, 5);
}

TEST(Csv, MalformedQuotesAreReportedRows) {
  const auto rows = read_rows("\"a\"b,c\nok,1\n\"never closed,2\nx,3\n", RowFormat::csv);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].line, 1);
  EXPECT_EQ(rows[0].error, "text after the closing quote of field 1 (a quote inside a quoted field must be doubled)");
  EXPECT_EQ(rows[1].fields, (std::vector<std::string>{"ok", "1"}));
  EXPECT_EQ(rows[1].error, "");
  EXPECT_EQ(rows[2].line, 3);
  EXPECT_EQ(rows[2].error, "quoted field 1 (opened on line 3) is never closed");
}

TEST(Tsv, SplitsOnTabsAndStripsTheCarriageReturn) {
  const auto rows = read_rows("q\tc\tscore\r\n\r\n1\t\"x\"\t1\r\n2\t\t", RowFormat::tsv);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].fields, (std::vector<std::string>{"q", "c", "score"}));
  EXPECT_EQ(rows[1].fields, (std::vector<std::string>{"1", "\"x\"", "1"}));  // no quoting in TSV
  EXPECT_EQ(rows[1].line, 3);
  EXPECT_EQ(rows[2].fields, (std::vector<std::string>{"2", "", ""}));
}

TEST(BadRows, StrictThrowsTheFirstAndLenientKeepsFiveMessages) {
  BadRows strict(true, "data.path", "fix it");
  EXPECT_EQ(user_error_message([&] { strict.add("f.tsv", 7, "broken"); }), "f.tsv:7: key 'data.path': broken (fix it)");
  BadRows lenient(false, "data.path", "fix it");
  for (int i = 1; i <= 7; ++i) lenient.add("f.tsv", i, "broken");
  EXPECT_EQ(lenient.count(), 7);
  ASSERT_EQ(lenient.messages().size(), 5u);
  EXPECT_EQ(lenient.messages()[4], "f.tsv:5: broken");
}

// --- source "pairs" --------------------------------------------------------------------------------------------

TEST(Pairs, TsvDefaultColumnsAreAnchorPositiveAndNegativeStar) {
  const PairSet set = load_pairs(spec_for("pairs", {kFixtures + "/good.tsv"}));
  ASSERT_EQ(set.train.size(), 3u);
  EXPECT_EQ(set.bad_rows, 0);
  EXPECT_EQ(set.train[0].anchor, "A cat sits on the mat.");  // "\r" of the CRLF line is not part of any field
  EXPECT_EQ(set.train[0].negatives, (std::vector<std::string>{"A dog runs in the park."}));
  EXPECT_EQ(set.train[1].anchor, "She plays \"the\" violin.");
  EXPECT_EQ(set.train[2].anchor, "Caf\xC3\xA9 au lait");
  EXPECT_EQ(set.train[2].negatives, (std::vector<std::string>{"Tea with lemon"}));  // last line without newline
  EXPECT_EQ(set.description, "pairs: 3 examples with 1 negative from 1 file; train 3, val 0");
}

TEST(Pairs, CsvQuotedFieldsWithCommasAndQuotes) {
  const PairSet set = load_pairs(spec_for("pairs", {kFixtures + "/good.csv"}));
  ASSERT_EQ(set.train.size(), 2u);
  EXPECT_EQ(set.train[0].anchor, "Paris, France");
  EXPECT_EQ(set.train[0].positive, "the capital of France, \"la ville lumi\xC3\xA8re\"");
  EXPECT_EQ(set.train[0].negatives, (std::vector<std::string>{"London", "Berlin"}));
  EXPECT_EQ(set.train[1].negatives, (std::vector<std::string>{"n1", "n2"}));
}

TEST(Pairs, ExplicitColumnsPickAndOrderThem) {
  PairSourceSpec spec = spec_for("pairs", {kFixtures + "/good.tsv"});
  spec.columns = {"positive", "anchor"};
  const PairSet set = load_pairs(spec);
  ASSERT_EQ(set.train.size(), 3u);
  EXPECT_EQ(set.train[0].anchor, "A cat is sitting on a mat.");
  EXPECT_EQ(set.train[0].positive, "A cat sits on the mat.");
  EXPECT_TRUE(set.train[0].negatives.empty());
}

TEST(Pairs, BadTsvRowsAreSkippedCountedAndNamed) {
  const std::string file = kFixtures + "/bad.tsv";
  const PairSet set = load_pairs(spec_for("pairs", {file}));
  // Good: lines 2 and 8. Bad: 3, 4, 5, 6, 9, 10 (line 7 is blank, which is no row).
  ASSERT_EQ(set.train.size(), 2u);
  EXPECT_EQ(set.train[1].anchor, "a6");
  EXPECT_EQ(set.bad_rows, 6);
  ASSERT_EQ(set.bad_row_messages.size(), 5u);  // only the first five are kept
  EXPECT_EQ(set.bad_row_messages[0], file + ":3: row has 2 fields, the header has 3");
  EXPECT_EQ(set.bad_row_messages[1], file + ":4: row has 4 fields, the header has 3");
  EXPECT_EQ(set.bad_row_messages[2], file + ":5: column 'positive' is empty");
  EXPECT_EQ(set.bad_row_messages[3], file + ":6: invalid UTF-8 in column 'positive' (byte 1 of the field)");
  EXPECT_EQ(set.bad_row_messages[4], file + ":9: column 'positive' is empty");  // blank counts as empty
  EXPECT_TRUE(contains(set.description, "6 bad rows skipped")) << set.description;
}

TEST(Pairs, BadJsonlLinesAreSkippedCountedAndNamed) {
  const std::string file = kFixtures + "/bad.jsonl";
  const PairSet set = load_pairs(spec_for("pairs", {file}));
  ASSERT_EQ(set.train.size(), 2u);
  EXPECT_EQ(set.train[0].negatives, (std::vector<std::string>{"n1"}));
  EXPECT_EQ(set.train[1].anchor, "a8");  // keys in another order are fine
  EXPECT_EQ(set.bad_rows, 6);
  ASSERT_EQ(set.bad_row_messages.size(), 5u);
  EXPECT_EQ(set.bad_row_messages[0], file + ":2: not valid JSON");
  EXPECT_EQ(set.bad_row_messages[1], file + ":3: field 'positive' is not a string");
  EXPECT_EQ(set.bad_row_messages[2], file + ":4: no field 'positive'");
  // `{"anchor": "a5", "positive": "p` is 31 bytes; then 0xC3 0x28, a lead byte without its continuation.
  EXPECT_EQ(set.bad_row_messages[3], file + ":5: invalid UTF-8 at byte 31 of the line");
  EXPECT_EQ(set.bad_row_messages[4], file + ":6: not a JSON object");
  // The sixth (line 7, an empty negative) is counted, not kept.
}

TEST(Pairs, StrictModeStopsAtTheFirstBadRow) {
  PairSourceSpec spec = spec_for("pairs", {kFixtures + "/bad.tsv"});
  spec.strict = true;
  EXPECT_EQ(user_error_message([&] { load_pairs(spec); }),
            kFixtures + "/bad.tsv:3: key 'data.path': row has 2 fields, the header has 3 (fix or remove the row, or "
                        "set data.strict = false in recipe.toml to skip bad rows)");
  spec.paths = {kFixtures + "/bad.jsonl"};
  EXPECT_EQ(user_error_message([&] { load_pairs(spec); }),
            kFixtures + "/bad.jsonl:2: key 'data.path': not valid JSON (fix or remove the row, or set data.strict = "
                        "false in recipe.toml to skip bad rows)");
}

TEST(Pairs, MissingColumnIsAnErrorEvenWhenNotStrict) {
  const std::string file = kFixtures + "/missing_column.tsv";
  const std::string message = user_error_message([&] { load_pairs(spec_for("pairs", {file})); });
  EXPECT_TRUE(contains(message, "recipe.toml: key 'data.columns': '" + file +
                                    "' has no column 'anchor' (its header's columns: 'query', 'doc')"))
      << message;
  PairSourceSpec spec = spec_for("pairs", {kFixtures + "/good.tsv"});
  spec.columns = {"anchor", "positive", "negative"};
  EXPECT_TRUE(contains(user_error_message([&] { load_pairs(spec); }), "has no column 'negative'"));
  spec.paths = {kFixtures + "/bad.jsonl"};  // JSONL: the first object's keys are the header
  spec.columns = {"anchor", "text"};
  EXPECT_TRUE(contains(user_error_message([&] { load_pairs(spec); }),
                       "has no column 'text' (its first object's fields: 'anchor', 'positive', 'negative_1', 'id')"));
}

TEST(Pairs, UnreadableEmptyOrMismatchedFilesNameTheKey) {
  EXPECT_EQ(user_error_message([&] { load_pairs(spec_for("pairs", {kFixtures + "/nope.tsv"})); }),
            "recipe.toml: key 'data.path': cannot read '" + kFixtures + "/nope.tsv' (check the path)");
  EXPECT_EQ(user_error_message([&] { load_pairs(spec_for("pairs", {kFixtures + "/empty.tsv"})); }),
            "recipe.toml: key 'data.path': '" + kFixtures + "/empty.tsv' is empty");
  EXPECT_TRUE(contains(user_error_message([&] {
                         load_pairs(spec_for("pairs", {kFixtures + "/good.tsv", kFixtures + "/no_negatives.tsv"}));
                       }),
                       "key 'data.columns': '" + kFixtures + "/good.tsv' gives 1 negative per example"));
  EXPECT_TRUE(contains(user_error_message([&] { load_pairs(spec_for("nli", {})); }), "key 'data.source'"));
}

TEST(Pairs, PairTextsAreDistinctInFirstSeenOrder) {
  const std::vector<PairExample> ex = {{"a", "b", {"c"}}, {"b", "d", {"a"}}, {"e", "e", {}}};
  EXPECT_EQ(pair_texts(ex), (std::vector<std::string>{"a", "b", "c", "d", "e"}));
}

// --- the validation split --------------------------------------------------------------------------------------

// Examples over a small vocabulary of texts, so that many share one.
std::vector<std::string> overlapping_lines(int n) {
  std::vector<std::string> lines = {"anchor\tpositive\tnegative"};
  for (int i = 0; i < n; ++i)
    lines.push_back("t" + std::to_string(i % 37) + "\tu" + std::to_string(i) + "\tt" + std::to_string((i * 7) % 53));
  return lines;
}

// Writes `lines` to a file of this process in the temp folder; returns its path.
std::string write_temp_tsv(const std::string& name, const std::vector<std::string>& lines) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("spread_test_pairs_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream out(file);
  for (const auto& line : lines) out << line << "\n";
  return file.string();
}

TEST(Split, ValSharesNoTextWithTrainAndDropsAreCounted) {
  const std::string file = write_temp_tsv("overlap.tsv", overlapping_lines(300));
  PairSourceSpec spec = spec_for("pairs", {file});
  spec.val_fraction = 0.1;
  spec.seed = 3;
  const PairSet set = load_pairs(spec);
  spec.seed = 4;  // another seed, another split
  const PairSet other = load_pairs(spec);
  std::filesystem::remove(file);
  EXPECT_NE(other.val[0].positive + other.val[1].positive, set.val[0].positive + set.val[1].positive);

  EXPECT_EQ(set.val.size(), 30u);  // ceil(0.1 * 300)
  EXPECT_EQ(set.train.size() + set.val.size() + static_cast<size_t>(set.dropped_for_overlap), 300u);
  EXPECT_GT(set.dropped_for_overlap, 0);
  std::set<std::string> val_texts;
  for (const auto& ex : set.val)
    for (const auto& t : texts_of(ex)) val_texts.insert(t);
  for (const auto& ex : set.train)
    for (const auto& t : texts_of(ex)) EXPECT_EQ(val_texts.count(t), 0u) << t;
  EXPECT_TRUE(contains(set.description, "train examples dropped: they share a text with val")) << set.description;
}

TEST(Split, ValSizeIsCeilOfFractionTimesCount) {
  std::vector<std::string> lines = {"anchor\tpositive"};
  for (int i = 0; i < 100; ++i) lines.push_back("a" + std::to_string(i) + "\tp" + std::to_string(i));
  const std::string file = write_temp_tsv("distinct.tsv", lines);
  PairSourceSpec spec = spec_for("pairs", {file});
  spec.val_fraction = 0.07;  // 0.07 * 100 is 7.000000000000001 in doubles: still 7
  EXPECT_EQ(load_pairs(spec).val.size(), 7u);
  spec.val_fraction = 0.095;  // ceil(9.5)
  EXPECT_EQ(load_pairs(spec).val.size(), 10u);
  spec.val_fraction = 0.001;  // any positive fraction gives at least one
  EXPECT_EQ(load_pairs(spec).val.size(), 1u);
  std::filesystem::remove(file);
}

TEST(Split, SickValSharesNoTextWithTrain) {
  SHARED_DATA_OR_SKIP(file, "sick/SICK.txt");
  PairSourceSpec spec = spec_for("sick", {file});
  spec.val_fraction = 0.2;
  const PairSet set = load_pairs(spec);
  std::set<std::string> val_texts;
  for (const auto& ex : set.val)
    for (const auto& t : texts_of(ex)) val_texts.insert(t);
  int64_t shared = 0;
  for (const auto& ex : set.train)
    for (const auto& t : texts_of(ex)) shared += static_cast<int64_t>(val_texts.count(t));
  EXPECT_EQ(shared, 0);
  EXPECT_EQ(set.val.size(), 284u);  // ceil(0.2 * 1,417)
  EXPECT_EQ(set.train.size() + set.val.size() + static_cast<size_t>(set.dropped_for_overlap), 1417u);
}

TEST(Split, ValFractionOutsideTheRangeIsAnError) {
  PairSourceSpec spec = spec_for("pairs", {kFixtures + "/good.tsv"});
  spec.val_fraction = 1;
  EXPECT_TRUE(contains(user_error_message([&] { load_pairs(spec); }), "key 'data.val_fraction': must be in [0, 1)"));
}

// --- the batch sampler -----------------------------------------------------------------------------------------

std::vector<PairExample> distinct_examples(int n) {
  std::vector<PairExample> ex;
  for (int i = 0; i < n; ++i) ex.push_back({"a" + std::to_string(i), "p" + std::to_string(i), {}});
  return ex;
}

TEST(Sampler, EpochOrderIsAPermutation) {
  const PairBatchSampler sampler(distinct_examples(50), 7);
  std::vector<int64_t> order = sampler.epoch_order(3);
  EXPECT_NE(order, sampler.epoch_order(4));
  std::sort(order.begin(), order.end());
  for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
}

TEST(Sampler, SameStepAndMicroGiveTheSameBatch) {
  const auto ex = distinct_examples(100);
  const PairBatchSampler a(ex, 11), b(ex, 11);
  EXPECT_EQ(a.sample(8, 5, 1, 2), a.sample(8, 5, 1, 2));
  EXPECT_EQ(a.sample(8, 5, 1, 2), b.sample(8, 5, 1, 2));  // a fresh sampler, as after a resume
  EXPECT_NE(a.sample(8, 5, 1, 2), a.sample(8, 6, 1, 2));
  EXPECT_NE(a.sample(8, 5, 0, 2), a.sample(8, 5, 1, 2));
  EXPECT_NE(a.sample(8, 5, 1, 2), PairBatchSampler(ex, 12).sample(8, 5, 1, 2));
}

TEST(Sampler, ConsecutiveBatchesOfDistinctExamplesTileTheEpoch) {
  const PairBatchSampler sampler(distinct_examples(40), 1);
  const std::vector<int64_t> order = sampler.epoch_order(0);
  std::vector<int64_t> walked;
  for (uint64_t step = 0; step < 5; ++step) {
    const auto batch = sampler.sample(8, step, 0, 1);
    walked.insert(walked.end(), batch.begin(), batch.end());
  }
  EXPECT_EQ(walked, order);
}

TEST(Sampler, NoTextTwiceInABatch) {
  // 200 examples over 30 anchors and 45 positives: most pairs of examples share a text.
  std::vector<PairExample> ex;
  for (int i = 0; i < 200; ++i)
    ex.push_back({"a" + std::to_string(i % 30), "p" + std::to_string(i % 45), {"n" + std::to_string(i % 17)}});
  const PairBatchSampler sampler(ex, 5);
  for (uint64_t step = 0; step < 20; ++step) {
    const auto batch = sampler.sample(12, step, 0, 1);
    std::set<std::string> seen;
    for (int64_t i : batch)
      for (const auto& t : texts_of(ex[i])) EXPECT_TRUE(seen.insert(t).second) << "step " << step << ": " << t;
    // A short batch is maximal (every example was tried), and one chosen example rules out at most 7 + 5 + 12 - 2
    // = 22 of the 200 (those sharing its anchor, positive or negative), so at least ceil(200 / 22) = 10 fit.
    EXPECT_GE(batch.size(), 10u);
    EXPECT_LE(batch.size(), 12u);
  }
  // At most 17 examples fit (one per negative): asking for more gives a maximal batch, not an endless walk.
  EXPECT_LE(sampler.sample(64, 0, 0, 1).size(), 17u);
}

TEST(Sampler, BatchCrossesIntoTheNextEpochAsWalkedByHand) {
  // 10 examples; examples 3 and 8 share their anchor. Batch 4 at step 2 starts at position 8 of epoch 0.
  std::vector<PairExample> ex = distinct_examples(10);
  ex[8].anchor = ex[3].anchor;
  const PairBatchSampler sampler(ex, 9);
  const auto e0 = sampler.epoch_order(0), e1 = sampler.epoch_order(1);
  std::vector<int64_t> expected;
  auto conflicts = [&](int64_t i) {
    for (int64_t j : expected)
      if (i == j || ex[i].anchor == ex[j].anchor) return true;
    return false;
  };
  for (int64_t i : {e0[8], e0[9], e1[0], e1[1], e1[2], e1[3], e1[4], e1[5]}) {
    if (expected.size() == 4) break;
    if (!conflicts(i)) expected.push_back(i);
  }
  EXPECT_EQ(sampler.sample(4, 2, 0, 1), expected);
  // The same position reached as (step 1, micro 0) of 2 micro-steps.
  EXPECT_EQ(sampler.sample(4, 1, 0, 2), expected);
}

TEST(Sampler, ShortBatchOnlyWhenTheSetHasNoMoreDistinctExamples) {
  std::vector<PairExample> ex = {{"x", "p1", {}}, {"x", "p2", {}}, {"y", "p3", {}}};
  const PairBatchSampler sampler(ex, 0);
  for (uint64_t step = 0; step < 6; ++step) EXPECT_EQ(sampler.sample(4, step, 0, 1).size(), 2u);
}

// --- stsb, sick, beir, wordnet: the real datasets (under the data root; skipped without it) -------------------

TEST(Stsb, PairsWithScoreAtLeastFour) {
  SHARED_DATA_OR_SKIP(file, "stsb/stsb-en-train.csv");
  // Independent count: the score is the text after the last comma of each line (no sentence holds a newline);
  // awk -F, '$NF >= 4 {n++} END {print NR, n}' stsb-en-train.csv prints "5749 1406".
  std::ifstream in(file);
  ASSERT_TRUE(in) << file;
  std::string line;
  int64_t rows = 0, expected = 0;
  while (std::getline(in, line)) {
    ++rows;
    if (std::stod(line.substr(line.rfind(',') + 1)) >= 4) ++expected;
  }
  EXPECT_EQ(rows, 5749);
  EXPECT_EQ(expected, 1406);
  const PairSet set = load_pairs(spec_for("stsb", {file}));
  EXPECT_EQ(static_cast<int64_t>(set.train.size()), expected);
  EXPECT_EQ(set.bad_rows, 0);
  EXPECT_EQ(set.train[0].anchor, "A plane is taking off.");  // line 1, score 5.0
  EXPECT_EQ(set.description, "stsb: 1,406 pairs (score >= 4) of 5,749 rows; train 1,406, val 0");
}

TEST(Sick, EntailmentPairsAndHardNegatives) {
  SHARED_DATA_OR_SKIP(file, "sick/SICK.txt");
  // Python over SICK.txt's TRAIN+TRIAL rows: 1,417 ENTAILMENT pairs; 310 of their anchors have a CONTRADICTION
  // partner (as A, or as B with entailment_BA = B_contradicts_A).
  const PairSet all = load_pairs(spec_for("sick", {file}));
  EXPECT_EQ(all.train.size(), 1417u);
  EXPECT_EQ(all.bad_rows, 0);
  for (const auto& ex : all.train) EXPECT_TRUE(ex.negatives.empty());  // not every pair has one
  EXPECT_TRUE(contains(all.description, "no hard negatives (310 have one")) << all.description;

  PairSourceSpec spec = spec_for("sick", {file});
  spec.hard_negatives = true;
  const PairSet hard = load_pairs(spec);
  EXPECT_EQ(hard.train.size(), 310u);
  for (const auto& ex : hard.train) ASSERT_EQ(ex.negatives.size(), 1u);
  // SICK.txt line 871 (pair 876): ENTAILMENT "...is full of people" -> "A lot of people are in an ice skating park".
  // Its first contradiction is line 863 (pair 868), where it is sentence_B of "...is empty" (B_contradicts_A);
  // line 869 (pair 874) comes later.
  bool found = false;
  for (const auto& ex : hard.train) {
    if (ex.anchor != "An ice skating rink placed outdoors is full of people") continue;
    if (ex.positive != "A lot of people are in an ice skating park") continue;
    EXPECT_EQ(ex.negatives[0], "An ice skating rink placed outdoors is empty");
    found = true;
  }
  EXPECT_TRUE(found);
}

TEST(Beir, ScifactTrainCountsMatchItsReadme) {
  SHARED_DATA_OR_SKIP(dir, "scifact-train");
  const BeirData data = load_beir(dir);
  EXPECT_EQ(data.corpus_ids.size(), 5183u);
  EXPECT_EQ(data.query_ids.size(), 809u);
  size_t qrels = 0;
  for (const auto& [query, docs] : data.qrels) qrels += docs.size();
  EXPECT_EQ(qrels, 919u);
  const PairSet set = load_pairs(spec_for("beir", {dir}));
  EXPECT_EQ(set.train.size(), 919u);
  EXPECT_EQ(set.description, "beir: 919 pairs (809 queries, 5,183 documents, train.tsv); train 919, val 0");
}

TEST(Beir, MiniFolderKeepsRelevantKnownPairs) {
  const std::string dir = kFixtures + "/beir_mini";
  // Strict: the duplicate _id on line 4 of corpus.jsonl stops the load.
  EXPECT_EQ(user_error_message([&] { load_beir(dir); }),
            dir + "/corpus.jsonl:4: duplicate _id 'd1' (first on line 1)");
  PairSourceSpec spec = spec_for("beir", {dir});
  const PairSet set = load_pairs(spec);  // qrels/test.tsv is the only qrels file
  EXPECT_EQ(set.bad_rows, 3);  // the duplicate, an unknown corpus-id, an unknown query-id
  EXPECT_EQ(set.bad_row_messages[1], dir + "/qrels/test.tsv:6: corpus-id 'missing' is not in corpus.jsonl");
  EXPECT_EQ(set.bad_row_messages[2], dir + "/qrels/test.tsv:7: query-id 'q9' is not in queries.jsonl");
  // q1 -> {"2", "d1"} (corpus ids in sorted order), q2 -> {"d3"}; q3's only judgement has score 0.
  ASSERT_EQ(set.train.size(), 3u);
  EXPECT_EQ(set.train[0].anchor, "first query");
  EXPECT_EQ(set.train[0].positive, "Only text.");  // integer _id 2, empty title
  EXPECT_EQ(set.train[1].positive, "Title one Text one.");
  EXPECT_EQ(set.train[2].anchor, "second query");
  EXPECT_EQ(set.train[2].positive, "No title key.");
}

TEST(Sts, ReadsStsbCsvAndSickTestRows) {
  SHARED_DATA_OR_SKIP(stsb_dev, "stsb/stsb-en-dev.csv");
  SHARED_DATA_OR_SKIP(sick_file, "sick/SICK.txt");
  const auto dev = load_sts_csv(stsb_dev);
  EXPECT_EQ(dev.size(), 1500u);  // its README
  const auto sick = load_sts_csv(sick_file);
  EXPECT_EQ(sick.size(), 4906u);  // SemEval_set TEST, its README
  for (const auto& p : sick) {
    EXPECT_GE(p.score, 1.0);
    EXPECT_LE(p.score, 5.0);
  }
}

TEST(Sts, ReadsAHeaderAndNamesABadRow) {
  const auto small = load_sts_csv(kFixtures + "/sts_header.csv");
  ASSERT_EQ(small.size(), 2u);
  EXPECT_EQ(small[0].a, "A man, smiling.");
  EXPECT_DOUBLE_EQ(small[0].score, 4.6);
  EXPECT_TRUE(
      contains(user_error_message([&] { load_sts_csv(kFixtures + "/good.tsv"); }), "good.tsv:1: row has 1 fields"));
}

// --- the same readers on extracts of those files (tests/data/shared_extracts), which every checkout has ----------

const std::string kExtracts = std::string(SPREAD_TEST_DATA_DIR) + "/shared_extracts";

TEST(Stsb, ExtractPairsWithScoreAtLeastFour) {
  // awk -F, '$NF >= 4 {n++} END {print NR, n}' stsb-en-train_extract.csv prints "30 16".
  const PairSet set = load_pairs(spec_for("stsb", {kExtracts + "/stsb-en-train_extract.csv"}));
  EXPECT_EQ(set.train.size(), 16u);
  EXPECT_EQ(set.bad_rows, 0);
  EXPECT_EQ(set.train[0].anchor, "A plane is taking off.");
  EXPECT_EQ(set.train[0].positive, "An air plane is taking off.");
}

TEST(Sick, ExtractEntailmentPairsAndHardNegatives) {
  // Lines 860-880 of SICK.txt (pairs 865-885): TRAIN+TRIAL ENTAILMENT pairs 867, 870, 876, 880 (875 and 877 are
  // TEST). Two anchors have a TRAIN contradiction: 876's ("An ice skating rink placed outdoors is full of people") is
  // sentence_B of 868 ("...is empty", B_contradicts_A), before 874 where it is sentence_A; 880's ("The girl in the
  // blue and white uniform is cheering") is sentence_B of 881 ("...isn't cheering", B_contradicts_A).
  const std::string file = kExtracts + "/SICK_extract.txt";
  const PairSet all = load_pairs(spec_for("sick", {file}));
  EXPECT_EQ(all.train.size(), 4u);
  EXPECT_EQ(all.bad_rows, 0);
  PairSourceSpec spec = spec_for("sick", {file});
  spec.hard_negatives = true;
  const PairSet hard = load_pairs(spec);
  ASSERT_EQ(hard.train.size(), 2u);
  EXPECT_EQ(hard.train[0].anchor, "An ice skating rink placed outdoors is full of people");
  EXPECT_EQ(hard.train[0].positive, "A lot of people are in an ice skating park");
  ASSERT_EQ(hard.train[0].negatives.size(), 1u);
  EXPECT_EQ(hard.train[0].negatives[0], "An ice skating rink placed outdoors is empty");
  EXPECT_EQ(hard.train[1].anchor, "The girl in the blue and white uniform is cheering");
  ASSERT_EQ(hard.train[1].negatives.size(), 1u);
  EXPECT_EQ(hard.train[1].negatives[0], "The girl in the blue and white uniform isn't cheering");
}

TEST(Sts, ReadsTheTestRowsOfASickExtract) {
  // SemEval_set TEST in the extract: pairs 865, 871, 875, 877, 884, 885; pair 865 has relatedness 3.5, pair 885
  // (the last line, without CRLF) 3.3.
  const auto rows = load_sts_csv(kExtracts + "/SICK_extract.txt");
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[0].a, "A lot of people are in an ice skating park");
  EXPECT_EQ(rows[0].b, "There aren't many people in the ice skating park");
  EXPECT_DOUBLE_EQ(rows[0].score, 3.5);
  EXPECT_DOUBLE_EQ(rows[5].score, 3.3);
}

TEST(WordnetPairs, DefinitionExampleAndLemmaDefinitionPairs) {
  if (!std::filesystem::exists("/usr/share/wordnet/data.noun")) GTEST_SKIP() << "wordnet-base is not installed";
  const PairSet set = load_pairs(spec_for("wordnet_pairs", {}));
  // Debian's wordnet-base 3.0 (see shared/data/debian-packages/README.md): 117,659 synsets, all with lemmas and a
  // definition, and 48,339 quoted examples.
  EXPECT_TRUE(contains(set.description, "(48,339 definition-example, 117,659 lemmas-definition)")) << set.description;
  EXPECT_EQ(set.train.size(), 48339u + 117659u);
}

}  // namespace
}  // namespace spread
