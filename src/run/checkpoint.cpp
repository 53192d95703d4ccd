#include "spread/run/checkpoint.h"

#include <zlib.h>
#include <torch/serialize.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

#include "spread/data/safetensors.h"
#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_depth.h"

namespace fs = std::filesystem;

namespace spread {
namespace {

constexpr char kMagic[8] = {'S', 'P', 'R', 'D', 'C', 'K', 'P', 'T'};
// Version 2's payload is a safetensors file, version 1's (written until 2026-12) a LibTorch archive.
constexpr uint32_t kVersion = 2;
constexpr uint32_t kArchiveVersion = 1;
constexpr char kMetaKey[] = "spread.checkpoint";
constexpr size_t kHeaderSize = 8 + 4 + 8 + 4;

uint32_t crc32_of(const std::string& s) {
  return uint32_t(crc32(0L, reinterpret_cast<const Bytef*>(s.data()), uInt(s.size())));
}

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <class T>
T get(const std::string& in, size_t offset) {
  T v;
  std::memcpy(&v, in.data() + offset, sizeof v);
  return v;
}

std::string serialize(const Checkpoint& ckpt) {
  nlohmann::json meta = ckpt.meta;
  meta["step"] = ckpt.step;
  return safetensors_bytes(ckpt.tensors, {{"format", "pt"}, {kMetaKey, meta.dump()}});
}

}  // namespace

std::optional<std::string> first_non_finite(const Checkpoint& ckpt) {
  for (const auto& [name, t] : ckpt.tensors)
    if (t.is_floating_point() && !torch::isfinite(t).all().item<bool>()) return name;
  return std::nullopt;
}

std::string checkpoint_path(const std::string& run_dir, int64_t step) {
  return (fs::path(run_dir) / "ckpt" / fmt::format("step_{:08d}.ckpt", step)).string();
}

std::string save_checkpoint(const std::string& run_dir, const Checkpoint& ckpt, int64_t keep_last,
                            std::optional<int64_t> keep_step) {
  std::string payload = serialize(ckpt);
  std::string file;
  file.append(kMagic, 8);
  put<uint32_t>(file, kVersion);
  put<uint64_t>(file, payload.size());
  put<uint32_t>(file, crc32_of(payload));
  file += payload;
  fs::path dir = fs::path(run_dir) / "ckpt";
  make_directories(dir.string());
  std::string path = checkpoint_path(run_dir, ckpt.step);
  write_file_atomic(path, file);
  const std::string kept = keep_step ? checkpoint_path(run_dir, *keep_step) : "";
  auto all = list_checkpoints(run_dir);
  for (size_t i = size_t(std::max<int64_t>(keep_last, 1)); i < all.size(); ++i)
    if (all[i] != kept) remove_file(all[i]);
  return path;
}

namespace {

void set_meta(Checkpoint& ckpt, const std::string& meta_json) {
  refuse_deep_json(meta_json, ckpt.path);
  ckpt.meta = nlohmann::json::parse(meta_json);
  ckpt.step = ckpt.meta.at("step").get<int64_t>();
}

// Version 2: safetensors, checked by spread's own reader, with the meta JSON in the header's "__metadata__".
Checkpoint decode_safetensors_payload(const std::string& payload, const std::string& path) {
  SafetensorsContent content = parse_safetensors_content(
      payload, path, "it passed its checksum, so another program wrote it: use a checkpoint spread saved");
  const auto meta = content.metadata.find(kMetaKey);
  if (meta == content.metadata.end())
    throw user_error(path, 0, "", std::string("its safetensors header has no __metadata__ \"") + kMetaKey + "\"",
                     "it was not written by spread: use a checkpoint spread saved");
  Checkpoint ckpt;
  ckpt.path = path;
  ckpt.tensors = std::move(content.tensors);
  set_meta(ckpt, meta->second);
  return ckpt;
}

// Version 1: LibTorch's archive of the tensors and a "__meta__" JSON string. Its reader is TorchScript's unpickler,
// which fuzzing crashed with crafted bytes (docs/untrusted_input.md): read only for runs saved before version 2.
Checkpoint decode_archive_payload(const std::string& payload, const std::string& path) {
  torch::serialize::InputArchive archive;
  std::istringstream payload_stream(payload);
  archive.load_from(payload_stream);
  Checkpoint ckpt;
  ckpt.path = path;
  c10::IValue meta;
  archive.read("__meta__", meta);
  set_meta(ckpt, meta.toStringRef());
  for (const auto& key : archive.keys()) {
    if (key == "__meta__") continue;
    torch::Tensor t;
    archive.read(key, t);
    ckpt.tensors[key] = t;
  }
  return ckpt;
}

}  // namespace

Checkpoint read_checkpoint(const std::string& path) {
  auto bytes = read_whole_file(path);
  if (!bytes) throw user_error(path, 0, "", "cannot read checkpoint");
  std::string file = std::move(*bytes);
  if (file.size() < kHeaderSize || std::memcmp(file.data(), kMagic, 8) != 0)
    throw user_error(path, 0, "", "not a spread checkpoint (bad magic or too short)");
  const uint32_t version = get<uint32_t>(file, 8);
  if (version != kVersion && version != kArchiveVersion)
    throw user_error(path, 0, "", fmt::format("unsupported checkpoint version {} (this spread reads 1 and 2)", version),
                     "a newer spread wrote it: use that spread, or a checkpoint this one saved");
  uint64_t size = get<uint64_t>(file, 12);
  if (file.size() != kHeaderSize + size)
    throw user_error(path, 0, "", fmt::format("truncated checkpoint ({} of {} payload bytes)",
                                              file.size() - kHeaderSize, size));
  std::string payload = file.substr(kHeaderSize);
  if (crc32_of(payload) != get<uint32_t>(file, 20)) throw user_error(path, 0, "", "corrupt checkpoint (checksum mismatch)");

  try {
    return version == kVersion ? decode_safetensors_payload(payload, path) : decode_archive_payload(payload, path);
  } catch (const UserError&) {
    throw;
  } catch (const std::exception& e) {
    // The first line only: LibTorch's errors carry a backtrace of dozens of lines.
    const std::string what = e.what();
    throw user_error(path, 0, "", "not a readable checkpoint: " + what.substr(0, std::min<size_t>(what.find('\n'), 300)),
                     "it passed its checksum, so another program wrote it: use a checkpoint spread saved");
  }
}

std::vector<std::string> list_checkpoints(const std::string& run_dir) {
  std::vector<std::string> files;
  fs::path dir = fs::path(run_dir) / "ckpt";
  if (!fs::exists(dir)) return files;
  for (const auto& e : fs::directory_iterator(dir)) {
    auto name = e.path().filename().string();
    if (name.rfind("step_", 0) == 0 && e.path().extension() == ".ckpt") files.push_back(e.path().string());
  }
  std::sort(files.rbegin(), files.rend());  // zero-padded step numbers sort by name
  return files;
}

std::optional<Checkpoint> load_latest_checkpoint(const std::string& run_dir, std::vector<std::string>* warnings) {
  const auto paths = list_checkpoints(run_dir);
  for (size_t i = 0; i < paths.size(); ++i) {
    try {
      return read_checkpoint(paths[i]);
    } catch (const std::exception& e) {
      const bool older_left = i + 1 < paths.size();
      if (warnings)
        warnings->push_back(std::string(e.what()) +
                            (older_left ? "; using the previous checkpoint" : "; no older checkpoint is left"));
    }
  }
  return std::nullopt;
}

Checkpoint checkpoint_to_use(const std::string& run_dir, const std::function<void(const std::string&)>& warn) {
  std::vector<std::string> warnings;
  auto ckpt = load_latest_checkpoint(run_dir, &warnings);
  for (const auto& w : warnings) warn(w);
  if (!ckpt && list_checkpoints(run_dir).empty())
    throw user_error(run_dir, 0, "", "no checkpoint in ckpt/ yet", "train the run first (spread train RECIPE)");
  if (!ckpt)
    throw user_error(run_dir, 0, "", fmt::format("none of the {} checkpoints in ckpt/ reads back intact (truncated or "
                                                 "corrupt, see the warnings)", list_checkpoints(run_dir).size()),
                     "they cannot be repaired: restore ckpt/ from a copy, or train the run again under a new run.name");
  if (auto bad = first_non_finite(*ckpt))
    throw diverged_checkpoint_error(ckpt->path, "'" + *bad + "' holds NaN or Inf");
  return *ckpt;
}

UserError diverged_checkpoint_error(const std::string& path, const std::string& problem) {
  return user_error(path, 0, "", problem + ": the run had diverged when this checkpoint was written",
                    "delete this file to use the previous checkpoint, or train again with a lower train.lr");
}

}  // namespace spread
