// Token shards (data/token_file.h): llm.c's layout read from bytes written here by hand, several files read as one
// stream exactly as the same tokens in one file, the refusals of bad shards, an LM trained from shards
// (data.shards), resumed bitwise, and a weighted mixture of shard sets ([[data.mix]]): its draws, its bitwise resume
// after kill -9, and the record that refuses a resume over changed shards.
#include <gtest/gtest.h>
#include "test_paths.h"
#include <torch/torch.h>

#include <fmt/format.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "reliability_run.h"
#include "shared_data.h"
#include "spread/data/loader.h"
#include "spread/data/token_file.h"
#include "spread/log/metrics_log.h"
#include "spread/run/checkpoint.h"
#include "spread/util/error.h"

namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("spread_shards_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// llm.c's write_datafile: 256 int32 (magic 20240520, version, count), then the tokens as uint16 (version 1).
void write_llmc_shard(const fs::path& path, const std::vector<uint16_t>& tokens, int32_t version = 1,
                      std::optional<int32_t> count = std::nullopt, int32_t magic = 20240520) {
  int32_t header[256] = {};
  header[0] = magic;
  header[1] = version;
  header[2] = count.value_or(int32_t(tokens.size()));
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header), sizeof header);
  out.write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * 2));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const spread::UserError& e) {
    return e.what();
  }
  return "";
}

// The model the training tests here take: one layer of width 16, block 32, batches of 4.
constexpr const char* kTinyLm =
    "--set model.n_layer=1 --set model.n_head=2 --set model.n_embd=16 --set model.block_size=32 "
    "--set train.batch_size=4";

// A tokenizer.json of 1,024 ids ("t0" ... "t1023", BPE without merges), for the tests that train on shards of
// ids below that and never encode text: they need no data set from outside.
std::string tiny_tokenizer(const fs::path& dir) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int i = 0; i < 1024; ++i) vocab["t" + std::to_string(i)] = i;
  const nlohmann::json tokenizer = {
      {"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", nlohmann::json::array()},
      {"normalizer", nullptr}, {"pre_tokenizer", nullptr}, {"post_processor", nullptr}, {"decoder", nullptr},
      {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"vocab", vocab},
                 {"merges", nlohmann::json::array()}}}};
  const fs::path path = dir / "tokenizer.json";
  std::ofstream(path) << tokenizer.dump();
  return path.string();
}

// A stream that a tiny model can learn: counting up in steps of 3 modulo 400, ids 100 to 499.
std::vector<uint16_t> pattern(size_t n, size_t offset) {
  std::vector<uint16_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = uint16_t((3 * (i + offset)) % 400 + 100);
  return t;
}

}  // namespace

TEST(Shards, AnLlmcShardReadsAsWritten) {
  const fs::path dir = scratch("read");
  const std::vector<uint16_t> tokens = {50256, 0, 65535, 7, 1234};
  write_llmc_shard(dir / "a.bin", tokens);
  const spread::TokenFile f((dir / "a.bin").string());
  ASSERT_EQ(f.size(), tokens.size());
  EXPECT_EQ(f.source_bytes(), 0u) << "llm.c shards carry no byte count";
  for (size_t i = 0; i < tokens.size(); ++i) EXPECT_EQ(f[i], int32_t(tokens[i])) << i;
  // spread's writer: version 1 when ids fit in 16 bits, version 2 (uint32) past them.
  spread::write_token_shard((dir / "b.bin").string(), {1, 2, 3});
  spread::write_token_shard((dir / "c.bin").string(), {70000, 1});
  int32_t header[3];
  std::ifstream((dir / "c.bin"), std::ios::binary).read(reinterpret_cast<char*>(header), sizeof header);
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 2);
  EXPECT_EQ(header[2], 2);
  EXPECT_EQ(fs::file_size(dir / "b.bin"), 1024u + 3 * 2);
  EXPECT_EQ(spread::TokenFile((dir / "c.bin").string())[0], 70000);
  fs::remove_all(dir);
}

