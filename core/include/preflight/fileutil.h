// File helpers with the publish-only-when-complete contract.
#pragma once

#include <cstddef>
#include <string>
#include <vector>
#include <sys/stat.h>
#include <sys/types.h>

#include "preflight/status.h"

namespace preflight {

// mkdir -p with `mode` for the directories it creates.
Status MakeDirs(const std::string& path, mode_t mode = 0755);
// rm -r: removes `name` under `dirfd` and everything below it, following no
// symlink and refusing (EBUSY) to descend into a mount point; a missing
// `name` is fine. On an error it goes on with the rest and returns the
// first (`shown` names the path in it).
Status RemoveTreeAt(int dirfd, const std::string& name, const std::string& shown);
Status RemoveTree(const std::string& path);
// One folder or file of a user's that MakePrivateDirs moved out of the way.
struct SetAside {
  std::string path;      // where root wanted its folder
  std::string moved_to;  // where the user's entry is now, untouched
  uid_t owner = 0;
};

// A directory root writes into on others' behalf, made safe against users
// who can write somewhere above it (a 1777 NVMe scratch, say). Walks `path`
// from "/" with openat(O_NOFOLLOW) one component at a time, creating what is
// missing with `mode`, and refuses (Code::kPermission, naming the component
// and why; PrivateDirRefusal) a symlink anywhere, a non-directory, an owner
// other than root or the caller's euid, a directory in the chain that
// others can write without the sticky bit, and `path` itself writable by
// group or others at all. So a directory a user pre-created or linked is
// never used. Such a refusal is a site (config) fault: the node's admin
// must fix the folder.
//
// Except with `set_aside`: a component that a user could have placed --
// owned by someone else than root or the euid, in a sticky world-writable
// folder (/tmp, a 1777 scratch; UserEntryInStickyDir) -- is the user's
// doing, not the site's. It is moved aside, never followed, read or
// deleted: a fresh private folder is made under a new name beside it
// (`NAME.set-aside.YYYYmmdd-HHMMSS.uidUID`, a number added when taken) and
// the two are swapped in one renameat2(RENAME_EXCHANGE), so no user can
// slip a folder in between (file systems without the exchange: a rename,
// then mkdir, retried a few times; a user who wins every race gets
// Code::kUnavailable, never kPermission). Each one is appended to
// *set_aside for the caller to log.
Status MakePrivateDirs(const std::string& path, mode_t mode, std::vector<SetAside>* set_aside = nullptr);
// MakePrivateDirs, keeping the checked directory open: an O_DIRECTORY
// descriptor (close-on-exec, the caller closes it) for openat/renameat, so
// what is written lands in the very directory that was checked, whatever
// happens to the path afterwards.
Expected<int> OpenPrivateDir(const std::string& path, mode_t mode, std::vector<SetAside>* set_aside = nullptr);

// Why root may not use `st` (lstat of `shown`, not followed) as a link of
// a private chain: "" when it may, else the reason MakePrivateDirs gives,
// "SHOWN: owned by uid 1001, not root; refused (...)". `last`: the folder
// itself (group- or world-writable refused), else a folder above it
// (world-writable only with the sticky bit). `me`: the euid, which may
// own the chain as root does.
std::string PrivateDirRefusal(const std::string& shown, const struct stat& st, bool last, uid_t me);
// True when `entry`, in the folder `parent`, is one a user may have placed
// there and root may move aside: `parent` is world-writable with the
// sticky bit (so its owner, root, may rename what is in it) and `entry` is
// owned by someone other than root and `me`.
bool UserEntryInStickyDir(const struct stat& parent, const struct stat& entry, uid_t me);

// Durable replace: write to the hidden DIR/.NAME.tmp.PID.SEQ, fsync it,
// rename over PATH, fsync DIR. Readers see the old file or the whole new
// one, never a part; after an Ok a crash keeps the new one.
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
