// The storage engine of `preflight accept`: run on each node (the hidden
// `preflight accept --storage-worker`), one path at a time.
//
// Figures users already trust come from fio (Debian's `fio`, its JSON
// output): sequential 1 MiB write then read, random 4 KiB reads (one pass
// over the file, so no block is read twice from the page cache), one
// checkpoint-sized write. I/O is buffered with an fsync at the end of each
// write and the page cache invalidated before each read (fio's invalidate):
// tmpfs and several parallel file systems refuse O_DIRECT, and buffered +
// fsync is what data loaders and checkpoint writers do. fio has no mode for
// small files and metadata, so those are measured here: N files of 4 KiB
// created (write, close; one fsync of the directory), read back, stat()ed.
//
// Everything is written under one private directory, PATH/.preflight-accept-
// <node>-<tag>, removed on every return and on SIGINT/SIGTERM (the worker
// kills its fio child first). A path the user cannot write, or one that
// fills up, comes back as StorageFigures::error; nothing is left behind.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "preflight/accept_report.h"
#include "preflight/process.h"
#include "preflight/status.h"

namespace preflight::accept {

struct StorageOptions {
  std::string path;                  // the directory to measure (must exist), %n its node's (NodePath)
  std::string node;                  // this node's name (part of the private directory)
  std::string tag;                   // unique per run (the job id and a time)
  uint64_t file_bytes = 64ull << 20; // sequential and random file
  uint64_t ckpt_bytes = 128ull << 20;// the checkpoint write
  double runtime_s = 5;              // each fio job stops here (fio --runtime): figures from what was done
  int small_files = 500;             // create/read/stat count
  std::string fio = "fio";
  // Runs a command (argv, timeout); the default is core's RunCommand. The
  // worker passes one that records the child so a signal can kill it.
  std::function<Expected<ProcessResult>(const std::vector<std::string>&, unsigned)> run;
};

// Sizes for a level ("quick": 64 MiB files, 128 MiB checkpoint, 5 s per job,
// 500 small files; "full": 2 GiB, 8 GiB, 60 s, 20000).
StorageOptions StorageOptionsForLevel(const std::string& level);

// The level's sizes with the command line's overrides: bytes ("" the
// level's; the checkpoint twice that, at least 4K), files (0 the level's),
// runtime seconds ("" the level's, 1..3600). InvalidArgument names the option.
Expected<StorageOptions> StorageOptionsFor(const std::string& level, const std::string& bytes, int files,
                                           const std::string& runtime);
// The directory measured for o.path on o.node: %n becomes the node's name
// and %% a % (ExpandNode, config_values.h, the one expander the site
// config's path keys go through: `scratch_dir = /scratch/%n`, the default
// path, is each node's own scratch, as the prolog's scratch check sees it).
// The report keeps o.path as given, one path for every node. A node name
// that could not be a path component (hostlist.h) is an error.
Expected<std::string> NodePath(const StorageOptions& o);
// The fio command lines MeasureStorage runs for `o` (for the report).
std::vector<std::string> ReproduceCommands(const StorageOptions& o);
// A --storage path longer than this is refused (the worker's result line
// must stay short: srun splits long output lines).
inline constexpr size_t kMaxStoragePath = 512;

// fio's figures from its --output-format=json document.
struct FioFigures {
  double read_bw = 0;    // bytes/s
  double write_bw = 0;
  double read_iops = 0;
  double write_iops = 0;
  int error = 0;         // the job's errno (0 none)
};
Expected<FioFigures> ParseFioJson(const std::string& json);

// The fio command line for one figure ("seq_write", "seq_read",
// "rand_read_4k", "ckpt_write"); `dir` is the private directory.
std::vector<std::string> FioArgv(const StorageOptions& o, const std::string& figure, const std::string& dir,
                                 uint64_t bytes, const std::string& json_out);

// Measure NodePath(o). Never throws; error set when a figure could not be
// had. The figures name o.path, as given.
StorageFigures MeasureStorage(const StorageOptions& o);

// The private directory's name under o.path.
std::string PrivateDirName(const StorageOptions& o);

// "#accept-storage {json}" line for the orchestrator (without the reproduce
// commands: srun splits lines past about 1 KiB), and its parser.
std::string StorageLine(const StorageFigures& f);
Expected<StorageFigures> ParseStorageLine(const std::string& line);
inline constexpr const char* kStoragePrefix = "#accept-storage ";

}  // namespace preflight::accept
