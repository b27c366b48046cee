// Named points of the persist and commit protocol (ckpt_persist.h), where
// an injected hook may stop it: tests simulate a kill (the hook _exits in
// a forked child) or a failing tier (the hook returns ENOSPC or EIO) at
// every step and then check what a reader sees. Production code passes no
// hook.
#pragma once

#include <cstdint>
#include <functional>

namespace preflight {

enum class CkptFaultPoint {
  kPartFileDone,      // n: the part's n-th file (from 1) is written, fsynced and closed
  kPartDataSynced,    // every file, symlink and folder of the part is on the tier and fsynced
  kPartManifestDone,  // the part's manifest is published
  kCommitVerified,    // every part arrived and the partial folder verified
  kCommitManifestDone,  // the combined manifest is written, before the rename
  kCommitRenamed,     // .partial-<run>-NAME is NAME, before the parent's fsync and the marker
  kCommitMarked,      // the durable marker is written
};

inline const char* CkptFaultPointName(CkptFaultPoint p) {
  switch (p) {
    case CkptFaultPoint::kPartFileDone: return "part-file-done";
    case CkptFaultPoint::kPartDataSynced: return "part-data-synced";
    case CkptFaultPoint::kPartManifestDone: return "part-manifest-done";
    case CkptFaultPoint::kCommitVerified: return "commit-verified";
    case CkptFaultPoint::kCommitManifestDone: return "commit-manifest-done";
    case CkptFaultPoint::kCommitRenamed: return "commit-renamed";
    case CkptFaultPoint::kCommitMarked: return "commit-marked";
  }
  return "?";
}

// Called at each point (n: the file count for kPartFileDone, else 0), from
// any of the copy's threads. 0 goes on; an errno fails the step as if a
// system call there had failed with it.
using CkptFaultHook = std::function<int(CkptFaultPoint, uint64_t n)>;

}  // namespace preflight
