// The checkpoint file format (include/spread/run/checkpoint.h): version 2's payload judged by the reference
// `safetensors` library, version 1 files (a LibTorch archive, written before 2026-12-06) still read, and payloads
// that are not spread's refused as UserErrors.
#include <gtest/gtest.h>
#include <zlib.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "python_env.h"
#include "spread/data/safetensors.h"
#include "spread/run/checkpoint.h"
#include "spread/util/error.h"
#include "test_paths.h"

namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("spread_ckpt_format_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string command_output(const std::string& cmd) {
  std::string out;
  FILE* pipe = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), pipe)) > 0;) out.append(buf.data(), n);
  pclose(pipe);
  return out;
}

// A file with a valid version-2 header around `payload` (what a hostile file that passes the checksum looks like).
std::string write_v2_file(const fs::path& dir, const std::string& payload) {
  std::string file = "SPRDCKPT";
  const auto put = [&file](auto value) { file.append(reinterpret_cast<const char*>(&value), sizeof value); };
  put(uint32_t{2});
  put(uint64_t(payload.size()));
  put(uint32_t(crc32(0L, reinterpret_cast<const Bytef*>(payload.data()), uInt(payload.size()))));
  file += payload;
  const fs::path path = dir / "step_00000001.ckpt";
  std::ofstream(path, std::ios::binary) << file;
  return path.string();
}

std::string user_error_of(const std::string& path) {
  try {
    spread::read_checkpoint(path);
  } catch (const spread::UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(CheckpointFormat, PayloadIsASafetensorsFileTheReferenceLibraryReads) {
  std::string why_not;
  const std::string python = spread::testing::reference_python({"safetensors", "torch"}, &why_not);
  if (python.empty()) GTEST_SKIP() << why_not;
  const fs::path dir = scratch("reference");
  torch::manual_seed(7);
  spread::Checkpoint c;
  c.step = 12;
  c.tensors["model.w"] = torch::randn({3, 5});
  c.tensors["model.half"] = torch::randn({4}).to(torch::kBFloat16);
  c.tensors["optim.step"] = torch::tensor({int64_t{1} << 40, int64_t{-3}});
  c.tensors["rng.cpu"] = torch::randint(0, 256, {7}, torch::kUInt8);
  c.tensors["empty"] = torch::zeros({0, 2});
  c.tensors["transposed"] = torch::arange(6, torch::kFloat32).reshape({2, 3}).t();  // saved contiguous, as seen
  c.meta["note"] = "caf\xc3\xa9";
  const std::string path = spread::save_checkpoint(dir.string(), c, 1);

  const std::string script = spread::testing::oracle_script("check_checkpoint.py");
  const auto judged = nlohmann::json::parse(command_output("'" + python + "' " + script + " " + path));
  EXPECT_EQ(judged["version"], 2);
  EXPECT_TRUE(judged["size_ok"].get<bool>());
  EXPECT_TRUE(judged["crc_ok"].get<bool>());
  const auto meta = nlohmann::json::parse(judged["metadata"]["spread.checkpoint"].get<std::string>());
  EXPECT_EQ(meta["step"], 12);
  EXPECT_EQ(meta["note"], "caf\xc3\xa9");
  ASSERT_EQ(judged["tensors"].size(), c.tensors.size());
  const std::map<std::string, std::string> dtypes = {{"model.w", "float32"}, {"model.half", "bfloat16"},
                                                     {"optim.step", "int64"}, {"rng.cpu", "uint8"},
                                                     {"empty", "float32"}, {"transposed", "float32"}};
  for (const auto& [name, t] : c.tensors) {
    const auto& j = judged["tensors"][name];
    EXPECT_EQ(j["dtype"], dtypes.at(name)) << name;
    EXPECT_EQ(j["shape"].get<std::vector<int64_t>>(), t.sizes().vec()) << name;
    const auto values = j["values"].get<std::vector<double>>();
    const auto expected = t.to(torch::kFloat64).contiguous().flatten();
    ASSERT_EQ(int64_t(values.size()), expected.numel()) << name;
    for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(values[i], expected[int64_t(i)].item<double>()) << name;
  }
  const auto back = spread::read_checkpoint(path);  // and spread reads its own file back
  EXPECT_EQ(back.step, 12);
  for (const auto& [name, t] : c.tensors) EXPECT_TRUE(torch::equal(back.tensors.at(name), t)) << name;
  fs::remove_all(dir);
}

// tests/data/checkpoint_v1 is the checkpoint of a one-step char-level run saved by spread before version 2.
// The expected values were read from it with PyTorch's own reader (torch.jit.load of bytes [24:]).
TEST(CheckpointFormat, VersionOneFilesStillRead) {
  const auto c = spread::read_checkpoint(std::string(SPREAD_TEST_DATA_DIR) + "/checkpoint_v1/ckpt/step_00000001.ckpt");
  EXPECT_EQ(c.step, 1);
  EXPECT_EQ(c.meta["torch_version"], "1.13.0");
  EXPECT_EQ(c.meta["tokens_seen"], 16);
  EXPECT_EQ(c.tensors.size(), 22u);
  EXPECT_EQ(c.tensors.at("model.wte.weight").sizes().vec(), (std::vector<int64_t>{45, 8}));
  EXPECT_NEAR(c.tensors.at("model.wte.weight").to(torch::kFloat64).sum().item<double>(), 0.24064835691825692, 1e-6);
  EXPECT_NEAR(c.tensors.at("model.blocks.0.ln1.weight")
                  .to(torch::kFloat64).sum().item<double>(), 7.999980211257935, 1e-6);
  EXPECT_EQ(c.tensors.at("rng.cpu").scalar_type(), torch::kUInt8);
  EXPECT_EQ(c.tensors.at("rng.cpu.ranks").sizes().vec(), (std::vector<int64_t>{1, 5056}));
}

TEST(CheckpointFormat, PayloadsSpreadDidNotWriteAreUserErrors) {
  const fs::path dir = scratch("foreign");
  // A safetensors file without spread's metadata (a model's weights renamed to a checkpoint).
  const spread::NamedTensors weights = {{"w", torch::ones({2})}};
  std::string what = user_error_of(write_v2_file(dir, spread::safetensors_bytes(weights)));
  EXPECT_NE(what.find("spread.checkpoint"), std::string::npos) << what;
  // Its meta not JSON, or without a step.
  what = user_error_of(write_v2_file(dir, spread::safetensors_bytes(weights, {{"spread.checkpoint", "{oops"}})));
  EXPECT_NE(what.find("step_00000001.ckpt"), std::string::npos) << what;
  what = user_error_of(write_v2_file(dir, spread::safetensors_bytes(weights, {{"spread.checkpoint", "[1]"}})));
  EXPECT_NE(what.find("step_00000001.ckpt"), std::string::npos) << what;
  // A version-1 payload (a LibTorch archive) under a version-2 header.
  std::ifstream v1(std::string(SPREAD_TEST_DATA_DIR) + "/checkpoint_v1/ckpt/step_00000001.ckpt", std::ios::binary);
  const std::string v1_file((std::istreambuf_iterator<char>(v1)), std::istreambuf_iterator<char>());
  what = user_error_of(write_v2_file(dir, v1_file.substr(24)));
  EXPECT_NE(what.find("safetensors"), std::string::npos) << what;
  fs::remove_all(dir);
}
