#include "spank_nccl.h"

extern "C" {
#include <slurm/slurm.h>
}

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <sstream>
#include <string>

#include "preflight/clock.h"
#include "preflight/collective_metrics.h"
#include "preflight/collective_records.h"
#include "preflight/collective_run.h"
#include "preflight/fileutil.h"
#include "preflight/job.h"
#include "preflight/log.h"
#include "preflight/slurmctl.h"
#include "preflight/process.h"
#include "preflight/state_paths.h"
#include "spank_task.h"

namespace preflight::spank {
namespace {

using collective::AllocationOutcome;

// Kept between the privileged hook and task_init of the same task child.
struct NcclState {
  bool intra_ran = false;       // this task is a localization step's
  bool batch_ran = false;       // this task is the batch script's, and the check ran
  AllocationOutcome outcome;
  std::string intra_text;
  Config cfg;
  std::string job_id;
};

NcclState& St() {
  static NcclState s;
  return s;
}

// The job environment as the srun of the allocation check gets it: every
// NAME=VALUE in slurmstepd's order (single values: GetJobEnv).
std::vector<std::string> JobEnvList(spank_t sp) {
  std::vector<std::string> env;
  char** e = nullptr;
  if (spank_get_item(sp, S_JOB_ENV, &e) == ESPANK_SUCCESS && e)
    for (; *e; ++e) env.emplace_back(*e);
  return env;
}

// The config file the steps this plugin starts are to read: the plugstack's
// conf= when given or readable, else none (their built-in default).
std::string ConfigPathFor(const PluginArgs& args) {
  return args.conf_given || ::access(args.conf.c_str(), R_OK) == 0 ? args.conf : std::string();
}

std::vector<std::string> ConfigArgs(const PluginArgs& args) {
  std::vector<std::string> v;
  std::string conf = ConfigPathFor(args);
  if (!conf.empty()) { v.push_back("--config"); v.push_back(conf); }
  for (const auto& s : args.overrides) { v.push_back("--set"); v.push_back(s); }
  return v;
}

// Whether a path value of a config loaded without a node name still holds
// %n (only "path" keys expand it, config.h), so the node's must be read.
bool PathNamesTheNode(const Config& cfg) {
  for (const auto& k : ConfigKeys())
    if (std::string(k.type) == "path" && k.get(cfg).find("%n") != std::string::npos) return true;
  return false;
}

int Intra(spank_t sp, const PluginArgs& args, const JobOptions& opts, const std::string& job, uint32_t step) {
  NcclState& st = St();
  st.intra_ran = true;
  uint32_t nodeid = 0;
  spank_get_item(sp, S_JOB_NODEID, &nodeid);
  auto cfg = LoadPluginConfig(args, "");
  if (!cfg) { st.intra_text = "preflight: nccl: site config: " + cfg.status().message() + "\n"; return 0; }
  // This task's node: the step's node list from slurmctld, indexed by the
  // node id slurmstepd got from the signed launch credential. Neither comes
  // from the job's environment, which the user controls.
  auto node = StepNode(*cfg, job, std::to_string(step), nodeid);
  if (!node) { st.intra_text = "preflight: nccl: cannot tell this node: " + node.status().message() + "\n"; return 0; }
  // Read again only when a path names the node (%n), which asking
  // slurmctld for the node's name could not wait for.
  if (PathNamesTheNode(*cfg)) cfg = LoadPluginConfig(args, *node);
  if (!cfg) { st.intra_text = "preflight: nccl: site config: " + cfg.status().message() + "\n"; return 0; }
  auto gpus_on = JobGpusOn(*cfg, job, *node);
  if (!gpus_on) {
    st.intra_text = "[" + *node + ", root] cannot read the GPUs job " + job + " holds here: " + gpus_on.status().message() +
                    "; the intra-node check does not run\n";
    return 0;
  }
  const std::string& gpus = *gpus_on;
  Level level = EffectiveLevel(opts, *cfg);
  if (level == Level::kOff) level = Level::kQuick;
  std::string head = "[" + *node + ", root] ";
  auto before = OtherStepsOf(*cfg, job, step);
  bool may_drain = before && before->empty();
  std::vector<std::string> argv = {cfg->nccl.binary, "--intra-node", "--node", *node, "--level",
                                   LevelName(level), "--backend",
                                   collective::BackendKindName(gpus.empty() ? collective::BackendKind::kHost : collective::BackendKind::kNccl),
                                   "--records"};
  auto ca = ConfigArgs(args);
  argv.insert(argv.end(), ca.begin(), ca.end());
  std::vector<std::string> env;
  if (!gpus.empty()) env.push_back("CUDA_VISIBLE_DEVICES=" + gpus);
  auto r = RunCommand(argv, env, cfg->nccl.timeout_ms);
  if (!r) { st.intra_text = head + r.status().message() + "\n"; return 0; }
  collective::ParsedOutput parsed = collective::ParseOutput(r->output);
  std::istringstream in(parsed.display);
  std::string line;
  while (std::getline(in, line)) st.intra_text += head + line + "\n";
  if (r->timed_out) st.intra_text += head + "killed after " + std::to_string(cfg->nccl.timeout_ms / 1000) + " s\n";
  if (r->exit_code != 1) return 0;  // passed (0) or could not judge (2): no drain
  auto after = OtherStepsOf(*cfg, job, step);
  may_drain = may_drain && after && after->empty();
  if (!may_drain) {
    std::string why = !before  ? before.status().message()
                      : !after ? after.status().message()
                               : "before: " + (before->empty() ? std::string("none") : *before) +
                                     ", after: " + (after->empty() ? std::string("none") : *after);
    st.intra_text += head + "not drained: other steps of the job were running on the node (" + why + ")\n";
    return 0;
  }
  // The reason comes from the same root-run measurement (rerunning with
  // --drain would measure twice): the failed record carries it.
  const collective::ResultRecord* rec = collective::FindRecord(parsed, "intra-node", {*node});
  if (rec == nullptr || rec->pass || rec->drain_reason.empty()) {
    st.intra_text += head + "not drained: the check printed no failed record" +
                     (parsed.errors.empty() ? std::string() : " (" + parsed.errors.front() + ")") + "\n";
    return 0;
  }
  const std::string& reason = rec->drain_reason;
  Status d = DrainNode(*cfg, *node, reason);
  st.intra_text += head + (d.ok() ? "drained " + *node + ": " + reason : "cannot drain " + *node + ": " + d.message()) + "\n";
  return 0;
}

int Batch(spank_t sp, const PluginArgs& args, const JobOptions& opts, const std::string& job) {
  NcclState& st = St();
  auto cfg = LoadPluginConfig(args, "");
  if (!cfg) {
    Log(LogLevel::kError, "task_init_privileged", "site config", cfg.status().message());
    return 0;  // the prolog already refused a job when the config is broken
  }
  Level level = EffectiveLevel(opts, *cfg);
  if (level == Level::kOff) return 0;
  st.cfg = *cfg;
  st.job_id = job;
  st.batch_ran = true;
  if (::access(cfg->nccl.binary.c_str(), X_OK) != 0) {
    int err = errno;
    st.outcome.text = "preflight: nccl: site config nccl_binary: " + Status::FromErrno(err, cfg->nccl.binary).message() +
                      "; the collective check cannot run, so the job does not start\n";
    return 0;
  }

  collective::Allocation a;
  a.job_id = job;
  auto rec = LoadJob(*cfg, job);
  if (rec) {
    a.nodes = rec->nodes;
    a.required_nodes = rec->required_nodes;
  }
  if (a.nodes.empty()) {
    st.outcome.text = "preflight: nccl: cannot read job " + job + "'s nodes from slurmctld: " +
                      (rec ? std::string("no nodes in its record") : rec.status().message()) + "\n";
    return 0;  // outcome.passed stays false: the script does not run
  }
  a.env = JobEnvList(sp);
  if (GetJobEnv(sp, "SLURM_JOB_ID").empty()) a.env.push_back("SLURM_JOB_ID=" + job);
  if (GetJobEnv(sp, "SLURM_CONF").empty() && !cfg->slurm_conf.empty()) a.env.push_back("SLURM_CONF=" + cfg->slurm_conf);
  // One rank per GPU the job holds on a node; one per node without GPUs.
  std::string g = GetJobEnv(sp, "SLURM_GPUS_ON_NODE");
  a.ranks_per_node = std::max(1, std::atoi(g.c_str()));
  spank_get_item(sp, S_JOB_UID, &a.uid);
  spank_get_item(sp, S_JOB_GID, &a.gid);
  gid_t* groups = nullptr;
  int ngroups = 0;
  if (spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &groups, &ngroups) == ESPANK_SUCCESS && groups)
    a.groups.assign(groups, groups + ngroups);
  a.config_path = ConfigPathFor(args);
  a.sets = args.overrides;
  // A requeued job's output file starts over; say why it was requeued.
  const std::string& note = rec->admin_comment;
  st.outcome = collective::RunAllocationCheck(*cfg, a, level);
  if (note.rfind("preflight: nccl", 0) == 0) st.outcome.text = note + "\n" + st.outcome.text;
  {
    // node_exporter textfile (only with textfile_dir): this node's view of the check.
    collective::NcclMetrics m;
    m.node = rec->batch_host.empty() ? ShortHostname() : rec->batch_host;  // slurmctld's name for this node
    m.ok = st.outcome.passed;
    m.busbw = st.outcome.busbw;
    m.threshold = st.outcome.threshold;
    m.suspects = st.outcome.drained;
    for (const auto& s : st.outcome.suspects)
      if (std::find(m.suspects.begin(), m.suspects.end(), s) == m.suspects.end()) m.suspects.push_back(s);
    for (const auto& s : st.outcome.stragglers.stragglers)
      if (std::find(m.suspects.begin(), m.suspects.end(), s.node) == m.suspects.end()) m.suspects.push_back(s.node);
    m.finished_unix = NowUnix();
    Status w = collective::WriteNcclMetrics(*cfg, m);
    if (!w.ok()) Log(LogLevel::kError, "task_init_privileged", "nccl metrics", w.message());
  }
  {
    // The job's result record: verdict, figures, ring pairs, stragglers.
    std::string dir = state::JobDir(*cfg, job);
    Status w = MakeDirs(dir, 0755);
    if (w.ok()) w = WriteFileAtomic(dir + "/nccl.json", collective::AllocationOutcomeJson(st.outcome, a.nodes), 0644);
    if (!w.ok()) Log(LogLevel::kError, "task_init_privileged", "nccl result record", w.message());
  }
  if (!st.outcome.passed) {
    // AdminComment: only an operator can write it, so the note is ours.
    Status u = SetJobAdminComment(*cfg, job, collective::RequeueNote(st.outcome, a.nodes, std::to_string(rec->restarts + 1)));
    if (!u.ok()) Log(LogLevel::kError, "task_init_privileged", "AdminComment of job " + job, u.message());
  }
  return 0;
}

}  // namespace

