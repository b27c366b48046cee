// The manifests of a staged dataset: the copy's text manifest (its lines,
// their root line, comparison and digest: their one owner), and the
// cache's per-directory check manifest with the warm (cache hit) check
// built on it.
//
// At build time the copy (CopyTree) records every entry it copied: type,
// mode, size, inode, mtime and ctime (which no user can set), a symlink's
// target, and whether a regular file carried a POSIX ACL. Entries are kept
// grouped by directory, in the order the directory listed them, and
// written next to the cached copy as one binary file (`check`).
//
// The warm check (CheckUnchanged) runs in a forked child that has dropped
// to the job user, exactly like the copy's reader, so the kernel decides
// every directory open and lookup for that user. Directories are checked
// in parallel, each with one getdents64 pass (its names must be exactly
// the stored ones) and one statx per entry (every stored field must match):
// no open and no access() per file. Read permission of each regular file
// follows from its live statx mode/uid/gid and the reader's uid, gid and
// supplementary groups, as the kernel's generic_permission() decides it
// without ACLs. That shortcut is used only where it is exact: never for
// a file that had a POSIX ACL when it was copied (an ACL added later
// moves the file's ctime, so the check sees a change and copies again),
// never for a reader with uid 0 (capabilities), and never on a filesystem
// outside a short list known to use generic_permission (tmpfs, ext2/3/4,
// xfs, btrfs); those files get faccessat(R_OK) as the user instead.
// LSMs (SELinux, AppArmor) are not modelled: they gate the prolog's reader
// as a whole, not per job user.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "preflight/status.h"

namespace preflight {

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

// Collected by CopyTree's receiver (Add, single thread) and its copy
// workers (MarkAcl, any thread).
class CheckManifestBuilder {
 public:
  // The resolved root directory and its own status.
  void Root(const std::string& real, uint32_t mode, uint64_t ino, int64_t ctime_sec, uint32_t ctime_nsec);
  // `path` relative to the root; `type` 'd', 'f' or 'l'. Returns the entry
  // index for MarkAcl.
  uint32_t Add(char type, const std::string& path, uint32_t mode, uint64_t size, uint64_t ino, int64_t mtime_sec,
               uint32_t mtime_nsec, int64_t ctime_sec, uint32_t ctime_nsec, const std::string& link);
  void MarkAcl(uint32_t index);
  // The `check` file's bytes.
  std::string Serialize() const;

 private:
  struct Item {
    char type;
    uint32_t mode;
    uint64_t size, ino;
    int64_t mtime_sec, ctime_sec;
    uint32_t mtime_nsec, ctime_nsec;
    std::string name, link;  // name: the last path component
  };
  struct Dir {
    std::string path;
    uint32_t self;                  // its item; UINT32_MAX for the root
    std::vector<uint32_t> members;  // items, in listing order
  };
  std::string real_;
  Item root_{};
  std::vector<Item> items_;
  std::vector<Dir> dirs_;
  std::unordered_map<std::string, uint32_t> dir_index_;
  uint32_t last_dir_ = 0;  // entries come directory by directory: the usual parent
  bool broken_ = false;    // an entry before its directory
  std::mutex mu_;
  std::vector<uint32_t> acl_;
};

// A loaded `check` file. Load maps the file read-only instead of reading
// it: a warm hit then costs no copy of the manifest and no fresh pages for
// one (for 100k entries, ~6 MB and ~8 ms here). The file is the cache's,
// mode 0600 under root's directory, written once and published by rename,
// and the caller holds the key's lock, so the mapping can't change under
// the check.
class CheckManifest {
 public:
  CheckManifest() = default;
  CheckManifest(const CheckManifest&) = delete;
  CheckManifest& operator=(const CheckManifest&) = delete;
  ~CheckManifest();
  static Expected<std::shared_ptr<CheckManifest>> Load(const std::string& path);
  static Expected<std::shared_ptr<CheckManifest>> Parse(std::string bytes);
  uint64_t entries() const;
  uint64_t dirs() const;
  const std::string& real() const { return real_; }

 private:
  friend struct WarmChecker;
  // Checks the header and every record's bounds over data_/size_.
  static Status Validate(const char* data, size_t size, std::string* real);
  std::string owned_;           // Parse: the bytes
  void* map_ = nullptr;         // Load: the mapping, size_ bytes
  const char* data_ = nullptr;  // owned_ or map_
  size_t size_ = 0;
  std::string real_;
};

}  // namespace preflight
