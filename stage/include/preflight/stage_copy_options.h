// The staging copy engine's options and figures, and its write-side seam
// (stage_copy.h): what the engine's parts (the walker, the copy pool, the
// warm check) share, apart from the entry points that use them.
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "preflight/stage_user.h"  // StageIdentity
#include "preflight/status.h"

namespace preflight {

// Write-side system calls. Each returns what the syscall returns (-1 with
// errno set on failure). The default forwards to the kernel.
class StageFs {
 public:
  virtual ~StageFs() = default;
  virtual int OpenAt(int dirfd, const char* path, int flags, mode_t mode);
  virtual ssize_t Pread(int fd, void* buf, size_t n, off_t off);
  virtual ssize_t Pwrite(int fd, const void* buf, size_t n, off_t off);
  virtual ssize_t CopyFileRange(int in, off_t* in_off, int out, size_t n);
  virtual int MkdirAt(int dirfd, const char* path, mode_t mode);
  virtual int SymlinkAt(const char* target, int dirfd, const char* path);
  virtual int Futimens(int fd, const struct timespec ts[2]);
  virtual int Close(int fd);
};
StageFs& DefaultStageFs();

// The real calls, counting the bytes read from source descriptors (pread
// and copy_file_range): how the bench and the fan-out tests measure how
// often a source was read.
class CountingStageFs : public StageFs {
 public:
  ssize_t Pread(int fd, void* buf, size_t n, off_t off) override {
    ssize_t k = StageFs::Pread(fd, buf, n, off);
    if (k > 0) read += static_cast<uint64_t>(k);
    return k;
  }
  ssize_t CopyFileRange(int in, off_t* in_off, int out, size_t n) override {
    ssize_t k = StageFs::CopyFileRange(in, in_off, out, n);
    if (k > 0) read += static_cast<uint64_t>(k);
    return k;
  }
  std::atomic<uint64_t> read{0};
};

// Which side a failure came from: where, finer than whose (fault.h's
// FaultOwner, the one vocabulary of blame). stage_job.cc maps it once:
// kNode to the node, the source and a full destination to the job's user.
enum class FaultSide {
  kNone,
  kSource,     // the source: missing, unreadable, refused, changed, timed out
  kDestSpace,  // the destination is full (ENOSPC/EDQUOT)
  kNode,       // the destination failed otherwise (EIO, EROFS, ...)
};

struct CopyOptions {
  unsigned workers = 4;
  // A source on a network or FUSE file system (OnNetworkFilesystem): the
  // operations in flight instead, for the walk's opens, the copies and the
  // warm check; 0: `workers`. Latency, not CPUs, bounds such a copy.
  unsigned remote_workers = 0;
  double deadline = 0;     // MonotonicSeconds() after which to give up; 0: none
  StageFs* fs = nullptr;   // nullptr: DefaultStageFs()
  StageIdentity who;
  // ScanSource only, digest only: the light check (see below) of a
  // directory source, statting just these directories (relative paths).
  bool dirs_only = false;
  const std::vector<std::string>* light_dirs = nullptr;
  // CopyTree: refuse (kDestSpace, before writing it) the file that takes
  // the dataset's apparent size past this many bytes; 0: no limit. The copy
  // writes holes out, so a sparse file counts at its apparent size: a 1 TB
  // sparse file is refused at once instead of filling the disk.
  uint64_t space_limit = 0;
  // CopyTree: refuse (kDestSpace, before creating it) the entry -- file,
  // folder or symlink, the root too -- that, with kInodeReserve more,
  // takes the dataset past this many free inodes; kNoInodeLimit: not
  // counted. A file system out of inodes says ENOSPC while df -h shows
  // free space: this says inodes, before anything is written.
  uint64_t free_inodes = kNoInodeLimit;
  // CopyTree: refuse (kSource, before creating it) the entry that takes the
  // dataset past this many files, folders and symlinks, the root too; 0:
  // none. The copy keeps each entry's manifest lines in memory (about 400
  // bytes), so this bounds the prolog's memory (stage_max_entries).
  uint64_t max_entries = 0;
  static constexpr uint64_t kNoInodeLimit = UINT64_MAX;
  // Inodes the cache's own records of a copy take beside the data
  // (manifest, dirs, check, info.json, refs, current, the job's view).
  static constexpr uint64_t kInodeReserve = 16;
};

// Sets o->space_limit and o->free_inodes from a destination's statvfs:
// bytes f_bavail * f_frsize (1 on a full disk: the first byte is refused),
// inodes f_favail, not counted where the file system counts none
// (f_files 0: btrfs, some network file systems).
void FreeRoomLimits(const struct statvfs& v, CopyOptions* o);
// FreeRoomLimits of fstatvfs(dst_fd); `o` unchanged where that fails.
void LimitToFreeRoom(int dst_fd, CopyOptions* o);
// Whether a dataset of `bytes` (apparent size so far) and `entries` (files,
// folders and symlinks so far) still fits o's limits: Ok, or kFailed
// saying which ("the dataset needs at least 1.0T ...", "it has at least N
// files and folders, the file system has M free inodes ...").
// TooManyEntries: the same for max_entries alone (the source's fault, not
// the destination's).
Status RoomFor(const CopyOptions& o, uint64_t bytes, uint64_t entries);
Status TooManyEntries(const CopyOptions& o, uint64_t entries);

struct CopyStats {
  uint64_t bytes = 0;
  uint64_t files = 0;
  uint64_t dirs = 0;
  uint64_t symlinks = 0;
  double seconds = 0;
  // A network or FUSE source (OnNetworkFilesystem): its type ("nfs",
  // "fuse", ...) and the operations kept in flight; "" and 0 otherwise.
  std::string source_fs;
  unsigned in_flight = 0;
};

}  // namespace preflight
