#pragma once
// Whole-file reads, and the filesystem changes spread makes, with failures as UserErrors naming the path (exit 2)
// instead of an uncaught std::filesystem_error (abort): a directory under a file, a read-only mount, a name too
// long, a full disk. Readers raise their own error when a file is unreadable, since only they know which key or
// file the user should fix.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "spread/util/error.h"

namespace spread {

// Every reader of a user's file opens it with read_whole_file or open_input_file. Both refuse a directory (it opens
// and reads as empty on Linux, so `spread train DIR` once trained the defaults) and a device or socket (/dev/zero
// never ends), with a UserError naming the path. A regular file, a pipe (`--in <(zcat texts.gz)`) and a missing
// path pass: a missing or unreadable file is left to the reader, which knows the key or option to name.
void refuse_non_file(const std::string& path);

// The file's bytes, or nullopt when it cannot be opened.
std::optional<std::string> read_whole_file(const std::string& path);

// The files inside a folder that a user downloads (a model, a tokenizer, a BEIR set) are never streamed: a FIFO
// there would wait forever for a writer, a device (a link to /dev/zero) never ends. require_regular_file refuses
// anything but a regular file (links followed) with a UserError naming the path and what stands there; a missing
// path passes, left to the reader, which knows what the folder should hold.
void require_regular_file(const std::string& path);

// A regular file's bytes, at most `max_bytes` of them: its size is read from the open descriptor (which fstat must
// show regular, so that a FIFO put in place after the check is refused too, and a growing file is cut at that size)
// and a larger file is a UserError naming the size and the limit. nullopt when it cannot be opened.
std::optional<std::string> read_regular_file(const std::string& path, uint64_t max_bytes);
// The file opened for reading (not open when it cannot be).
std::ifstream open_input_file(const std::string& path, std::ios::openmode mode = std::ios::binary);

void make_directories(const std::string& path);
// Creates `path` when missing and checks that a file can be made in it (a probe file, created and removed), so a
// read-only location is found before the work whose output it would lose, whoever runs it (root ignores
// permission bits, not a read-only mount).
void require_writable_directory(const std::string& path);
void remove_file(const std::string& path);  // a missing file is no error
void rename_file(const std::string& from, const std::string& to);
// fsync of a folder, so that a rename into it survives a crash; best effort (a folder that cannot be opened is left).
void sync_folder(const std::string& folder);

// "PATH: cannot DOING: REASON (HINT)", the hint chosen by the error (file in the way, read-only, name too long...).
UserError filesystem_user_error(const std::string& path, const std::string& doing, const std::error_code& ec);
UserError filesystem_user_error(const std::filesystem::filesystem_error& e);

}  // namespace spread

// Outputs (encode, pool, eval and diagnose --out, export's folder, and the run's own files), one rule for all:
//   - an existing output is replaced whole: written under a temporary name in the same folder
//     (".NAME.spread-tmp-HOST-PID"), flushed and synced, then renamed over NAME; a failed write or a kill leaves the
//     previous file as it was and never a partial one under NAME (the temporary is removed on error; one left by a
//     killed process is removed by remove_stale_temporaries);
//   - a symbolic link, a FIFO, a device or a socket at NAME is refused (UserError), never replaced nor written
//     through; links among the folders above NAME are followed as any path is.
#include <functional>
#include <ostream>
#include <utility>
#include <vector>

namespace spread {

// Checked before the work, so that a bad --out fails at once: `path` is no symbolic link and no directory, and its
// folder exists and is writable. UserError naming `path` and `option`, with the OS's reason.
void check_output_file(const std::string& path, const std::string& option);

// The same for a folder that is made or replaced whole (export --out): no symbolic link, no file, and the nearest
// existing folder above it writable (missing folders between are created).
void check_output_folder(const std::string& path, const std::string& option);

// check_output_file, then remove_stale_temporaries of its folder: for a command writing one output file.
void prepare_output_file(const std::string& path, const std::string& option);

// Removes what killed processes left in `folder`: entries named as temporary_name names them, made on this host,
// whose PID is no live process (stale_temporary_of). Nothing else is touched.
void remove_stale_temporaries(const std::string& folder);

// Writes `path` as promised above; `write` fills the stream (a failed stream is a write error).
void write_output_file(const std::string& path, const std::function<void(std::ostream&)>& write);

// write_output_file of a string: `path` replaced whole by `contents` or not at all.
void write_file_atomic(const std::string& path, const std::string& contents);

// Many outputs with the same promise at the cost of two syncs for all of them instead of two for each: add()
// writes each under its temporary name; commit() syncs the filesystem once (syncfs), renames them all and syncs
// each folder once. `spread pool` writes two small files per document: the per-file syncs took 40-55% of its time
// (2000 documents: 6.2-9.2 s against 3.8-4.1 s with syncs made no-ops). Destroyed uncommitted (an error between),
// the group removes its temporaries and no output is replaced.
class OutputFileGroup {
 public:
  OutputFileGroup() = default;
  OutputFileGroup(const OutputFileGroup&) = delete;
  OutputFileGroup& operator=(const OutputFileGroup&) = delete;
  ~OutputFileGroup();
  void add(const std::string& path, const std::function<void(std::ostream&)>& write);
  void commit();

 private:
  std::vector<std::pair<std::filesystem::path, std::filesystem::path>> pending_;  // temporary, final name
};

// The temporary name of `path` in this process: ".NAME.spread-tmp-HOST-PID" in its folder. The marker keeps the
// sweep off a user's own files (".notes.tmp-2"), the host off the temporaries of live processes on another machine
// that shares the folder.
std::filesystem::path temporary_name(const std::filesystem::path& path);
// NAME, when `name` is the temporary of NAME made on this host by a process that no longer runs; nullopt otherwise.
std::optional<std::string> stale_temporary_of(const std::string& name);

}  // namespace spread
