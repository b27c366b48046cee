// The one way stage/ runs code as the job user (private to stage/src). The
// copy's source walker (stage_walk.cc) and the warm check
// (stage_manifest.cc) are forked children of the root prolog that keep one
// descriptor of their parent's, read with the user's effective identity
// (ReadAsStageUser: real and saved uid 0), and are not dumpable: the user's
// processes can neither signal them (a `pkill -u USER` once drained the
// node), nor ptrace them, nor read their memory (the cache's manifest), and
// they die with their parent. An end without a result is still possible
// (root, the OOM killer, a crash on the user's data): the parent classes it
// as the job's (StageChildEnd).
#pragma once

#include <sys/types.h>

#include <string>

#include "preflight/stage_copy_options.h"  // FaultSide
#include "preflight/stage_user.h"
#include "preflight/status.h"

namespace preflight::stage_internal {

// In the child, right after fork: keeps only `fd` (as fd 3), with stdio on
// /dev/null (the parent's lock and cache descriptors must not live on in a
// process running as the user, nor slurmd's pipes in one that may be left
// stuck in a dead server), takes `who`'s identity (ReadAsStageUser), then PR_SET_DUMPABLE 0
// and PR_SET_PDEATHSIG SIGKILL (after the uid change, which clears it).
// Returns "" once the child runs as the user, else why not ("cannot read as
// user UID: ..."), which the caller reports on fd 3 before it exits;
// *err (if given) gets the failed call's errno then (0: not a call's).
std::string BecomeStageUser(int fd, const StageIdentity& who, int* err = nullptr);

// A stage child (`what`: "source walker", "cache check") ended without its
// result: reap it (waiting at most 10 s, then SIGKILL) and say why. An end
// by a signal is the job's (*side = kSource: it ran with the job user's
// identity on the user's data, and only root, the OOM killer or a crash on
// that data can end it now), named with the signal: "staging SRC: the
// source walker (reading as the job's user) was killed by signal 9
// (SIGKILL)". Any other end without a result is the node's (*side = kNode).
// The child is reaped either way; *pid becomes -1.
Status StageChildEnd(pid_t* pid, const char* what, const std::string& src, FaultSide* side);

// Ends a stage child that is no longer wanted (a timeout, a failure on the
// root side): SIGKILL, then reaps it, waiting at most `bound_s`. A child
// stuck in a network file system's request (a hard NFS mount or a FUSE
// server that stopped answering) cannot die before the server answers;
// it is then left behind, its parent's end of every pipe closed, so the
// prolog still ends within stage_timeout plus `bound_s` and says the
// source timed out. False when it was left.
bool KillChild(pid_t pid, double bound_s = 5);

}  // namespace preflight::stage_internal
