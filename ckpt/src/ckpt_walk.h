// The reader of a node's local checkpoint folder (private to ckpt/src):
// what the copy will copy, every entry checked against the rules and the
// bounds before one byte is written. Definitions in ckpt_walk.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "preflight/status.h"

namespace preflight::ckpt_internal {

struct WalkedEntry {
  char type = 'f';  // 'd', 'f', 'l'
  uint32_t mode = 0;
  uint64_t size = 0;
  int64_t mtime_sec = 0;
  long mtime_nsec = 0;
  std::string path;  // relative to the root
  std::string link;  // 'l': the target
};

// A symlink the copy keeps as a symlink: a relative target with no ".."
// component, so that following it can only descend from its own folder,
// and by induction never leaves the tree (an in-tree link it passes
// through obeys the same rule).
bool DownwardSymlink(const std::string& target);

// Every entry below `root` (a directory, refused when a symlink), each
// directory before what it holds, names sorted; top-level names in `skip`
// left out. Refused, with an error naming the path: a FIFO, socket or
// device; a symlink that is not DownwardSymlink; a top-level name reserved
// on the tier (CkptReservedName); any bound of ckpt_manifest.h. Nothing is
// followed.
Expected<std::vector<WalkedEntry>> WalkCheckpoint(const std::string& root, const std::vector<std::string>& skip);

}  // namespace preflight::ckpt_internal
