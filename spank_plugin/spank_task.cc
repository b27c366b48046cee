#include "spank_task.h"

extern "C" {
#include <slurm/slurm.h>
}

#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "preflight/config_values.h"
#include "preflight/fileutil.h"
#include "preflight/job.h"
#include "preflight/log.h"
#include "preflight/stage_spec.h"
#include "preflight/stage_job.h"
#include "preflight/state_paths.h"
#include "preflight/strings.h"

namespace preflight::spank {

std::string GetJobEnv(spank_t sp, const char* name, bool* found) {
  std::vector<char> buf(4096);
  for (;;) {
    spank_err_t rc = spank_getenv(sp, name, buf.data(), static_cast<int>(buf.size()));
    if (rc == ESPANK_NOSPACE && buf.size() < (1u << 20)) {
      buf.resize(buf.size() * 4);
      continue;
    }
    if (found) *found = rc == ESPANK_SUCCESS;
    return rc == ESPANK_SUCCESS ? std::string(buf.data()) : std::string();
  }
}

EnvMap JobEnvMap(spank_t sp) {
  char** e = nullptr;
  if (spank_get_item(sp, S_JOB_ENV, &e) != ESPANK_SUCCESS) return {};
  return EnvironToMap(e);
}

namespace {

// Set `name` unless the user already has it (job env or --export).
void SetIfUnset(spank_t sp, const char* name, const std::string& value) {
  bool found = false;
  GetJobEnv(sp, name, &found);
  if (found) return;
  spank_err_t rc = spank_setenv(sp, name, value.c_str(), 0);
  if (rc != ESPANK_SUCCESS && rc != ESPANK_ENV_EXISTS)
    Log(LogLevel::kError, "task_init", std::string("cannot set ") + name, spank_strerror(rc));
}

using SiteConfig = std::function<const Expected<Config>&()>;

// --stage: point the task at this node's view, or refuse to start it when
// the prolog could not stage. task_init failing makes slurmstepd end the
// task with status 1 (the job fails with our message in its stderr) and
// does not drain the node, unlike a failing prolog; see stage_job.h.
//
// What was staged is read from the prolog's root-written record alone: the
// request may arrive as the option (trusted) or as its job-control variable
// in the job's environment (SLURM_SPANK_PREFLIGHT_STAGE: an srun step
// inherits it, and a user can export it by hand), and neither says that the
// data is there. A request without a record of success fails the task: a
// job never runs without its data.
int StageTaskInit(spank_t sp, const SiteConfig& site_config, const JobOptions& opts) {
  if (!opts.stage_given && !JobOptionInEnv(JobEnvMap(sp), "PREFLIGHT_STAGE")) return 0;
  std::string node = GetJobEnv(sp, "SLURMD_NODENAME");
  std::string job = GetJobEnv(sp, "SLURM_JOB_ID");
  const Expected<Config>& cfg = site_config();
  if (!cfg) {
    Log(LogLevel::kError, "task_init", "site config", cfg.status().message());
    return -1;
  }
  auto err = ReadWholeFile(StageErrorFile(*cfg, job, node));
  if (err) {
    std::fprintf(stderr, "%s", err->c_str());
    return -1;
  }
  auto record = ReadStageRecord(*cfg, job, node);
  if (!record || !record->ok) {
    std::string path = state::JobNodeFile(*cfg, job, node, state::kStageJson);
    std::fprintf(stderr,
                 "preflight: stage on %s: this job asks for staged datasets (%s), but the prolog on %s "
                 "recorded %s (%s); refusing to start without the data\n",
                 node.c_str(), opts.stage_given ? "--stage" : "SLURM_SPANK_PREFLIGHT_STAGE in its environment",
                 node.c_str(), record ? "a failed staging" : "no staging", path.c_str());
    return -1;
  }
  // Always set, unlike the other variables: the value is this node's path
  // (stage_dir may hold %n), and an srun step inherits the batch node's.
  std::string view = StageViewDir(*cfg, job);
  auto set = [&](const std::string& name, const std::string& value) {
    spank_err_t rc = spank_setenv(sp, name.c_str(), value.c_str(), 1);
    if (rc != ESPANK_SUCCESS) Log(LogLevel::kError, "task_init", "cannot set " + name, spank_strerror(rc));
  };
  set("PREFLIGHT_STAGE_DIR", view);
  for (const auto& name : record->datasets)
    if (!name.empty()) set(StageVarName(name), view + "/" + name);
  return 0;
}

// ckpt_dir: point every task at this node's checkpoint folder for the job
// (node_ckpt.h: made by the prolog, persisted and freed by the epilog).
// Always set when the folder is there: the value is this node's path (%n),
// and an srun step inherits the batch node's. Never fails the task.
void CkptTaskInit(spank_t sp, const SiteConfig& site_config) {
  const Expected<Config>& cfg = site_config();
  if (!cfg || cfg->ckpt.dir.empty()) return;
  std::string dir = CkptJobDir(cfg->ckpt, GetJobEnv(sp, "SLURM_JOB_ID"));
  struct stat st;
  if (dir.empty() || ::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;
  spank_err_t rc = spank_setenv(sp, "PREFLIGHT_CKPT_LOCAL", dir.c_str(), 1);
  if (rc != ESPANK_SUCCESS) Log(LogLevel::kError, "task_init", "cannot set PREFLIGHT_CKPT_LOCAL", spank_strerror(rc));
}

// NCCL_RAS_ADDR: each job its own RAS client port on a node
// (run_ras_ports), so preflight-run's hang attribution asks this job's
// NCCL, not another job's (NCCL sets SO_REUSEPORT: two jobs of one user on
// the default 28028 would share it). A value the user or the image set is
// kept. Loopback only: RAS's report is the job's to read.
void RasTaskInit(spank_t sp, const SiteConfig& site_config) {
  const Expected<Config>& cfg = site_config();
  if (!cfg || cfg->run.ras_ports.first == 0) return;
  auto job = ParseCount(GetJobEnv(sp, "SLURM_JOB_ID"));
  if (!job) return;
  const auto [lo, hi] = cfg->run.ras_ports;
  SetIfUnset(sp, "NCCL_RAS_ADDR", "127.0.0.1:" + std::to_string(lo + *job % (uint64_t{hi} - lo + 1)));
}

}  // namespace

int TaskInit(spank_t sp, const PluginArgs& args, const JobOptions& opts) {
  for (const auto& o : UserOptions())
    if (o.given(opts)) SetIfUnset(sp, o.env_name, o.value_text(opts));
  TaskTopoEnv(sp, opts);
  // The site config, read at most once per task and only when needed.
  std::optional<Expected<Config>> loaded;
  SiteConfig site_config = [&]() -> const Expected<Config>& {
    if (!loaded) loaded.emplace(LoadPluginConfig(args, GetJobEnv(sp, "SLURMD_NODENAME")));
    return *loaded;
  };
  if (StageTaskInit(sp, site_config, opts) != 0) return -1;
  CkptTaskInit(sp, site_config);
  RasTaskInit(sp, site_config);

  uint32_t step = 0, task = 0;
  if (spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS) return 0;
  if (spank_get_item(sp, S_TASK_ID, &task) != ESPANK_SUCCESS) return 0;
  if (step != SLURM_BATCH_SCRIPT || task != 0) return 0;

  // The batch step's output is the job's output: show what this node's
  // prolog found, so the user sees the checks without asking an admin.
  std::string node = GetJobEnv(sp, "SLURMD_NODENAME");
  std::string job = GetJobEnv(sp, "SLURM_JOB_ID");
  const Expected<Config>& cfg = site_config();
  if (!cfg) {
    Log(LogLevel::kError, "task_init", "site config", cfg.status().message());
    return 0;  // the environment is set; a summary is not worth failing the job
  }
  auto line = ReadWholeFile(state::JobNodeFile(*cfg, job, node, state::kPrologText));
  if (line) std::fprintf(stderr, "%s", line->c_str());
  return 0;
}

}  // namespace preflight::spank
