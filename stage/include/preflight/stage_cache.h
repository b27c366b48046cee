// The per-node cross-job dataset cache.
//
// Layout under `dir` (root-owned, 0700; users never see it directly, jobs
// get read-only bind mounts of published versions):
//   <key>/lock          flock(2) target: held exclusively while a dataset is
//                       checked, built, published or evicted. The kernel
//                       drops it when the holder dies, so a crashed prolog
//                       never blocks the next job.
//   <key>/current       name of the published version ("v-<gen>")
//   <key>/last_used     its mtime is the LRU clock
//   <key>/refs/<job>    a job using version <content>: never evicted
//   <key>/v-<gen>/      data (the copy), manifest, info.json (ReadCacheInfo)
//   <key>/tmp-<gen>/    a build in progress; one found by a new lock holder
//                       belongs to a crashed build and is removed. Builds are
//                       renamed to v-<gen> only after every file verified and
//                       syncfs(), so a crash mid-copy is never served.
// <key> is the 64-bit XXH3 hash of the source path as given (hex).
//
// Unchanged check (the "content check" a site chooses, stage_verify):
// files (default): the per-directory check of stage_manifest.h against
// <version>/check (one listing and one statx per entry, as the job user,
// directories in parallel; every entry's type, mode, size, inode, mtime
// and ctime, and that this user may read every file), so one user's copy
// is served to another only if that user could read the source too.
// Versions built before `check` existed use the older full walk (digest
// of path, type, mode, size, mtime; faccessat per file). dirs: see
// verify_dirs_only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "preflight/stage_copy.h"
#include "preflight/status.h"

namespace preflight {

// What a build leaves besides <tmp>/data: the files the reuse checks read.
struct BuiltCopy {
  CopyStats stats;
  std::vector<std::string> manifest;  // stage_copy.h's manifest lines
  std::string dirs_text;              // the light check's directory list
  std::string digest_light;           // DigestOf(light manifest)
  std::string check;                  // stage_manifest.h bytes; "" for a file source
  uint64_t source_bytes = 0;          // file bytes read from the source for it
  uint64_t peer_bytes = 0;            // ... and received from a peer (stage_peer.h)
  std::string note;                   // how it was built, when not simply copied
};
// Builds `dst_dir_fd`/data. The default reads the source as the job user
// (CopySourceInto); stage_peer.h receives it from a peer instead.
using StageCopier = std::function<Status(int dst_dir_fd, BuiltCopy* out, FaultSide* side)>;

// The default copier: CopyTree of `source` with `co`, and its manifests.
Status CopySourceInto(const std::string& source, const CopyOptions& co, int dst_dir_fd, BuiltCopy* out,
                      FaultSide* side);

struct StageCacheOptions {
  std::string dir;           // the cache root
  uint64_t quota = UINT64_MAX;  // bytes kept by TrimCache callers (UINT64_MAX: no limit)
  unsigned workers = 4;
  unsigned remote_workers = 0;  // a network source: CopyOptions::remote_workers
  uint64_t max_entries = 0;     // CopyOptions::max_entries (stage_max_entries; 0: none)
  double deadline = 0;       // MonotonicSeconds() deadline; 0: none
  StageFs* fs = nullptr;
  // stage_verify = dirs: reuse on the light manifest (stage_copy.h) when
  // the reader is the uid that built the copy; any other reader still gets
  // the full walk, since only it checks that reader's access to each file.
  bool verify_dirs_only = false;
  // On a miss, how the copy is built; empty: CopySourceInto.
  StageCopier copier;
};

struct StagedDataset {
  std::string key;
  std::string version;       // "v-<gen>"
  std::string data_path;     // <dir>/<key>/<version>/data
  std::string source;        // as given
  std::string real_source;   // resolved by the walker
  bool is_dir = true;
  bool hit = false;
  uint64_t bytes = 0;
  uint64_t files = 0;
  double seconds = 0;
  uint64_t source_bytes = 0;  // read from the source for this call (0 on a hit)
  uint64_t peer_bytes = 0;    // received from a peer instead
  std::string note;           // BuiltCopy::note
};

std::string StageCacheKey(const std::string& source);

// What a published version says of itself: <key>/<version>/info.json, one
// JSON object (source, real, bytes, files, dirs, seconds, uid, digest,
// digest_light, check, type). A version an older release published has
// <version>/info instead, key=value lines with the same keys; a cache
// outlives upgrades, so that is read too (info.json first). Values come
// back as text: numbers in decimal, check "1"/"0". Empty when neither
// reads.
std::map<std::string, std::string> ReadCacheInfo(const std::string& version_dir);

// Make `source` available in the cache for `job_id` (which then holds a
// reference until ReleaseJob), copying it unless an unchanged copy exists.
// Concurrent callers for one source serialise on its lock: the first
// copies, the others find its published copy. On failure *side says whose
// fault (stage_copy.h) and nothing is published.
Status StageDataset(const StageCacheOptions& o, const std::string& source, const StageIdentity& who,
                    const std::string& job_id, StagedDataset* out, FaultSide* side);

// Drop `job_id`'s references (all keys). Versions no longer current and no
// longer referenced are removed.
Status ReleaseJob(const StageCacheOptions& o, const std::string& job_id);

struct CacheEntryInfo {
  std::string key;
  std::string source;
  std::string version;
  uint64_t bytes = 0;
  uint64_t files = 0;
  double last_used = 0;           // unix seconds
  std::vector<std::string> jobs;  // referencing jobs
  bool busy = false;              // locked by a build right now
};
Expected<std::vector<CacheEntryInfo>> ListCache(const StageCacheOptions& o);
uint64_t CacheBytes(const std::vector<CacheEntryInfo>& entries);

// Trim to `quota` bytes (0: evict every unused dataset): remove leftovers
// of crashed builds and unreferenced old versions, then unreferenced
// datasets, least recently used first. Never touches a referenced version
// or a dataset whose lock is held. `removed` gets "KEY SOURCE" lines.
Status TrimCache(const StageCacheOptions& o, uint64_t quota, std::vector<std::string>* removed);

// Remove one dataset (KEY or source path); refused while a job uses it.
Status RemoveCacheEntry(const StageCacheOptions& o, const std::string& key_or_source);

}  // namespace preflight
