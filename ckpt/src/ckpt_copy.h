// The copy of one node's part into the partial folder on the tier (private
// to ckpt/src): many pieces in flight, each hashed as it is written, every
// file and folder fsynced. Definitions in ckpt_copy.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt_walk.h"
#include "preflight/ckpt_fault.h"
#include "preflight/ckpt_manifest.h"
#include "preflight/status.h"

namespace preflight::ckpt_internal {

struct CopyOptions {
  unsigned threads = 8;  // pieces (kCkptHashPiece bytes) in flight
  double deadline = 0;   // MonotonicSeconds(); 0: none
  uint64_t rate_cap = 0; // bytes per second over all pieces of the call; 0: none
  CkptFaultHook fault;
};

struct CopyStats {
  uint64_t files = 0, bytes = 0;
};

// Copies `entries` (WalkCheckpoint of the folder open as `src`) into the
// folder open as `dst`: directories first (an existing one is fine: other
// nodes' parts share them), then every file's pieces on `o.threads`
// threads (an existing file is unlinked first: a dead attempt's, or a
// byte-identical one of another node), then symlinks; each file fsynced
// before it counts, then every folder fsynced deepest first, `dst` last.
// Files get their source's mode bits, folders theirs and owner rwx (other
// nodes may still be writing into them). A file that changes size or mtime
// while being copied is an error: a checkpoint is copied only once complete.
// Returns the entries as the manifest lists them (with hashes), in the
// walk's order; `node` is the index for CkptEntry::node.
Expected<std::vector<CkptEntry>> CopyPart(int src, const std::string& src_shown, int dst, const std::string& dst_shown,
                                          const std::vector<WalkedEntry>& entries, uint32_t node, const CopyOptions& o,
                                          CopyStats* stats);

}  // namespace preflight::ckpt_internal
