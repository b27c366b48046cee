// The manifest of a checkpoint on the shared tier: every directory, file
// and symlink with its size and checksum, one per node's part (written by
// that node last, ckpt_persist.h) and one combined (written by the commit).
// One writer (SerializeCkptManifest) and one reader (ParseCkptManifest).
//
// Text, one record a line, every free-form field %XX-escaped (bytes at or
// below 0x20, 0x7f and '%'), so that any file name survives exactly (JSON
// strings could not carry names that are not UTF-8):
//
//   preflight-ckpt-manifest 1 part|combined
//   name <NAME>
//   run <run id>
//   node <node>                      (part only: whose part)
//   nodes <node> <node> ...          (every node whose part makes the checkpoint)
//   marker <file>|-                  (the file the commit writes, CkptCommitMarker)
//   time <seconds since the epoch>   (when the checkpoint became complete locally; combined: the latest)
//   d <mode> <node#> <path>
//   f <mode> <node#> <size> <hash> <path>
//   l <mode> <node#> <path> <target>
//   end <entries> <bytes>
//
// <mode> is octal, <node#> an index into `nodes` (the part that brought the
// entry), <hash> 16 hex digits of CkptFileHash. Paths are relative to the
// checkpoint folder; every parent of an entry is itself an entry. The
// `end` line makes a cut manifest a parse error.
//
// Bounds, each a constant with its own error: entries, path and name
// lengths, depth, nodes, manifest size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "preflight/status.h"

namespace preflight {

inline constexpr uint64_t kCkptMaxEntries = 1000000;         // files + dirs + symlinks in one checkpoint
inline constexpr size_t kCkptMaxDepth = 64;                  // directory levels below the checkpoint folder
inline constexpr size_t kCkptMaxComponentBytes = 255;        // one path component (NAME_MAX)
inline constexpr size_t kCkptMaxPathBytes = 3800;            // a relative path (PATH_MAX less the tier's prefix)
inline constexpr size_t kCkptMaxNameBytes = 200;             // a checkpoint's folder name (.partial-<run>-NAME fits NAME_MAX)
inline constexpr size_t kCkptMaxRunBytes = 40;               // a run id
inline constexpr size_t kCkptMaxNodeBytes = 64;              // a node name
inline constexpr size_t kCkptMaxNodes = 8192;                // parts of one checkpoint
inline constexpr uint64_t kCkptMaxManifestBytes = 1ull << 30;  // one manifest file
inline constexpr uint64_t kCkptHashPiece = 64ull << 20;      // CkptFileHash's piece

// A checkpoint's name: one path component, not starting with '.', no '/'
// or NUL, at most kCkptMaxNameBytes.
Status ValidCkptName(const std::string& name);
// A run id (the job id and restart count, say): [A-Za-z0-9_.+], 1 to
// kCkptMaxRunBytes, so that `.partial-<run>-<NAME>` splits at the first '-'.
Status ValidCkptRun(const std::string& run);
// A node name: [A-Za-z0-9_.-], not starting with '.', 1 to kCkptMaxNodeBytes.
Status ValidCkptNode(const std::string& node);
// A relative path inside a checkpoint: no empty, "." or ".." component, no
// leading '/', every bound above.
Status ValidCkptRelPath(const std::string& path);

struct CkptEntry {
  char type = 'f';  // 'd', 'f', 'l'
  uint32_t mode = 0;
  uint32_t node = 0;  // index into CkptManifest::nodes
  uint64_t size = 0;
  uint64_t hash = 0;
  std::string path;
  std::string link;  // 'l': the target
  bool operator==(const CkptEntry& o) const {
    return type == o.type && mode == o.mode && size == o.size && hash == o.hash && path == o.path && link == o.link;
  }
};

struct CkptManifest {
  bool combined = false;
  std::string name, run;
  std::string node;                // a part's node
  std::vector<std::string> nodes;  // every part's node
  std::string marker;              // "" for none
  double time = 0;
  std::vector<CkptEntry> entries;
  uint64_t Bytes() const;
  uint64_t Files() const;
};

std::string SerializeCkptManifest(const CkptManifest& m);
// Strict: any malformed line, a bound exceeded, a duplicate path, an entry
// whose parent is missing, or no `end` line is an error naming the line.
Expected<CkptManifest> ParseCkptManifest(const std::string& text);
// Only the header lines (up to the first entry): enough to say which parts
// a partial folder waits for, without reading a whole manifest.
Expected<CkptManifest> ParseCkptManifestHeader(const std::string& prefix);

// The checksum of a file's bytes: the XXH3-64 of the sequence of XXH3-64s
// (little-endian) of its kCkptHashPiece pieces, so pieces can be hashed in
// any order and in parallel. An empty file hashes zero pieces.
uint64_t CkptCombinePieces(const std::vector<uint64_t>& pieces);
uint64_t CkptHashBytes(const void* p, size_t n);  // one piece
// One piece's hash, fed in any number of steps.
class CkptPieceHasher {
 public:
  CkptPieceHasher();
  ~CkptPieceHasher();
  CkptPieceHasher(const CkptPieceHasher&) = delete;
  CkptPieceHasher& operator=(const CkptPieceHasher&) = delete;
  void Update(const void* p, size_t n);
  uint64_t Digest() const;

 private:
  void* state_;  // XXH3_state_t
};
// The checksum of bytes in memory (tests, small files).
uint64_t CkptFileHashOf(const std::string& bytes);
// XXH3-64 of a manifest's bytes: what the durable marker names.
uint64_t CkptManifestDigest(const std::string& bytes);

std::string CkptEscape(const std::string& s);
Expected<std::string> CkptUnescape(const std::string& s);
std::string CkptHex(uint64_t v);

}  // namespace preflight