TEST(Shards, BadShardsAreRefusedNamingTheFile) {
  const fs::path dir = scratch("bad");
  write_llmc_shard(dir / "magic.bin", {1, 2}, 1, std::nullopt, 20240521);
  write_llmc_shard(dir / "count.bin", {1, 2}, 1, 3);
  write_llmc_shard(dir / "version.bin", {1, 2}, 3);
  write_llmc_shard(dir / "negative.bin", {1, 2}, 1, -5);
  std::ofstream(dir / "short.bin") << "tiny";
  for (const char* name : {"magic.bin", "count.bin", "version.bin", "negative.bin", "short.bin"}) {
    const std::string path = (dir / name).string();
    const std::string e = error_of([&] { spread::TokenFile f(path); });
    EXPECT_NE(e.find(path), std::string::npos) << name << ": " << e;
  }
  // An id past the vocabulary is named with its file and position when it is read.
  write_llmc_shard(dir / "ok.bin", {1, 2, 3, 4});
  write_llmc_shard(dir / "high.bin", {5, 6, 999, 8});
  const spread::TokenFile two({(dir / "ok.bin").string(), (dir / "high.bin").string()}, 500, "data.shards");
  std::vector<int64_t> out(8);
  const std::string e = error_of([&] { two.copy(0, 8, out.data()); });
  EXPECT_NE(e.find((dir / "high.bin").string()), std::string::npos) << e;
  EXPECT_NE(e.find("token 2 is id 999"), std::string::npos) << e;
  EXPECT_NE(e.find("data.shards"), std::string::npos) << e;
  fs::remove_all(dir);
}

// Three shards read as one stream give every window exactly as one file of the same tokens does.
TEST(Shards, SeveralFilesAreOneStream) {
  const fs::path dir = scratch("stream");
  const auto all = pattern(3000, 0);
  const std::vector<size_t> cuts = {0, 1000, 1001, 3000};  // a one-token shard in the middle
  std::vector<std::string> paths;
  for (size_t k = 0; k + 1 < cuts.size(); ++k) {
    paths.push_back((dir / fmt::format("train_{:06d}.bin", k)).string());
    write_llmc_shard(paths.back(), std::vector<uint16_t>(all.begin() + int64_t(cuts[k]), all.begin() + int64_t(cuts[k + 1])));
  }
  spread::write_token_file((dir / "one.bin").string(), std::vector<int32_t>(all.begin(), all.end()), 3000);
  const spread::TokenFile shards(paths, 50257, "data.shards"), one((dir / "one.bin").string());
  ASSERT_EQ(shards.size(), one.size());
  ASSERT_EQ(shards.files(), 3u);
  const spread::WindowSampler a(shards, 64, 7), b(one, 64, 7);
  for (uint64_t step = 0; step < 50; ++step) {
    const auto x = a.sample(8, step), y = b.sample(8, step);
    ASSERT_TRUE(torch::equal(x.x, y.x)) << "step " << step;
    ASSERT_TRUE(torch::equal(x.y, y.y)) << "step " << step;
  }
  const int64_t windows = spread::count_windows(one, 64);
  for (int64_t w = 0; w < windows; w += 5) {
    const int64_t n = std::min<int64_t>(5, windows - w);
    ASSERT_TRUE(torch::equal(spread::sequential_batch(shards, 64, w, n).x, spread::sequential_batch(one, 64, w, n).x));
  }
  std::vector<int64_t> out(2);
  EXPECT_THROW(shards.copy(2999, 2, out.data()), std::out_of_range);
  fs::remove_all(dir);
}

