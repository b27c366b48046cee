// The file primitives of ckpt/ (private to ckpt/src): a descriptor owner,
// fsync, the atomic publish of a small file inside a directory, bounded
// reads and tree removal, all relative to a directory descriptor and none
// following a symlink in the last component. Definitions in ckpt_io.cc.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "preflight/ckpt_manifest.h"
#include "preflight/status.h"

namespace preflight::ckpt_internal {

// Owns one descriptor; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  int release();
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// `rel` under `at` (AT_FDCWD for a path) as a directory, never through a
// symlink in its last component. `shown` names it in errors.
Expected<Fd> OpenDirAt(int at, const std::string& rel, const std::string& shown);

// fsync, with the errno in the message.
Status SyncFd(int fd, const std::string& shown);

// Creates directory `rel` under `at` with `mode`; an existing directory
// (not a symlink to one) is fine.
Status MakeDirAt(int at, const std::string& rel, mode_t mode, const std::string& shown);

// Publishes `data` as `name` in directory `dirfd`: written to a hidden
// temporary beside it, fsynced, renamed over `name`, and the directory
// fsynced. Readers see the old file or the whole new one.
Status WriteAtomicAt(int dirfd, const std::string& name, const std::string& data, const std::string& shown,
                     mode_t mode = 0644);

// The whole of regular file `rel` under `at`, refused when larger than
// `max` bytes, when not a regular file, or when a symlink.
Expected<std::string> ReadSmallAt(int at, const std::string& rel, uint64_t max, const std::string& shown);

// Renames `entry` of the folder `tierfd` (shown as `tier`) to a fresh
// .trash- name, fsyncs the folder, then removes it: a removal cut short
// never leaves a folder under its name (a local one would keep its proof
// file and look complete).
Status Discard(int tierfd, const std::string& tier, const std::string& entry);
// The header of the manifest at `rel` under `at` (ParseCkptManifestHeader),
// read from its start only (at most 1 MiB: a nodes line of kCkptMaxNodes
// names fits).
Expected<CkptManifest> HeaderAt(int at, const std::string& rel);

// What lstat says `rel` under `at` is: 'd', 'f', 'l', 'o' (anything else)
// or 0 when absent. Errors other than ENOENT/ENOTDIR are returned.
Expected<char> KindAt(int at, const std::string& rel, const std::string& shown);

}  // namespace preflight::ckpt_internal