int NcclTaskPrivileged(spank_t sp, const PluginArgs& args, const JobOptions& opts) {
  uint32_t job = 0, step = 0;
  int task = 0;  // S_TASK_ID is the local task id
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) return 0;
  if (spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS) return 0;
  if (spank_get_item(sp, S_TASK_ID, &task) != ESPANK_SUCCESS) return 0;
  // A user can start such a step by hand: it only makes root measure the
  // user's own nodes, once per node (local task 0), and never drains while
  // other steps of the job run there.
  if (step != SLURM_BATCH_SCRIPT && GetJobEnv(sp, collective::kIntraStepEnv) == "intra") {
    if (task == 0) return Intra(sp, args, opts, std::to_string(job), step);
    St().intra_ran = true;  // the node's other tasks only stand by
    return 0;
  }
  if (step == SLURM_BATCH_SCRIPT && task == 0) return Batch(sp, args, opts, std::to_string(job));
  return 0;
}

int NcclTaskInit(spank_t sp) {
  NcclState& st = St();
  if (st.intra_ran) {
    spank_setenv(sp, "PREFLIGHT_NCCL_ROOT_DONE", "1", 1);
    std::fputs(st.intra_text.c_str(), stdout);
    std::fflush(stdout);
    return 0;
  }
  if (!st.batch_ran) return 0;
  std::fputs(st.outcome.text.c_str(), stderr);
  if (st.outcome.passed) return 0;
  if (st.outcome.requeue) {
    // As the user: requeueing one's own job needs no privilege. The requeue
    // makes Slurm signal this very step, so SIGTERM is ignored here (and in
    // scontrol, which inherits SIG_IGN) until slurmctld has the request.
    std::fflush(stderr);
    struct sigaction ign{}, old_term{};
    ign.sa_handler = SIG_IGN;
    ::sigaction(SIGTERM, &ign, &old_term);
    Status rq = RequeueJob(st.cfg, st.job_id);
    ::sigaction(SIGTERM, &old_term, nullptr);
    if (!rq.ok()) std::fprintf(stderr, "preflight: nccl: requeue failed: %s\n", rq.message().c_str());
    // Slurm takes ExcNodeList once the job is pending again (slurmctl.h).
    Status x = rq.ok() ? ExcludeNodesWhenPending(st.cfg, st.job_id, st.outcome.Excluded()) : Status::Ok();
    if (!x.ok()) std::fprintf(stderr, "preflight: nccl: ExcNodeList: %s\n", x.message().c_str());
  }
  std::fflush(stderr);
  return -1;  // the batch script is never exec'ed
}

}  // namespace preflight::spank
