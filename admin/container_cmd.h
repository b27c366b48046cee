// `preflight container enroot-mounts`: the enroot fstab lines for the job's
// container (core/container_mounts.h), printed for the enroot hook
// conf/enroot/hooks.d/90-preflight.sh. Runs as the job's user, inside the
// task's environment (SLURM_JOB_ID, SLURMD_NODENAME).
#pragma once

#include <string>
#include <vector>

#include "preflight/cli.h"

namespace preflight {

int ContainerCmd(const std::vector<std::string>& args, const CommonCli& cli);

}  // namespace preflight
