// The topology-aware NCCL/RDMA environment, per task (--preflight-env).
//
// Two points in slurmstepd (remote context):
//  * init_post_opt, once per step and node, as root, in slurmstepd itself:
//    read the node's topology cache (building it with hwloc on first use)
//    and open this job's record <state_dir>/jobs/<job>/<node>.env.jsonl
//    (root-owned directory) with O_APPEND|O_CLOEXEC. The tasks are forked
//    from this process, so each inherits the parsed topology and the
//    descriptor: per task there is no file to read and nothing to parse.
//  * task_init, in each task as the user: compute the environment for the
//    task's GPUs (the GRES task environment, CUDA_VISIBLE_DEVICES for
//    --gpu-bind, is only final here), set what the user did not set, append
//    one JSON line to the record through the inherited descriptor, and with
//    --preflight-env=show print a summary to the task's stderr.
//
// What a task gets of the plan, given what it already has (the user's
// values are never overridden), and the words of its record: topo_env_merge.h.
//
// Containers (pyxis): pyxis's slurm_spank_task_init starts the container
// once per node with the first task's environment, then in every task
// imports the container's environment into the task's with overwrite, and
// joins its namespaces; slurmstepd then execs the task inside it with the
// task's environment. So preflight must come AFTER pyxis in plugstack.conf:
// its task_init then runs after the import, its per-task values are what
// the container's process gets, and an image's ENV NCCL_* (imported by
// pyxis) counts as set and is left alone (recorded under left_alone); the
// step's task 0 says so in the job output, naming the --container-env
// option that lets preflight's value win (LateEnvValues: the values differ
// from the step's environment as submitted, read in init_post_opt).
// Listed before pyxis, the import would overwrite every task's values with
// those of the node's first task.
extern "C" {
#include <slurm/slurm.h>
}

#include <fcntl.h>
#include <cerrno>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <string>

#include "preflight/config.h"
#include "preflight/fileutil.h"
#include "preflight/job.h"
#include "preflight/log.h"
#include "preflight/report.h"
#include "preflight/topo.h"
#include "preflight/topo_env_merge.h"
#include "preflight/topo_load.h"
#include "preflight/state_paths.h"
#include "spank_task.h"

