// Token shards (data/token_file.h): llm.c's layout read from bytes written here by hand, several files read as one
// stream exactly as the same tokens in one file, the refusals of bad shards, and an LM trained from shards
// (data.shards), resumed bitwise.
#include <gtest/gtest.h>
#include "test_paths.h"
#include <torch/torch.h>

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>

#include "cli_run.h"
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

// A stream that a tiny model can learn: counting up in steps of 3 modulo 400, ids below GPT-2's 50,257.
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
  SHARED_DATA_OR_SKIP(gpt2, "tokenizers/gpt2");
  const fs::path dir = scratch("train");
  for (int k = 0; k < 3; ++k) write_llmc_shard(dir / fmt::format("fw_train_{:06d}.bin", k), pattern(4000, 4000 * k));
  write_llmc_shard(dir / "fw_val_000000.bin", pattern(2000, 99));
  std::ofstream(dir / "lm.toml") << "# every key from --set\n";
  auto train = [&](const std::string& name) {
    return spread::testing::run_spread_env(
        "", fmt::format("train {} --set run.name={} --set run.out_dir={} --set 'data.shards={}/fw_train_*.bin' "
                        "--set 'data.val_shards={}/fw_val_*.bin' --set tokenizer.kind=hf --set tokenizer.path={} "
                        "--set model.n_layer=1 --set model.n_head=2 --set model.n_embd=16 --set model.block_size=32 "
                        "--set train.batch_size=4 --set train.max_steps=8 --set train.eval_every=4 "
                        "--set train.ckpt_every=4 --set train.warmup_steps=1 --set train.log_every=1 "
                        "--set train.schedule=wsd --set train.optimizer=muon",
                        (dir / "lm.toml").string(), name, (dir / "runs").string(), dir.string(), dir.string(), gpt2));
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
                      (dir / "lm.toml").string(), (dir / "runs").string(), dir.string(), dir.string(), gpt2));
  EXPECT_EQ(none.code, 2) << none.output;
  EXPECT_NE(none.output.find("data.shards"), std::string::npos) << none.output;
  fs::remove_all(dir);
}
