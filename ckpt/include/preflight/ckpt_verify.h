// Checking a checkpoint folder against its manifest.
//
// Sizes are always checked; checksums on request (full) or by sampling.
// Why sampling is worth having, and what it catches: the copy hashed every
// byte as it wrote it and fsynced every file before the part's manifest was
// written, and the commit checked every size, so what is left to catch on
// the tier is storage that acknowledged a write and later lost or garbled
// it (a misbehaving NFS server or firmware). Such faults are rarely
// confined to one file, so reading back a random sample of whole files up
// to a byte budget finds them at a fraction of the cost; the seed is the
// caller's (e.g. the time), so repeated resumes read different files and
// together cover the checkpoint. One flipped bit in one unread file is not
// caught: ask for full where that matters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "preflight/ckpt_manifest.h"
#include "preflight/status.h"

namespace preflight {

enum class CkptVerify { kSizes, kSample, kFull };
// "sizes", "sample", "full".
Expected<CkptVerify> ParseCkptVerify(const std::string& s);
const char* CkptVerifyName(CkptVerify v);

struct CkptVerifyOptions {
  CkptVerify level = CkptVerify::kSizes;
  unsigned threads = 8;               // files checked at once
  uint64_t sample_bytes = 1ull << 30;  // kSample: bytes read back at most (at least one file)
  uint64_t seed = 0;                  // kSample: which files
  double deadline = 0;                // MonotonicSeconds(); 0: none
};

struct CkptVerifyStats {
  uint64_t entries = 0;       // checked
  uint64_t files_hashed = 0;  // read back whole
  uint64_t bytes_hashed = 0;
};

// Which files kSample reads: indexes into m.entries, in the order of the
// XXH3 of (seed, path), taken while they fit in `budget` bytes (the first
// always). Pure.
std::vector<size_t> CkptSampleFiles(const CkptManifest& m, uint64_t budget, uint64_t seed);

// Every entry of `m` under the folder `root` (not followed if a symlink):
// 'd' must be a directory, 'l' a symlink with the same target, 'f' a
// regular file of the manifest's size, opened (on NFS an open revalidates
// what a stat may answer from its cache) and, per the level, read back and
// hashed. Entries not in `m` are not looked at. The first mismatch is a
// kFailed status naming the path, what was expected and what was found; a
// missing entry is kFailed too; an unreadable one is the errno's status.
Status VerifyCkptTree(const std::string& root, const CkptManifest& m, const CkptVerifyOptions& o,
                      CkptVerifyStats* stats = nullptr);
// The same under an open directory; `shown` names it in messages.
Status VerifyCkptTreeAt(int rootfd, const std::string& shown, const CkptManifest& m, const CkptVerifyOptions& o,
                        CkptVerifyStats* stats = nullptr);

// The checksum (CkptCombinePieces) of the first `size` bytes of open file
// `fd`; kFailed when it holds fewer.
Expected<uint64_t> CkptHashFd(int fd, uint64_t size, double deadline = 0);

}  // namespace preflight