TEST(Shards, AnLmTrainsFromShardsAndResumesBitwise) {
  const fs::path dir = scratch("train");
  const std::string tokenizer = tiny_tokenizer(dir);
  for (int k = 0; k < 3; ++k) write_llmc_shard(dir / fmt::format("fw_train_{:06d}.bin", k), pattern(4000, 4000 * k));
  write_llmc_shard(dir / "fw_val_000000.bin", pattern(2000, 99));
  std::ofstream(dir / "lm.toml") << "# every key from --set\n";
  auto train = [&](const std::string& name) {
    return spread::testing::run_spread_env(
        "", fmt::format("train {} --set run.name={} --set run.out_dir={} --set 'data.shards={}/fw_train_*.bin' "
                        "--set 'data.val_shards={}/fw_val_*.bin' --set tokenizer.kind=hf --set tokenizer.path={} "
                        "{} --set train.max_steps=8 --set train.eval_every=4 "
                        "--set train.ckpt_every=4 --set train.warmup_steps=1 --set train.log_every=1 "
                        "--set train.schedule=wsd --set train.optimizer=muon",
                        (dir / "lm.toml").string(), name, (dir / "runs").string(), dir.string(), dir.string(), tokenizer,
                        kTinyLm));
  };
  const auto straight = train("straight");
  ASSERT_EQ(straight.code, 0) << straight.output;
  EXPECT_NE(straight.output.find("in 3 shards"), std::string::npos) << straight.output;
  const auto broken = train("broken");
  ASSERT_EQ(broken.code, 0) << broken.output;
  EXPECT_FALSE(fs::exists(dir / "runs" / "straight" / "train.bin")) << "the shards were copied into the run";
  for (const auto& path : spread::list_checkpoints((dir / "runs" / "broken").string()))
    if (path.find("step_00000004") == std::string::npos) fs::remove(path);
  const auto resumed =
      spread::testing::run_spread_env("", "train --resume " + (dir / "runs" / "broken").string());
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  auto losses = [&](const std::string& name) {
    std::vector<double> out;
    bool evaluated = false;
    for (const auto& j : spread::read_metrics((dir / "runs" / name / "metrics.jsonl").string())) {
      if (j.contains("loss") && !j.contains("event")) out.push_back(j["loss"].get<double>());
      if (j.contains("val_loss")) {
        evaluated = true;
        EXPECT_FALSE(j.contains("val_bpb")) << "shards have no byte count: " << j.dump();
      }
    }
    EXPECT_TRUE(evaluated) << name;
    return out;
  };
  const auto a = losses("straight"), b = losses("broken");
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b.size(), 8u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "step " << i + 1;
  EXPECT_LT(a.back(), a.front()) << "the pattern was not learnt at all";
  // `spread eval` measures the validation shards too.
  const auto eval = spread::testing::run_spread_env("", "eval --run " + (dir / "runs" / "straight").string());
  EXPECT_EQ(eval.code, 0) << eval.output;
  // A pattern that matches nothing is exit 2 naming the key.
  const auto none = spread::testing::run_spread_env(
      "", fmt::format("train {} --set run.out_dir={} --set 'data.shards={}/nothing_*.bin' "
                      "--set 'data.val_shards={}/fw_val_*.bin' --set tokenizer.kind=hf --set tokenizer.path={}",
                      (dir / "lm.toml").string(), (dir / "runs").string(), dir.string(), dir.string(), tokenizer));
  EXPECT_EQ(none.code, 2) << none.output;
  EXPECT_NE(none.output.find("data.shards"), std::string::npos) << none.output;
  fs::remove_all(dir);
}

