// What a prolog, epilog or task knows about its job, parsed from the
// environment slurmd/slurmstepd gives it. Pure: takes a map, not getenv.
#pragma once

#include <map>
#include <string>
#include <sys/types.h>
#include <vector>

#include "preflight/config.h"
#include "preflight/options.h"
#include "preflight/status.h"

namespace preflight {

using EnvMap = std::map<std::string, std::string>;
EnvMap EnvironToMap(char** envp);

struct JobContext {
  std::string job_id;        // SLURM_JOB_ID (SLURM_JOBID on older releases)
  std::string node;          // SLURMD_NODENAME, else the host's short name
  std::string user;          // SLURM_JOB_USER
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  std::string nodelist;      // SLURM_JOB_NODELIST
  std::string partition;     // SLURM_JOB_PARTITION
  std::vector<int> gpus;     // SLURM_JOB_GPUS (prolog) / CUDA_VISIBLE_DEVICES
  // The job's options (--nccl-check, --preflight-env, --stage), parsed once
  // from its job-control variables by the option table (options.h:
  // JobOptionsFromEnv); nothing downstream reads those variables again.
  JobOptions options;
  // A --stage value that does not parse: not an error of the context (a bad
  // --stage fails only the job's tasks, stage_job.h), kept for the stage step.
  Status stage_error;
  Level level = Level::kOff; // effective level: EffectiveLevel(options, cfg), or the prolog's --level
};

// Errors name the variable: "SPANK_PREFLIGHT_NCCL_CHECK='bogus': invalid level ...".
// `job_id` is required unless `allow_no_job` (admin runs by hand).
Expected<JobContext> JobContextFromEnv(const EnvMap& env, const Config& cfg, bool allow_no_job);

// The check level a job runs at: its --nccl-check, else the site's default_level.
Level EffectiveLevel(const JobOptions& opts, const Config& cfg);

// Whether the job asked for --stage: a spec, or one that did not parse.
inline bool StageRequested(const JobContext& job) { return job.options.stage_given || !job.stage_error.ok(); }

// "0,1,3" or "0-3,6" -> {0,1,3} / {0,1,2,3,6}.
Expected<std::vector<int>> ParseIdList(const std::string& s);

std::string ShortHostname();

}  // namespace preflight
