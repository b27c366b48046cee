// The layout of a shared tier, its reserved names, and what a reader may
// learn about each entry from names and lstat alone. Writers: ckpt_persist
// and ckpt_commit; removal: ckpt_retention.
//
//   <tier>/NAME/                       a committed checkpoint
//   <tier>/NAME/.preflight-manifest    its combined manifest (ckpt_manifest.h)
//   <tier>/NAME/.preflight-durable     the marker, written last: "preflight-durable 1 <digest>"
//   <tier>/NAME/.preflight-parts/<node>  the part manifests it was made from
//   <tier>/.partial-<run>-NAME/        a commit in progress (hidden: never offered, never read for resume)
//   <tier>/.trash-<anything>           being removed; removed by anyone, never read
//
// The run id is in the partial's name so that copies of different runs
// (a requeued job, two jobs of one chain) never write into one folder, and
// so that gc can ask whether the owning run is dead without reading it.
#pragma once

#include <string>
#include <vector>

#include "preflight/status.h"

namespace preflight {

inline constexpr char kCkptPartialPrefix[] = ".partial-";
inline constexpr char kCkptTrashPrefix[] = ".trash-";
inline constexpr char kCkptPartsDir[] = ".preflight-parts";
inline constexpr char kCkptManifestFile[] = ".preflight-manifest";
inline constexpr char kCkptDurableMarker[] = ".preflight-durable";
// In the node's local checkpoint dir: held (flock) by the one persist of
// this node at a time.
inline constexpr char kCkptPersistLock[] = ".preflight-persist.lock";

// Whether `name` is one of the names above that a checkpoint may not use
// at its top level.
bool CkptReservedName(const std::string& name);

// ".partial-<run>-<name>" and back (false for anything else).
std::string CkptPartialName(const std::string& run, const std::string& name);
bool ParseCkptPartialName(const std::string& entry, std::string* run, std::string* name);

// What one tier entry is, from lstat alone.
enum class CkptTierKind {
  kMarked,    // NAME with manifest and marker: durable if it verifies (CheckCkptDurable)
  kUnmarked,  // NAME with a manifest and no marker: renamed, marker pending (repaired by a commit or gc)
  kForeign,   // NAME without a manifest: not written by preflight, never touched
  kPartial,   // .partial-<run>-NAME
  kTrash,     // .trash-*
};
struct CkptTierEntry {
  std::string entry;  // the directory entry's name
  std::string name;   // the checkpoint's name
  std::string run;    // kPartial: the owning run
  CkptTierKind kind = CkptTierKind::kForeign;
  double mtime = 0;   // the entry's
};

// Every entry of `tier`, sorted by entry name; other hidden names and
// non-directories are left out. A missing tier is an empty list.
Expected<std::vector<CkptTierEntry>> ListCkptTier(const std::string& tier);

}  // namespace preflight
