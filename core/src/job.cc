#include "preflight/job.h"

#include <unistd.h>

#include <cstdlib>

namespace preflight {

EnvMap EnvironToMap(char** envp) {
  EnvMap m;
  for (char** e = envp; e && *e; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq != std::string::npos) m[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return m;
}

std::string ShortHostname() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  std::string h = buf;
  return h.substr(0, h.find('.'));
}

Expected<std::vector<int>> ParseIdList(const std::string& s) {
  std::vector<int> out;
  size_t i = 0;
  auto num = [&](int& v) {
    size_t b = i;
    long n = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i - b < 6) n = n * 10 + (s[i++] - '0');
    v = static_cast<int>(n);
    return i > b;
  };
  while (i < s.size()) {
    int a, b;
    if (!num(a)) return Status::InvalidArgument("bad id list '" + s + "'");
    b = a;
    if (i < s.size() && s[i] == '-') {
      ++i;
      if (!num(b) || b < a) return Status::InvalidArgument("bad id range in '" + s + "'");
    }
    for (int k = a; k <= b; ++k) out.push_back(k);
    if (i < s.size()) {
      if (s[i] != ',') return Status::InvalidArgument("bad id list '" + s + "'");
      ++i;
    }
  }
  return out;
}

namespace {

std::string Get(const EnvMap& env, const std::string& k) {
  auto it = env.find(k);
  return it == env.end() ? "" : it->second;
}

}  // namespace

Expected<JobContext> JobContextFromEnv(const EnvMap& env, const Config& cfg, bool allow_no_job) {
  JobContext j;
  j.job_id = Get(env, "SLURM_JOB_ID");
  if (j.job_id.empty()) j.job_id = Get(env, "SLURM_JOBID");
  if (j.job_id.empty() && !allow_no_job)
    return Status::InvalidArgument("SLURM_JOB_ID is not set (not started by slurmd?)");
  j.node = Get(env, "SLURMD_NODENAME");
  if (j.node.empty()) j.node = ShortHostname();
  j.user = Get(env, "SLURM_JOB_USER");
  if (!Get(env, "SLURM_JOB_UID").empty()) j.uid = static_cast<uid_t>(std::strtoul(Get(env, "SLURM_JOB_UID").c_str(), nullptr, 10));
  if (!Get(env, "SLURM_JOB_GID").empty()) j.gid = static_cast<gid_t>(std::strtoul(Get(env, "SLURM_JOB_GID").c_str(), nullptr, 10));
  j.nodelist = Get(env, "SLURM_JOB_NODELIST");
  j.partition = Get(env, "SLURM_JOB_PARTITION");

  std::string gpus = Get(env, "SLURM_JOB_GPUS");
  if (gpus.empty()) gpus = Get(env, "CUDA_VISIBLE_DEVICES");
  if (!gpus.empty()) {
    auto ids = ParseIdList(gpus);
    if (!ids) return ids.status().Context("SLURM_JOB_GPUS");
    j.gpus = *ids;
  }

  // The plugin's job-control variables (options.h: JobOptionsFromEnv): the
  // one parse of the job's options on this side of Slurm.
  OptionsFromEnv o = JobOptionsFromEnv(env);
  for (const char* var : {"PREFLIGHT_NCCL_CHECK", "PREFLIGHT_ENV"}) {
    Status s = o.ErrorFor(var);
    if (!s.ok()) return s;
  }
  j.options = o.opts;
  j.stage_error = o.ErrorFor("PREFLIGHT_STAGE");
  j.level = EffectiveLevel(j.options, cfg);
  return j;
}

Level EffectiveLevel(const JobOptions& opts, const Config& cfg) {
  return opts.nccl_check_given ? opts.nccl_check : cfg.default_level;
}

}  // namespace preflight
