// The source walker of --stage (private to stage/src): a child process
// that runs as the job's user, walks the source, and passes each entry's
// metadata (and each file's open descriptor) to root over a socketpair;
// root never opens a source path itself. The parent reads the records with
// Receive.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "preflight/stage_copy_options.h"  // StageIdentity
#include "stage_walk_wire.h"

namespace preflight::stage_internal {

// 1 MiB: files from this size on go through copy_file_range (stage_copy.h);
// also the copy pool's read buffer and batch size.
constexpr uint64_t kLargeFile = 1 << 20;

struct Record {
  Kind kind;
  char type;
  uint32_t mode;
  uint64_t size;
  int64_t mtime_sec;
  uint32_t mtime_nsec;
  int64_t ctime_sec = 0;
  uint32_t ctime_nsec = 0;
  uint64_t ino = 0;
  bool remote = false;  // kRoot: on a network file system, which `link` names
  int err = 0;  // kError: Wire::err
  std::string path;
  std::string link;
  int fd = -1;
};

// Light lines: directories only, by ctime; manifest lines: every entry.
std::string LightLine(const Record& r);
std::string ManifestLine(const Record& r);

enum class WalkMode { kCopy, kScan, kLight };

// ---- the parent -----------------------------------------------------------
struct Child {
  pid_t pid = -1;
  int sock = -1;
};

// Forks the walker for `src` as `who` (copy: with descriptors; scan: a
// manifest; light: directories only). A copy walk of a directory on a
// network file system opens its files on `remote_openers` threads
// (stage_walk_open.h; below 2: in the walk).
Status StartChild(const std::string& src, const StageIdentity& who, WalkMode mode, Child* c,
                  bool local_digest = false, const std::vector<std::string>* light_dirs = nullptr,
                  unsigned remote_openers = 0);
// Reaps the walker and closes the socket; with `kill`, SIGKILL first and
// at most 5 s of waiting (KillChild: a walker stuck in a dead server is left).
void StopChild(Child* c, bool kill);

// Receives batches; calls on_record for each (it takes ownership of the
// record's fd); closes unclaimed fds. Ok at kEnd (*end_text: the walker's
// closing text, its digest when it computed one); an error with *side on
// a child error (its kind from the child's errno), a timeout or a
// protocol failure, or on_record's first error.
Status Receive(Child* c, double deadline, const std::string& src, FaultSide* side,
               const std::function<Status(Record&)>& on_record, std::string* end_text = nullptr);

}  // namespace preflight::stage_internal
