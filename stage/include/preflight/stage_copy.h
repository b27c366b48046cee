// The staging copy engine: a source tree read with the job user's identity,
// written by the (root) caller into a destination it owns.
//
// Read side: a forked child that drops to the job user (setgroups, setregid,
// setreuid, in that order, as pyxis does; then not dumpable, so the user's
// other processes can't ptrace it) walks the source with openat(O_NOFOLLOW)
// and passes each regular file's open descriptor to the parent over a
// SOCK_SEQPACKET socket (SCM_RIGHTS). So the root side never opens a source
// path: it can only read what the user could open. The child refuses
// symlinks that leave the source tree (absolute ones, and relative ones
// whose resolved target, resolved as the user, is outside), and device,
// fifo and socket files.
//
// Write side: the parent creates directories and symlinks as records
// arrive and hands files to `workers` threads, so walking and copying
// overlap. Small files take one pread and one write; files of 1 MiB and
// more go through copy_file_range (in-kernel, no user copy), falling back
// to 1 MiB pread/write where the kernel can't (different filesystems).
// Every file is checked after its copy: bytes copied == size seen, and
// size/mtime unchanged since it was opened, else "changed while being
// copied" naming what changed (size, mtime, inode, ctime: old -> new).
// All write-side calls go through StageFs, the seam tests use to inject
// faults (disk full, EIO mid-file, a kill mid-copy).
//
// Thread safety: one call at a time per process is expected (the child is
// forked from the calling thread before any worker starts).
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include <cstdint>
#include <atomic>
#include <string>
#include <vector>

#include "preflight/fileutil.h"  // RemoveTree, RemoveTreeAt
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
Status RoomFor(const CopyOptions& o, uint64_t bytes, uint64_t entries);

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

// The manifest: one line per entry, first "root <d|f> <resolved source>",
// then "d MODE PATH", "f MODE SIZE MTIME.NSEC PATH", "l PATH -> TARGET".
// Two manifests are the same dataset iff SameManifest.
// The light manifest of a directory source lists only directories, by
// ctime: "R MODE CTIME ROOT", "d MODE CTIME PATH". Checking it costs one
// stat per directory the copy recorded, none per file, and no listing. It
// catches entries added, removed or renamed anywhere (a directory's ctime
// moves, and no user can set a ctime) but not a file rewritten in place;
// sites choose it with stage_verify = dirs.
bool SameManifest(const std::vector<std::string>& a, const std::vector<std::string>& b);

// The manifest's first line, its one writer and reader: "root d PATH" for
// a directory source, "root f PATH" for one file (PATH: the resolved
// source, which may hold spaces; it runs to the end of the line).
std::string ManifestRootLine(char type, const std::string& path);
// True for a root line, with its type ('d' or 'f') and path.
bool ParseManifestRootLine(const std::string& line, char* type, std::string* path);
// The source's type and resolved path from a manifest's first line; 0 and
// "" for an empty manifest or one whose first line is not a root line.
char ManifestRootType(const std::vector<std::string>& manifest);
std::string ManifestRootPath(const std::vector<std::string>& manifest);

// Copy `src` into `dst_dir_fd`/`dst_name` (which must not exist): a
// directory tree or one file, as the source is. On failure the partial
// copy is left for the caller to remove and *side says whose fault.
// An order-independent digest of a manifest (readdir order may change
// without the dataset changing): the line count and two sums of
// independently mixed 64-bit hashes of the lines, "N-HEX-HEX". The cache
// compares digests, so a reuse check holds no line in memory.
class ManifestDigest {
 public:
  void Add(const std::string& line);
  std::string str() const;

 private:
  uint64_t n_ = 0, a_ = 0, b_ = 0;
};
std::string DigestOf(const std::vector<std::string>& lines);

class CheckManifestBuilder;  // stage_manifest.h

// `light`, if given, receives the light manifest of the same walk;
// `check`, if given, every entry for the warm check (stage_manifest.h),
// including which files carry a POSIX ACL (one fgetxattr per file, done by
// the copy workers on the descriptor they already hold).
Status CopyTree(const std::string& src, int dst_dir_fd, const std::string& dst_name, const CopyOptions& o,
                CopyStats* stats, std::vector<std::string>* manifest, FaultSide* side,
                std::vector<std::string>* light = nullptr, CheckManifestBuilder* check = nullptr);

// The same walk without copying: stat and access(R_OK) of every entry as
// `o.who`, giving the manifest the cache compares (no descriptors pass).
// With o.dirs_only and o.light_dirs (and no `manifest`), the light digest.
// `manifest` may be nullptr when only `digest` is wanted.
Status ScanSource(const std::string& src, const CopyOptions& o, std::vector<std::string>* manifest,
                  FaultSide* side, std::string* digest = nullptr);

}  // namespace preflight
