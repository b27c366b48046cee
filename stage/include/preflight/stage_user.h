// Who reads a --stage source, and how a process becomes that user. The
// root prolog never reads a user's source as root: a forked child drops to
// the job user for good (stage_user_child.h, private to stage/src, adds the
// descriptor hygiene and the no-ptrace part around this drop).
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

}  // namespace preflight
