// The one way stage/ runs code as the job user (private to stage/src). The
// copy's source walker (stage_walk.cc) and the warm check
// (stage_manifest.cc) are forked children of the root prolog that keep one
// descriptor of their parent's, drop to the user for good, and are then not
// dumpable: the user's other processes, same uid, can neither ptrace them
// nor read their memory (the cache's manifest), and they die with their
// parent.
#pragma once

#include <string>

#include "preflight/stage_user.h"

namespace preflight::stage_internal {

// In the child, right after fork: keeps only `fd` (as fd 3) and stdio (the
// parent's lock and cache descriptors must not live on in a process running
// as the user), drops to `who` (DropToStageUser), then PR_SET_DUMPABLE 0
// and PR_SET_PDEATHSIG SIGKILL (after the uid change, which clears it).
// Returns "" once the child runs as the user, else why not ("cannot read as
// user UID: ..."), which the caller reports on fd 3 before it exits;
// *err (if given) gets the failed call's errno then (0: not a call's).
std::string BecomeStageUser(int fd, const StageIdentity& who, int* err = nullptr);

}  // namespace preflight::stage_internal
