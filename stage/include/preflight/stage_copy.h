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
// All write-side calls go through StageFs (stage_copy_options.h), the seam
// tests use to inject faults (disk full, EIO mid-file, a kill mid-copy).
//
// Thread safety: one call at a time per process is expected (the child is
// forked from the calling thread before any worker starts).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "preflight/fileutil.h"  // RemoveTree, RemoveTreeAt
#include "preflight/stage_copy_options.h"  // StageFs, FaultSide, CopyOptions, CopyStats
#include "preflight/stage_manifest.h"  // the manifest lines, CheckManifestBuilder
#include "preflight/status.h"

namespace preflight {

// Copy `src` into `dst_dir_fd`/`dst_name` (which must not exist): a
// directory tree or one file, as the source is. On failure the partial
// copy is left for the caller to remove and *side says whose fault.
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
