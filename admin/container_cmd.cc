// The container subcommand of `preflight` (container_cmd.h).
#include "container_cmd.h"

#include <unistd.h>

#include <cstdio>

#include "preflight/container_mounts.h"
#include "preflight/job.h"
#include "preflight/log.h"
#include "preflight/stage_job.h"
#include "preflight/state_paths.h"

extern char** environ;

namespace preflight {

int ContainerCmd(const std::vector<std::string>& args, const CommonCli& cli) {
  if (args.size() != 1 || args[0] != "enroot-mounts") {
    Log(LogLevel::kError, "container", "bad arguments", "expected: container enroot-mounts");
    return 2;
  }
  EnvMap env = EnvironToMap(environ);
  auto get = [&](const char* k) {
    auto it = env.find(k);
    return it == env.end() ? std::string() : it->second;
  };
  std::string job = get("SLURM_JOB_ID"), node = get("SLURMD_NODENAME");
  if (job.empty()) {
    // Not in a Slurm job: no job folders to give the container.
    Log(LogLevel::kInfo, "container", "no SLURM_JOB_ID: nothing to mount");
    return 0;
  }
  if (job.find_first_not_of("0123456789_+") != std::string::npos) {
    Log(LogLevel::kError, "container", "SLURM_JOB_ID '" + job + "' is not a job id");
    return 2;
  }
  if (node.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    node = host;
  }
  auto cfg = LoadCliConfig(cli, node);
  if (!cfg) {
    Log(LogLevel::kError, "container", "site config", cfg.status().message());
    return 1;
  }
  ContainerMountInputs in;
  in.topo_file = cfg->nccl_topo_file;
  in.job_records = state::JobDir(*cfg, job);
  if (!cfg->stage.dir.empty()) in.stage_view = StageViewDir(*cfg, job);
  if (!cfg->ckpt.dir.empty()) in.ckpt_local = cfg->ckpt.dir + "/" + job;
  std::vector<std::string> notes;
  for (const auto& line : EnrootFstabLines(ContainerMounts(in, &notes))) std::printf("%s\n", line.c_str());
  for (const auto& n : notes) Log(LogLevel::kError, "container", n);
  return 0;
}

}  // namespace preflight
