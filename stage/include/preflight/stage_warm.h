// The warm check: whether a cached copy is still the source's, decided
// from the copy's `check` file (stage_manifest.h) and one listing per
// directory plus one statx per entry of the live source, as the job user.
// See stage_manifest.h for what is compared and when a file's readability
// comes from its mode bits.
#pragma once

#include <cstdint>
#include <string>

#include "preflight/stage_copy.h"      // FaultSide
#include "preflight/stage_manifest.h"  // CheckManifest
#include "preflight/stage_user.h"      // StageIdentity
#include "preflight/status.h"

namespace preflight {

struct WarmCheckResult {
  bool same = false;        // serve the cached copy
  std::string why;          // when !same: the first difference seen
  uint64_t entries = 0;     // entries statted
  uint64_t by_mode = 0;     // files whose readability came from the mode bits
  uint64_t by_access = 0;   // files checked with faccessat (ACL, uid 0, other fs)
};

// The warm check of `src` against `m`, as `who`, with `threads` threads
// on a local source and `remote_threads` on a network or FUSE one
// (OnNetworkFilesystem; the larger of the two is used there): directories
// in parallel, and a directory of more than 64 entries split into chunks
// of 64 that any free thread takes. A difference is not an error (same=false); an
// unreadable file or directory is (Permission, side kSource), as is a
// timeout (deadline: MonotonicSeconds()).
Status CheckUnchanged(const std::string& src, const CheckManifest& m, const StageIdentity& who, unsigned threads,
                      unsigned remote_threads, double deadline, WarmCheckResult* out, FaultSide* side);

}  // namespace preflight
