// Who reads a --stage source, and how a process becomes that user. The
// root prolog never reads a user's source as root: a forked child reads
// with the job user's effective identity (ReadAsStageUser; the descriptor
// hygiene and the no-ptrace part around it are in stage_user_child.h,
// private to stage/src).
#pragma once

#include <sys/types.h>

#include <string>

namespace preflight {

// Who reads the source. drop=false reads as the caller (tests, non-root).
struct StageIdentity {
  bool drop = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string user;  // for the supplementary groups (getgrouplist); may be empty
};

// Drop the calling process to `who` for good: supplementary groups, gid,
// then uid, in that order (as pyxis does); verified (getting root back must
// fail). For forked readers. False with *error ("setgroups: ...") if any
// step fails; the process must then not go on to read.
bool DropToStageUser(const StageIdentity& who, std::string* error);

// The stage children's identity (issue 29): every access check as `who`,
// while no process of `who` can signal, ptrace or renice the child.
//   - supplementary groups, then real, effective and saved gid: `who`'s;
//   - effective (so file-system) uid: `who`'s; real and saved uid stay 0.
//     The kernel lets a process signal another only if its real or
//     effective uid is the target's real or saved uid (kill(2)), and
//     ptrace, prlimit and setpriority ask the same of the real uid, so the
//     user's `pkill -9 -u USER` passes the child by;
//   - every capability set emptied (capset), after the uid change has
//     already cleared the effective one: nothing overrides a file's mode,
//     and a seteuid(0) would give back a uid 0 without capabilities;
//   - no_new_privs: no exec can add any.
// Callers must ask the kernel with the effective identity: open, stat and
// opendir do; access(2) and faccessat without AT_EACCESS check the real
// uid (0) and must not be used. Verified: the effective uid is `who`'s and
// no capability is left. False with *error if a step fails; the process
// must then not go on to read.
bool ReadAsStageUser(const StageIdentity& who, std::string* error);

}  // namespace preflight
