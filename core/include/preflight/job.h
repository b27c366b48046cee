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
  bool level_given = false;  // the user passed --nccl-check
  Level level = Level::kOff; // effective level (user's choice, else the site default)
  bool env_given = false;
  EnvMode env_mode = EnvMode::kOn;
};

// Errors name the variable: "SPANK_PREFLIGHT_NCCL_CHECK='bogus': invalid level ...".
// `job_id` is required unless `allow_no_job` (admin runs by hand).
Expected<JobContext> JobContextFromEnv(const EnvMap& env, const Config& cfg, bool allow_no_job);

// "0,1,3" or "0-3,6" -> {0,1,3} / {0,1,2,3,6}.
Expected<std::vector<int>> ParseIdList(const std::string& s);

std::string ShortHostname();

}  // namespace preflight
