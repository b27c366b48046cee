// The collective check's hooks in slurmstepd (see man preflight-nccl(1)).
//
// Why here: the batch step's task is forked before the batch script is
// exec'ed; slurm_spank_task_init_privileged runs in that child as root and
// slurm_spank_task_init runs there as the user, stdio already on the job's
// output. Blocking in the first runs the check before the script's first
// line; failing the second means the script is never exec'ed.
//
// Who decides what (SECURITY): every rank of a collective runs as the job's
// user, so a user can make any multi-node figure look bad (SIGSTOP a rank).
// Those figures therefore only decide the fate of the user's own job. A node
// is drained only by a root-run measurement: the localization step's tasks
// make each node's slurmstepd run `preflight-nccl --intra-node --records` as
// root, on the GPUs slurmctld says the job holds there; the plugin drains
// the node from that run's failed record (collective_records.h) when no
// other step of the job ran there meanwhile. The batch step then learns
// what was drained from slurmctld, which the user cannot write. Inter-node suspects found by
// user-run pair tests are reported, and drained only with the site's
// nccl_drain_internode=yes.
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#include "plugin_args.h"
#include "preflight/config.h"
#include "preflight/options.h"

namespace preflight::spank {

// Root, in the task's child before exec. Returns 0 (results are kept for
// NcclTaskInit in the same process) or -1 on a setup error.
int NcclTaskPrivileged(spank_t sp, const PluginArgs& args, const JobOptions& opts);

// As the user, just before exec: print what NcclTaskPrivileged found; after
// a failed check requeue the job (if so decided) and return -1, so the
// batch script never runs.
int NcclTaskInit(spank_t sp);

}  // namespace preflight::spank