namespace preflight::spank {

namespace {

// Per step, in slurmstepd: filled as root before the tasks are forked; each
// task process has its own copy.
struct TaskTopo {
  bool ready = false;
  Topology topo;
  std::vector<GpuPairing> pairing;  // of the whole node, computed once per step
  EnvPolicy policy;
  // The job's GPUs on this node (topo.h: JobGpusOnNode), read once per step
  // in init_post_opt: the prolog's record, and the step's Slurm variables
  // before slurmstepd narrows SLURM_STEP_GPUS to each task's GPUs.
  NodeGpuInputs node_gpus;
  std::string rails_error;  // ClassifyRails refused the site's topo_rails
  std::string node;
  std::string source;  // "cache" or "hwloc"
  int record_fd = -1;
  double load_seconds = 0;
  // The variables preflight plans, as the step was submitted (read here,
  // before any plugin's task_init or pyxis's import changed them): what
  // tells the user's values from those a container image set later.
  std::map<std::string, std::string> submitted;
};

TaskTopo& Task() {
  static TaskTopo t;
  return t;
}

bool EnvOff(const JobOptions& opts) { return opts.env_given && opts.env == EnvMode::kOff; }

std::string StepName(spank_t sp) {
  uint32_t step = 0;
  if (spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS) return "?";
  if (step == SLURM_BATCH_SCRIPT) return "batch";
  if (step == SLURM_EXTERN_CONT) return "extern";
  return std::to_string(step);
}

// This node's Slurm name. slurmd exports SLURMD_NODENAME into its own
// environment, which slurmstepd inherits; the job's copy is only final after
// this callback (slurmstepd's setup_env runs later, and a step's job env may
// still carry the batch host's name), so the process's wins.
std::string NodeName(spank_t sp) {
  const char* own = std::getenv("SLURMD_NODENAME");
  if (own != nullptr && *own != '\0') return own;
  std::string job = GetJobEnv(sp, "SLURMD_NODENAME");
  return job.empty() ? ShortHostname() : job;
}

// Whether this task already runs in a container: pyxis's task_init joins
// the container's mount namespace before preflight's runs (plugin order),
// so the task's differs from its parent slurmstepd's. Another plugin's
// options cannot be read from here, so this is the one sign.
bool InContainer() {
  char self[64] = {}, parent[64] = {};
  std::string pp = "/proc/" + std::to_string(::getppid()) + "/ns/mnt";
  ssize_t a = ::readlink("/proc/self/ns/mnt", self, sizeof self - 1);
  ssize_t b = ::readlink(pp.c_str(), parent, sizeof parent - 1);
  return a > 0 && b > 0 && std::string(self, a) != std::string(parent, b);
}

}  // namespace

int StepInit(spank_t sp, const PluginArgs& args, const JobOptions& opts) {
  TaskTopo& t = Task();
  StepExit();
  if (EnvOff(opts)) return 0;
  uint32_t step = 0;
  if (spank_get_item(sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS && step == SLURM_EXTERN_CONT) return 0;  // no tasks
  t.node = NodeName(sp);
  auto cfg = LoadPluginConfig(args, t.node);
  if (!cfg) {
    Log(LogLevel::kError, "init_post_opt", "site config", cfg.status().message());
    return 0;  // the environment is a help, not a gate: never fail the task for it
  }
  if (!cfg->topo_env) return 0;
  double t0 = MonotonicSeconds();
  bool from_cache = false;
  TopoLoadOptions lo;
  lo.write_cache = true;  // root here: the first step after a reboot writes it
  auto topo = LoadTopologyCached(*cfg, t.node, lo, &from_cache);
  t.load_seconds = MonotonicSeconds() - t0;
  if (!topo) {
    Log(topo.status().code() == Status::Code::kUnavailable ? LogLevel::kDebug : LogLevel::kError,
        "init_post_opt", "topology of " + t.node, topo.status().message());
    return 0;
  }
  t.topo = std::move(*topo);
  // Rails per use, not in the cache: topo_rails may change without the
  // topology changing. A name the node lacks is a site error: logged, and
  // every task's record says why nothing was set.
  Status rails = ClassifyRails(t.topo, cfg->topo_rails);
  if (!rails.ok()) {
    Log(LogLevel::kError, "init_post_opt", "site config", rails.message());
    t.rails_error = rails.message();
  }
  t.pairing = PairGpus(t.topo);
  t.policy = PolicyFromConfig(*cfg);
  t.source = from_cache ? "cache" : "hwloc";
  t.ready = true;

  for (const auto& name : EnvVarNames()) {
    bool found = false;
    std::string v = GetJobEnv(sp, name.c_str(), &found);
    if (found) t.submitted[name] = v;
  }

  uint32_t job_id = 0;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS) return 0;
  std::string job = std::to_string(job_id);
  // The job's GPUs on this node: one NIC set for every task of the job here
  // (topo.h: JobGpusOnNode). The prolog's record is read now, as root.
  // Slurm 22.05, checked on the system-test cluster: here SLURM_STEP_GPUS is
  // the step's GPUs on this node (all tasks; in task_init each task's copy
  // is already narrowed to its own GPUs by --gpus-per-task/--gpu-bind), and
  // SLURM_JOB_GPUS is set only in the batch step (other steps carry the
  // batch script's copy, the batch node's GPUs, or nothing).
  NodeGpuInputs& in = t.node_gpus;
  auto recorded = ReadJobGpusRecord(*cfg, job, t.node);
  if (recorded) {
    in.have_prolog = true;
    in.prolog_gpus = std::move(*recorded);
  } else if (recorded.status().code() != Status::Code::kNotFound) {
    Log(LogLevel::kError, "init_post_opt", "job GPU record", recorded.status().message());
  }
  in.batch_step = step == SLURM_BATCH_SCRIPT;
  in.job_gpus = GetJobEnv(sp, "SLURM_JOB_GPUS");
  in.step_gpus = GetJobEnv(sp, "SLURM_STEP_GPUS");
  std::string dir = state::JobDir(*cfg, job);
  Status s = MakeDirs(dir, 0755);
  if (s.ok()) {
    std::string path = state::JobNodeFile(*cfg, job, t.node, state::kEnvRecord);
    t.record_fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (t.record_fd < 0) s = Status::FromErrno(errno, "open " + path);
  }
  if (!s.ok()) Log(LogLevel::kError, "init_post_opt", "env record", s.message());
  return 0;
}

void StepExit() {
  TaskTopo& t = Task();
  if (t.record_fd >= 0) ::close(t.record_fd);
  t = TaskTopo();
}

int TaskTopoEnv(spank_t sp, const JobOptions& opts) {
  TaskTopo& t = Task();
  // The task's copy of the descriptor; closed here, O_CLOEXEC anyway.
  struct Closer {
    int& fd;
    ~Closer() {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  } closer{t.record_fd};
  if (!t.ready || EnvOff(opts)) return 0;
  double t0 = MonotonicSeconds();

  uint32_t task = 0;
  spank_get_item(sp, S_TASK_GLOBAL_ID, &task);
  EnvLookup lookup = [&](const std::string& name) -> std::optional<std::string> {
    bool found = false;
    std::string v = GetJobEnv(sp, name.c_str(), &found);
    if (!found) return std::nullopt;
    return v;
  };
  TaskEnvPlan tp = PlanTaskEnv(t.topo, t.pairing, t.policy, t.node_gpus, t.rails_error, lookup);
  const EnvPlan& plan = tp.plan;
  EnvMerge merge = MergeEnv(plan, lookup);
  EnvTaskRecord rec;
  rec.node = t.node;
  rec.step = StepName(sp);
  rec.task = task;
  rec.topology_source = t.source;
  rec.node_gpus_from = tp.node_gpus_from;
  rec.load_seconds = t.load_seconds;
  rec.plan = &plan;
  rec.kept = merge.kept;
  for (const auto& v : merge.set) {
    spank_err_t rc = spank_setenv(sp, v.name.c_str(), v.value.c_str(), 1);
    if (rc != ESPANK_SUCCESS) Log(LogLevel::kError, "task_init", "cannot set " + v.name, spank_strerror(rc));
    else rec.set.push_back(v);
  }
  for (const auto& name : merge.remove) spank_unsetenv(sp, name.c_str());
  if (!rec.set.empty() || merge.marker_found) spank_setenv(sp, kTopoEnvMarker, MarkerFor(rec.set).c_str(), 1);
  // A value an image (or a TaskProlog) put there after submission: left
  // alone, said once per step, by the step's task 0, in the job's output.
  if (task == 0) {
    EnvLookup submitted = [&](const std::string& name) -> std::optional<std::string> {
      auto it = t.submitted.find(name);
      if (it == t.submitted.end()) return std::nullopt;
      return it->second;
    };
    auto late = LateEnvValues(plan, merge, submitted);
    if (!late.empty()) std::fputs(LateEnvText(late, t.node, InContainer()).c_str(), stderr);
  }
  rec.env_seconds = MonotonicSeconds() - t0;

  if (t.record_fd >= 0) {
    std::string line = EnvRecordLine(rec);
    // One write(2) with O_APPEND: lines of concurrent tasks do not interleave.
    if (::write(t.record_fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
      Log(LogLevel::kError, "task_init", "env record", "short write");
  }
  if (opts.env_given && opts.env == EnvMode::kShow) {
    // One screen: every task says what it got; the reasons for what was not
    // set (the same for all tasks of a node, mostly) only from local task 0.
    uint32_t local = 0;
    spank_get_item(sp, S_TASK_ID, &local);
    std::fputs(EnvShowText(rec, local == 0).c_str(), stderr);
  }
  return 0;
}

}  // namespace preflight::spank