// A mixture draws each window whole from one source, in proportion to the weights (a binomial count within four
// standard deviations), fixed by (seed, step, micro) and changed by the seed.
TEST(Shards, AMixtureDrawsEachSourceByItsWeight) {
  const fs::path dir = scratch("mix_weights");
  std::vector<int32_t> a(5000), b(3000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = int32_t(i % 100);          // ids 0..99
  for (size_t i = 0; i < b.size(); ++i) b[i] = int32_t(1000 + i % 100);   // ids 1000..1099
  spread::write_token_file((dir / "a.bin").string(), a, 0);
  spread::write_token_file((dir / "b.bin").string(), b, 0);
  const spread::TokenFile fa((dir / "a.bin").string()), fb((dir / "b.bin").string());
  const spread::WindowSampler mix({{&fa, 3.0}, {&fb, 1.0}}, 16, 11), again({{&fa, 3.0}, {&fb, 1.0}}, 16, 11),
      other_seed({{&fa, 3.0}, {&fb, 1.0}}, 16, 12);
  int64_t from_a = 0, windows = 0;
  for (uint64_t step = 0; step < 250; ++step) {
    const auto batch = mix.sample(16, step, step % 3);
    ASSERT_TRUE(torch::equal(batch.x, again.sample(16, step, step % 3).x)) << "step " << step;
    for (int64_t r = 0; r < 16; ++r, ++windows) {
      const auto x = batch.x[r], y = batch.y[r];
      const bool in_a = x[0].item<int64_t>() < 1000;
      from_a += in_a;
      // One source, consecutive tokens, the targets shifted by one.
      const int64_t first = x[0].item<int64_t>();
      for (int64_t t = 0; t < 16; ++t) {
        ASSERT_EQ(x[t].item<int64_t>(), (in_a ? 0 : 1000) + (first - (in_a ? 0 : 1000) + t) % 100);
        ASSERT_EQ(y[t].item<int64_t>(), (in_a ? 0 : 1000) + (first - (in_a ? 0 : 1000) + t + 1) % 100);
      }
    }
  }
  const double expected = 0.75 * double(windows), sd = std::sqrt(double(windows) * 0.75 * 0.25);
  EXPECT_NEAR(double(from_a), expected, 4 * sd) << from_a << " of " << windows << " windows from the 0.75 source";
  EXPECT_FALSE(torch::equal(mix.sample(16, 3).x, other_seed.sample(16, 3).x));
  EXPECT_THROW(spread::WindowSampler({{&fa, 1.0}, {&fb, 0.0}}, 16, 1), std::invalid_argument);
  fs::remove_all(dir);
}

namespace {

// Two shard sets of different patterns (a: counting up by 3 from 100, b: by 7 from 600), with validation shards.
struct MixFixture {
  fs::path dir;
  explicit MixFixture(const std::string& name) : dir(scratch(name)) {
    for (int k = 0; k < 2; ++k) write_llmc_shard(dir / fmt::format("a_train_{:06d}.bin", k), pattern(3000, 3000 * k));
    std::vector<uint16_t> b(4000);
    for (size_t i = 0; i < b.size(); ++i) b[i] = uint16_t((7 * i) % 300 + 600);
    write_llmc_shard(dir / "b_train_000000.bin", b);
    write_llmc_shard(dir / "val_000000.bin", pattern(2000, 99));
    std::ofstream(dir / "lm.toml") << "# every key from --set\n";
  }
  ~MixFixture() { fs::remove_all(dir); }
  // A constant learning rate (min_lr = lr): its course does not depend on max_steps, so a run resumed with another
  // max_steps is comparable step by step.
  std::string train(const std::string& name, const std::string& tokenizer, int64_t max_steps) const {
    return fmt::format(
        "train {} --set run.name={} --set run.out_dir={} "
        "--set 'data.mix=[{{shards = \"{}/a_train_*.bin\", weight = 0.7}}, {{shards = \"{}/b_train_*.bin\", "
        "weight = 0.3}}]' --set 'data.val_shards={}/val_*.bin' --set tokenizer.kind=hf --set tokenizer.path={} "
        "{} --set train.max_steps={} --set train.eval_every=0 --set train.ckpt_every=4 "
        "--set train.warmup_steps=0 --set train.lr=0.003 --set train.min_lr=0.003 --set train.log_every=1 "
        "--set run.threads=1",
        (dir / "lm.toml").string(), name, (dir / "runs").string(), dir.string(), dir.string(), dir.string(), tokenizer,
        kTinyLm, max_steps);
  }
  std::map<int64_t, double> losses(const std::string& name) const {
    std::map<int64_t, double> out;
    for (const auto& j : spread::read_metrics((dir / "runs" / name / "metrics.jsonl").string()))
      if (j.contains("loss") && !j.contains("event")) out[j["step"].get<int64_t>()] = j["loss"].get<double>();
    return out;
  }
};

}  // namespace

// The target: a run on a mixture of two shard sets, killed with -9 mid-run and resumed, gives the losses of
// one uninterrupted run, bitwise, step by step.
TEST(Shards, AMixtureResumesBitwiseAfterKillNine) {
  const MixFixture f("mix_kill");
  const std::string tokenizer = tiny_tokenizer(f.dir);
  using spread::testing::Background;
  int64_t at = -1;
  {
    Background killed(f.train("killed", tokenizer, 1000000), f.dir / "killed.log");
    ASSERT_TRUE(spread::testing::wait_for([&] { return spread::testing::newest_step(f.dir / "runs" / "killed") >= 8; }))
        << spread::testing::read_text(f.dir / "killed.log");
    ::kill(killed.pid(), SIGKILL);
    killed.wait();
    at = spread::testing::newest_step(f.dir / "runs" / "killed");
  }
  const int64_t until = at + 6;
  const auto resumed = spread::testing::run_spread_env(
      "", fmt::format("train --resume {} --set train.max_steps={}", (f.dir / "runs" / "killed").string(), until));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  const auto straight = spread::testing::run_spread_env("", f.train("straight", tokenizer, until));
  ASSERT_EQ(straight.code, 0) << straight.output;
  EXPECT_NE(straight.output.find("70.0% of the windows (data.mix[0].shards)"), std::string::npos) << straight.output;
  const auto a = f.losses("straight"), b = f.losses("killed");
  ASSERT_EQ(a.size(), size_t(until));
  ASSERT_EQ(b.size(), size_t(until));
  for (const auto& [step, loss] : a) EXPECT_EQ(loss, b.at(step)) << "step " << step << " (killed after " << at << ")";
}

// The run records its shards; a resume refuses a pattern that now names other files, or a shard whose bytes
// changed, naming the key or the file, and leaves the checkpoints as they were.
TEST(Shards, AResumeRefusesChangedShards) {
  const MixFixture f("mix_changed");
  const std::string tokenizer = tiny_tokenizer(f.dir);
  ASSERT_EQ(spread::testing::run_spread_env("", f.train("run", tokenizer, 4)).code, 0);
  const std::string run = (f.dir / "runs" / "run").string();
  const auto checkpoints = spread::list_checkpoints(run);
  ASSERT_FALSE(checkpoints.empty());
  auto resume = [&] { return spread::testing::run_spread_env("", "train --resume " + run + " --set train.max_steps=8"); };

  write_llmc_shard(f.dir / "b_train_000001.bin", pattern(100, 0));  // a new file under data.mix[1]'s pattern
  auto r = resume();
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("data.mix[1].shards"), std::string::npos) << r.output;
  fs::remove(f.dir / "b_train_000001.bin");

  {  // one token changed in place: the same size
    std::fstream shard(f.dir / "a_train_000001.bin", std::ios::in | std::ios::out | std::ios::binary);
    shard.seekp(1024 + 10);
    const uint16_t other = 123;
    shard.write(reinterpret_cast<const char*>(&other), 2);
  }
  r = resume();
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find((f.dir / "a_train_000001.bin").string()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("differs from the shard the run started with"), std::string::npos) << r.output;
  EXPECT_EQ(spread::list_checkpoints(run), checkpoints);
}

