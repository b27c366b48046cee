// File helpers with the publish-only-when-complete contract.
#pragma once

#include <cstddef>
#include <string>
#include <sys/types.h>

#include "preflight/status.h"

namespace preflight {

// mkdir -p with `mode` for the directories it creates.
Status MakeDirs(const std::string& path, mode_t mode = 0755);
// A directory root writes into on others' behalf, made safe against users
// who can write somewhere above it (a 1777 NVMe scratch, say). Walks `path`
// from "/" with openat(O_NOFOLLOW) one component at a time, creating what is
// missing with `mode`, and refuses (Code::kPermission, naming the component
// and why) a symlink anywhere, a non-directory, an owner other than root or
// the caller's euid, a directory in the chain that others can write without
// the sticky bit, and `path` itself writable by group or others at all. So
// a directory a user pre-created or linked is never used. The result is a
// site (config) fault: the node's admin must fix the folder.
Status MakePrivateDirs(const std::string& path, mode_t mode);
// MakePrivateDirs, keeping the checked directory open: an O_DIRECTORY
// descriptor (close-on-exec, the caller closes it) for openat/renameat, so
// what is written lands in the very directory that was checked, whatever
// happens to the path afterwards.
Expected<int> OpenPrivateDir(const std::string& path, mode_t mode);

// Write to PATH.tmp.PID, fsync, rename over PATH: readers see the old file or
// the whole new one, never a part.
Status WriteFileAtomic(const std::string& path, const std::string& data, mode_t mode = 0644);
Expected<std::string> ReadWholeFile(const std::string& path);

// Writes all `n` bytes at `p` to `fd`: retried on EINTR and after short
// writes. False with errno set when the descriptor fails (EIO for a write
// that wrote nothing). `no_sigpipe`: `fd` is a socket whose peer may be
// gone; that comes back as EPIPE (send with MSG_NOSIGNAL) instead of a
// SIGPIPE that would end the process. The one write-all loop of the tree.
bool WriteAll(int fd, const void* p, size_t n, bool no_sigpipe = false);
inline bool WriteAll(int fd, const std::string& s) { return WriteAll(fd, s.data(), s.size()); }

}  // namespace preflight
