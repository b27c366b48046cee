// The wire format between the source walker child (stage_walk.cc, its
// Sender in stage_walk_send.h) and the parent that reads it (Receive,
// stage_walk.h): records batched into SOCK_SEQPACKET messages, each file's
// descriptor beside its record (SCM_RIGHTS). Private to stage/src.
#pragma once

#include <cstddef>
#include <cstdint>

namespace preflight::stage_internal {

enum Kind : uint8_t { kRoot = 1, kEntry = 2, kError = 3, kEnd = 4 };
struct Wire {
  uint8_t kind;
  char type;  // 'd', 'f', 'l'
  uint16_t path_len;
  uint16_t link_len;
  uint8_t has_fd;
  uint8_t pad = 0;
  uint32_t mode;
  uint32_t mtime_nsec;
  uint64_t size;
  int64_t mtime_sec;
  int64_t ctime_sec;
  uint32_t ctime_nsec;
  uint32_t err;  // kError: the errno of the failed call, 0 for a refusal
  uint64_t ino;
};
constexpr size_t kMsgBytes = 60 * 1024;
constexpr size_t kMaxFdsPerMsg = 128;  // below SCM_MAX_FD (253)

}  // namespace preflight::stage_internal