// A shard whose ids the tokenizer does not have, met mid-run (a mixture's rare set): exit 2 naming the shard and
// the key, and the checkpoints written before it kept.
TEST(Shards, ABadShardMetMidRunIsNamedAndTheCheckpointsKept) {
  const MixFixture f("mix_bad");
  const std::string tokenizer = tiny_tokenizer(f.dir);
  write_llmc_shard(f.dir / "b_train_000000.bin", std::vector<uint16_t>(4000, 60000));  // past tiny_tokenizer's 1,024 ids
  std::string args = f.train("bad", tokenizer, 100000);
  const std::string weights = "weight = 0.3";
  args.replace(args.find(weights), weights.size(), "weight = 0.005");  // about one window in 200 meets it
  const auto r = spread::testing::run_spread_env("", args);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find((f.dir / "b_train_000000.bin").string()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("data.mix[1].shards"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("is id 60000"), std::string::npos) << r.output;
  const auto kept = spread::list_checkpoints((f.dir / "runs" / "bad").string());
  ASSERT_FALSE(kept.empty()) << "the run met the shard before its first checkpoint; pick a smaller weight\n" << r.output;
  EXPECT_GE(spread::read_checkpoint(kept.front()).step, 4);
}

// Shards made by `spread tokenize --shards` from text train a model whose val_bpb follows from the validation
// shard's own text: val_loss / ln 2 / (bytes per token), the bytes counted here from the lines it holds.
TEST(Shards, ShardsWrittenFromTextGiveBitsPerByte) {
  SHARED_DATA_OR_SKIP(gpt2, "tokenizers/gpt2");
  const fs::path dir = scratch("written");
  std::vector<std::string> lines;
  for (int i = 0; i < 600; ++i)
    lines.push_back(fmt::format("line {} counts {} sheep, caf\u00e9 number {}", i, (7 * i) % 31, i % 11));
  {
    std::ofstream text(dir / "corpus.txt");
    for (const auto& l : lines) text << l << "\n";
  }
  const auto made = spread::testing::run_spread_env(
      "", fmt::format("tokenize --tokenizer {} --shards {} --in {} --val-tokens 1500 --shard-tokens 4000", gpt2,
                      (dir / "shards").string(), (dir / "corpus.txt").string()));
  ASSERT_EQ(made.code, 0) << made.output;
  const spread::TokenFile val((dir / "shards" / "val_000000.bin").string());
  int64_t documents = 0;  // whole lines: each ends with GPT-2's end of text
  for (uint64_t i = 0; i < val.size(); ++i) documents += val[i] == 50256;
  ASSERT_EQ(val[val.size() - 1], 50256);
  uint64_t bytes = 0;
  for (int64_t i = 0; i < documents; ++i) bytes += lines[size_t(i)].size();
  EXPECT_EQ(val.source_bytes(), bytes);
  std::ofstream(dir / "lm.toml") << "# every key from --set\n";
  const auto trained = spread::testing::run_spread_env(
      "", fmt::format("train {} --set run.out_dir={} --set 'data.shards={}/shards/train_*.bin' "
                      "--set 'data.val_shards={}/shards/val_*.bin' --set tokenizer.kind=hf --set tokenizer.path={} "
                      "{} --set train.max_steps=2 --set train.eval_every=2 --set run.threads=1",
                      (dir / "lm.toml").string(), (dir / "runs").string(), dir.string(), dir.string(), gpt2,
                      kTinyLm));
  ASSERT_EQ(trained.code, 0) << trained.output;
  bool seen = false;
  for (const auto& j : spread::read_metrics((dir / "runs" / "run" / "metrics.jsonl").string())) {
    if (!j.contains("val_loss")) continue;
    ASSERT_TRUE(j.contains("val_bpb")) << j.dump();
    const double expected = j["val_loss"].get<double>() / std::log(2.0) / (double(bytes) / double(val.size()));
    EXPECT_NEAR(j["val_bpb"].get<double>(), expected, 1e-9 * expected) << j.dump();
    seen = true;
  }
  EXPECT_TRUE(seen);
  fs::remove_all(dir);
}
