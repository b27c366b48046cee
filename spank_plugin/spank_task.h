// Remote-context (slurmstepd) work done per task.
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#include <string>

#include "plugin_args.h"
#include "preflight/config.h"
#include "preflight/job.h"
#include "preflight/options.h"

namespace preflight::spank {

// The value of `name` in the job's environment, or "" with *found=false.
std::string GetJobEnv(spank_t sp, const char* name, bool* found = nullptr);
// The whole job environment (S_JOB_ENV), for the readers that take a map.
EnvMap JobEnvMap(spank_t sp);

// Sets the task's preflight variables, never overriding one the user set,
// and in the batch step's first task prints this node's prolog summary to
// the job's output. Returns 0, or -1 with the error logged.
int TaskInit(spank_t sp, const PluginArgs& args, const JobOptions& opts);

// Topology environment (spank_env.cc). Once per step in slurmstepd, as root:
// load the node's topology (cache, or hwloc on first use) and open the job's
// env record; the tasks inherit both. Then in each task, as the user: set
// the variables for the task's GPUs. Both return 0 even when the environment
// cannot be computed (it is logged): it never fails a task. StepExit frees.
int StepInit(spank_t sp, const PluginArgs& args, const JobOptions& opts);
int TaskTopoEnv(spank_t sp, const JobOptions& opts);
void StepExit();

}  // namespace preflight::spank
