// preflight-run's one entry point (man preflight-run(1)). The wrapper
// binary only parses its command line into a RunPolicy (run_policy.h) and
// calls RunJob; the decisions are run_decide.h.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "preflight/config.h"
#include "preflight/hostlist.h"
#include "preflight/job.h"
#include "preflight/run_decide.h"
#include "preflight/run_policy.h"

namespace preflight {

// Exit status of preflight-run after it requeued the job: the batch script
// should stop (EX_TEMPFAIL).
inline constexpr int kRequeuedExit = 75;

// Run argv under `p` in the job described by env (SLURM_JOB_ID,
// SLURMD_NODENAME, SLURM_RESTART_COUNT, SLURM_JOB_NODELIST). Returns the
// exit status for preflight-run: the command's, kRequeuedExit after a
// requeue, 127 when it cannot be started, 2 for a bad policy.
int RunJob(const Config& cfg, const RunPolicy& p, const EnvMap& env, const std::vector<std::string>& argv);

}  // namespace preflight
