// The binary layout of a cached copy's `check` file (private to
// stage/src): written by CheckManifestBuilder and validated by
// CheckManifest (stage_manifest.cc), read by the warm check
// (stage_warm.cc). Little-endian, native alignment; the magic's last
// digits are the version.
#pragma once

#include <cstdint>

namespace preflight::stage_internal {

constexpr char kMagic[8] = {'P', 'F', 'C', 'H', 'K', '0', '1', '\n'};
constexpr uint32_t kNoEntry = UINT32_MAX;
constexpr uint8_t kFlagAcl = 1;

struct Rec {  // one entry (and the root)
  uint64_t ino, size;
  int64_t mtime_sec, ctime_sec;
  uint32_t mtime_nsec, ctime_nsec, mode, name_off;  // name, NUL, link target, NUL
  uint16_t name_len, link_len;
  uint8_t flags, pad[3];
};
struct DirRec {
  uint32_t path_off, path_len, first, count, self;  // self: its entry in the parent; kNoEntry for the root
  uint32_t pad;
};
struct Header {
  char magic[8];
  uint32_t ndirs, nentries, strings_len, real_len;  // the real path is the strings' first bytes
  Rec root;
};


}  // namespace preflight::stage_internal
