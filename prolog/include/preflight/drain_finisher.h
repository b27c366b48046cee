// The detached finisher of a failed prolog's or epilog's drain
// (DrainMode::kDetached, node_phase.h).
//
// A failed prolog or epilog cannot call Slurm (it may block on slurmctld),
// so it hands its reason to a detached `preflight-prolog --finish-drain`.
// That helper must act for its own failure only:
//   - a newer failure on the node supersedes it: the prolog claims the node
//     (state_paths.h: <node>.drain-finisher holds the newest claim) before
//     it exits, so before Slurm can drain for it, and an older helper that
//     finds another claim there stops without touching the node;
//   - it replaces only Slurm's generic "Prolog error"/"Epilog error"; a
//     node drained for anything else (an admin's reason, another preflight
//     reason) keeps it;
//   - it sets the reason only (`scontrol update Reason=`), never the state,
//     once Slurm has drained: an admin who resumes the node meanwhile is
//     never overruled;
//   - it drains the node itself only when Slurm did not within its bound
//     (Slurm ignores an epilog failure of a requeued job): the check did
//     fail on this node.
#pragma once

#include <string>

#include "preflight/config.h"
#include "preflight/slurmctl.h"
#include "preflight/status.h"

namespace preflight {

// Slurm's own reason for a failed prolog or epilog (slurmctld's node_mgr.c
// and job_mgr.c, 22.05 to 25.11): the one kind of reason the finisher replaces.
bool IsSlurmFailureReason(const std::string& reason);

enum class FinishAct {
  kWait,        // Slurm has not drained the node yet
  kSetReason,   // Slurm drained it for the failure: put preflight's reason in place
  kLeave,       // drained for another reason: that reason stays
  kSuperseded,  // a newer failure's helper owns the node now
  kDrain,       // the bound passed and Slurm never drained it: drain it
};
// One look at the node. `node`: nullptr when slurmctld could not be asked.
FinishAct DecideFinish(const NodeState* node, bool superseded, bool bound_passed);

// Claims the node for a new finisher (the newest claim wins): writes a fresh
// token to <state_dir>/nodes/<node>.drain-finisher and returns it.
Expected<std::string> ClaimDrainFinish(const Config& cfg, const std::string& node);

// The helper's work: looks at the node every 100 ms for up to `wait_ms` and
// acts as DecideFinish says. `token`: the claim it was started with; "" for
// one started by hand, which claims the node itself. Ok when it acted, left
// the node alone or was superseded; `what` (may be null) says which.
Status FinishDrain(const Config& cfg, const std::string& node, const std::string& reason, std::string token,
                   unsigned wait_ms, std::string* what = nullptr);

}  // namespace preflight
