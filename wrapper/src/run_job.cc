#include "preflight/run_job.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "preflight/checkpoint.h"
#include "preflight/clock.h"
#include "preflight/fileutil.h"
#include "preflight/gpu_util.h"
#include "preflight/hang_probe.h"
#include "preflight/node_watch.h"
#include "preflight/log.h"
#include "preflight/process.h"
#include "preflight/regex.h"
#include "preflight/report.h"
#include "preflight/run_persist.h"
#include "preflight/slurmctl.h"
#include "preflight/strings.h"
#include "run_tiers.h"

namespace preflight {
using run_internal::EndTiers;
using run_internal::Prune;
using run_internal::StartTiers;
using run_internal::Tiers;

namespace {
std::string EnvOr(const EnvMap& env, const std::string& k, const std::string& dflt = "") {
  auto it = env.find(k);
  return it == env.end() ? dflt : it->second;
}

}  // namespace

namespace {

struct RunState {
  const Config* cfg;
  const RunPolicy* p;
  std::string job, node, resume;
  uint64_t restarts = 0;
  double started = 0;
  std::vector<Alert> alerts;
  std::optional<HangFinding> hang;  // the last hang attribution's finding
};

Report BuildReport(const RunState& st, const std::string& command, const SuperviseResult* r, const RunDecision* d,
                   bool requeued) {
  Report rep;
  rep.tool = "run";
  rep.node = st.node;
  rep.job_id = st.job;
  rep.level = "off";
  rep.started_unix = st.started;
  rep.seconds = NowUnix() - st.started;
  for (const auto& a : st.alerts) {
    CheckResult c;
    c.check = "run.stall";
    c.device = AlertKindName(a.kind);
    c.verdict = Verdict::kFail;
    c.message = a.detail;
    rep.checks.push_back(c);
  }
  if (st.hang) {
    CheckResult c;
    c.check = "run.hang";
    c.device = st.hang->nodes.empty() ? "none" : Join(st.hang->nodes, ",");
    c.verdict = st.hang->nodes.empty() ? Verdict::kWarn : Verdict::kFail;
    c.value = HangCauseName(st.hang->cause);
    c.message = st.hang->line;
    rep.checks.push_back(c);
  }
  rep.notes.push_back({"command", command});
  rep.notes.push_back({"restart_count", std::to_string(st.restarts)});
  rep.notes.push_back({"resume_from", st.resume});
  if (r != nullptr && d != nullptr) {
    CheckResult c;
    c.check = "run.exit";
    c.device = command;
    c.value = std::to_string(r->exit.exit_code);
    c.threshold = "== 0";
    c.verdict = r->exit.exit_code == 0 && !r->preempted ? Verdict::kPass : (r->preempted ? Verdict::kWarn : Verdict::kFail);
    c.message = d->reason;
    c.seconds = r->seconds;
    rep.checks.push_back(c);
    rep.notes.push_back({"exit_code", std::to_string(r->exit.exit_code)});
    rep.notes.push_back({"kind", d->kind});
    rep.notes.push_back({"action", requeued ? "requeued" : "exit"});
    rep.notes.push_back({"preempted", r->preempted ? "yes" : "no"});
  } else {
    rep.notes.push_back({"action", "running"});
  }
  return rep;
}

// Site state_dir/textfile_dir are root-owned; a user's job usually can't
// write there. That is reported once, not treated as a failure.
// Outside a Slurm job there is no job directory: only --result is written.
void Publish(const RunState& st, const Report& rep) {
  static bool warned = false;
  if (!st.job.empty()) {
    auto w = WriteReport(*st.cfg, rep);
    if (!w && !warned) {
      warned = true;
      Log(LogLevel::kInfo, "run", "result not written to the site state dir", w.status().message());
    }
  }
  if (!st.p->result_file.empty()) {
    Status s = WriteFileAtomic(st.p->result_file, ReportJson(rep));
    if (!s.ok()) Log(LogLevel::kError, "run", "--result", s.message());
  }
}

// Requeue, then (the job pending again) set its excluded nodes. Slurm's
// requeue kills the batch step: SIGTERM first, SIGKILL KillWait later. This
// process ignores SIGTERM from here on (it only reports and exits after
// this) so it lives to set ExcNodeList, which slurmctld refuses for a
// running job ("Job is no longer pending execution"), and to write its result.
Status Requeue(const Config& cfg, const std::string& job, const std::vector<std::string>& exclude) {
  struct sigaction ign;
  std::memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGTERM, &ign, nullptr);
  Status s = RequeueJob(cfg, job);
  if (s.ok()) {
    Status x = ExcludeNodesWhenPending(cfg, job, exclude);
    if (!x.ok()) s = x.Context("requeued, but could not exclude " + Join(exclude, ","));
  }
  return s;
}

// Hang attribution (hang_probe.h): only with a stall watch on, and
// run_ras; null otherwise. The job's nodes' addresses are looked up once,
// on the probe's thread, when a report names an address.
std::unique_ptr<HangProbe> MakeHangProbe(const Config& cfg, const RunPolicy& p, const EnvMap& env) {
  if (p.stall.output_s <= 0 && p.stall.heartbeat_s <= 0 && p.stall.gpu_s <= 0) return nullptr;
  HangProbeOptions o;
  o.enabled = p.ras;
  o.min_nccl = p.ras_min_nccl;
  o.polls = p.ras_polls;
  o.interval_s = p.ras_interval_s;
  o.query.uid = ::getuid();
  o.nccl_version = EnvOr(env, "NCCL_VERSION");  // NGC images set it; else read from the mapped library
  std::string addr = EnvOr(env, "NCCL_RAS_ADDR");
  if (!addr.empty()) {
    auto ep = ParseRasAddr(addr);
    if (!ep) {
      Log(LogLevel::kError, "run", "hang attribution off", ep.status().message());
      return nullptr;
    }
    o.query.ep = *ep;
  }
  std::string nodelist = EnvOr(env, "SLURM_JOB_NODELIST", EnvOr(env, "SLURM_NODELIST"));
  auto nodes = ExpandHostlist(nodelist);
  auto map = std::make_shared<std::optional<HostNodeMap>>();
  const Config* c = &cfg;
  std::vector<std::string> job_nodes = nodes ? *nodes : std::vector<std::string>{};
  o.node_of = [map, c, job_nodes](const std::string& host) -> std::string {
    if (!*map) *map = BuildHostNodeMap(*c, job_nodes);
    auto it = (*map)->find(host);
    return it == (*map)->end() ? "" : it->second;
  };
  return std::make_unique<HangProbe>(std::move(o));
}

// The probe's finding, once: said in the job output and published.
void TakeHang(RunState& st, HangProbe* probe, const NodeWatch* watch, const std::string& command) {
  if (probe == nullptr) return;
  auto f = probe->Take();
  if (!f) return;
  if (f->nodes.empty() && watch != nullptr && watch->AnyLine()) {
    // RAS named no one (equal counts, not reached, off): the GPU watch.
    HangFinding g = watch->Attribute(MonotonicSeconds());
    f->line += "; " + g.line;
    if (!g.nodes.empty()) {
      f->nodes = g.nodes;
      f->cause = g.cause;
    }
  }
  st.hang = *f;
  std::fprintf(stderr, "preflight: run: hang: %s%s\n",
               f->nodes.empty() ? "" : ("node(s) at fault: " + Join(f->nodes, ",") + ": ").c_str(), f->line.c_str());
  Publish(st, BuildReport(st, command, nullptr, nullptr, false));
}

// The local checkpoint folder made and checked, then the resume chosen:
// across the tiers (StartTiers) or, with neither a shared tier nor a
// framework convention, the newest complete local one. False (exit 2):
// the folder cannot be made.
bool SetUpCheckpoints(const Config& cfg, const RunPolicy& p, const EnvMap& env,
                      const std::function<bool(const std::string&)>& watch_line, RunState* st, Tiers* tiers) {
  Status s = MakeDirs(p.checkpoint_dir, 0755);
  if (!s.ok()) {
    Log(LogLevel::kError, "run", "checkpoint dir", s.message());
    return false;
  }
  // A folder the job cannot write loses every checkpoint and the requeue
  // counters; said at the start, in the job's output, not found out later.
  Status w = CheckpointDirWritable(p.checkpoint_dir);
  if (!w.ok())
    Log(LogLevel::kError, "run", "checkpoint dir",
        w.message() + ": the application's checkpoints cannot be saved there, and requeue counts are not kept");
  if (!p.persist_to.empty() || p.convention != CkptConvention::kMarker) {
    *tiers = StartTiers(cfg, p, env, st->node, &st->resume, watch_line);
  } else {
    auto newest = NewestCompleteCheckpoint(p.checkpoint_dir, p.checkpoint_marker);
    if (newest) st->resume = *newest;
    else Log(LogLevel::kError, "run", "looking for a checkpoint to resume from", newest.status().message());
    Prune(p);
  }
  return true;
}

// The command's side of the contract (preflight-run(1) ENVIRONMENT).
std::vector<std::string> ChildEnv(const RunPolicy& p, const RunState& st) {
  return {
      "PREFLIGHT_RESTART_COUNT=" + std::to_string(st.restarts),
      "PREFLIGHT_RESUME_FROM=" + st.resume,
      "PREFLIGHT_CHECKPOINT_DIR=" + p.checkpoint_dir,
      "PREFLIGHT_CHECKPOINT_MARKER=" + p.checkpoint_marker,
      "PREFLIGHT_CHECKPOINT_REQUEST=" + p.checkpoint_request_file,
      "PREFLIGHT_CHECKPOINT_SIGNAL=" + (p.checkpoint_signal ? SignalName(p.checkpoint_signal).substr(3) : "none"),
      "PREFLIGHT_HEARTBEAT_FILE=" + p.heartbeat_file,
  };
}

// The GPU stall watch's source, the job's GPUs through NVML; null when the
// watch is off or NVML cannot serve it (said once).
std::unique_ptr<GpuUtilSource> OpenGpuWatch(const Config& cfg, const RunPolicy& p, const EnvMap& env) {
  if (p.stall.gpu_s <= 0) return nullptr;
  std::vector<int> minors;
  auto ids = ParseIdList(EnvOr(env, "SLURM_JOB_GPUS"));
  if (ids) minors = *ids;
  auto src = OpenNvmlGpuUtil(cfg.nvml_library, minors);
  if (src) return std::move(*src);
  Log(LogLevel::kInfo, "run", "GPU stall watch off", src.status().message());
  return nullptr;
}

// scancel sends the same SIGTERM as a preemption, and slurmctld accepts a
// requeue of a job it is cancelling: a cancelled job must stay cancelled.
// While Slurm ends a job (scancel, the time limit itself) its JobState
// reads COMPLETING (CANCELLED once done); a job asked to checkpoint ahead
// (--signal=B:USR2@T) or in a preemption grace time is still RUNNING.
void KeepCancelledCancelled(const Config& cfg, const std::string& job, RunDecision* d) {
  auto rec = LoadJob(cfg, job);
  if (rec && (rec->state == "CANCELLED" || rec->state == "COMPLETING")) {
    d->action = RunAction::kExit;
    d->kind = "cancelled";
    d->reason = "job " + job + " is ending (" + rec->state + ", e.g. scancel): not requeued (" + d->reason + ")";
  }
}

// A requeue decision carried out: the nodes at fault found (the decision's
// matched line, and what preflight drained), the counters saved, the job
// requeued without them. True when Slurm took the requeue.
bool RequeueAsDecided(const Config& cfg, const EnvMap& env, const RunState& st, const RunDecision& d,
                      RunCounters* counters, const std::string& counters_path) {
  std::vector<std::string> exclude;
  if (d.exclude_nodes) {
    std::string nodelist = EnvOr(env, "SLURM_JOB_NODELIST", EnvOr(env, "SLURM_NODELIST"));
    auto nodes = ExpandHostlist(nodelist);
    std::vector<std::string> drained;
    if (!nodelist.empty()) {
      auto dr = NodesDrainedByPreflight(cfg, nodelist);
      if (dr) drained = *dr;
      else Log(LogLevel::kInfo, "run", "could not ask which nodes preflight drained", dr.status().message());
    }
    exclude = CondemnedNodes(d.matched_line, nodes ? *nodes : std::vector<std::string>{}, drained, st.node);
  }
  if (d.kind == "preemption") ++counters->preempt_requeues;
  else ++counters->failure_restarts;
  if (!counters_path.empty()) {
    Status s = SaveCounters(counters_path, st.job, *counters);
    if (!s.ok()) Log(LogLevel::kError, "run", "requeue counters", s.message());
  }
  Status s = Requeue(cfg, st.job, exclude);
  if (!s.ok()) {
    Log(LogLevel::kError, "run", "requeue of job " + st.job + " failed", s.message() + " (" + d.reason + ")");
    return false;
  }
  Log(LogLevel::kInfo, "run", "requeued job " + st.job, d.reason + (exclude.empty() ? "" : "; excluding " + Join(exclude, ",")));
  return true;
}

// The GPU watch on every node (node_watch.h): its lines arrive through
// the node agent's output; null when off (or outside Slurm).
std::shared_ptr<NodeWatch> MakeNodeWatch(const RunPolicy& p, const std::vector<std::string>& job_nodes, bool in_slurm) {
  const double watch_s = in_slurm ? AgentWatchSeconds(p) : 0;
  if (watch_s <= 0 || job_nodes.empty()) return nullptr;
  WatchThresholds t;
  t.idle_percent = p.stall.gpu_idle_percent;
  return std::make_shared<NodeWatch>(job_nodes, watch_s, t, MonotonicSeconds());
}

// The supervisor's options from the policy; the callbacks are RunJob's.
SuperviseOptions SuperviseOptionsFor(const RunPolicy& p, const std::vector<std::string>& argv,
                                     std::vector<std::string> child_env, GpuUtilSource* gpu) {
  SuperviseOptions so;
  so.argv = argv;
  so.env = std::move(child_env);
  so.preempt_signals = p.preempt_signals;
  so.checkpoint_signal = p.checkpoint_signal;
  so.checkpoint_request_file = p.checkpoint_request_file;
  so.grace_s = p.grace_s;
  so.kill_wait_s = p.kill_wait_s;
  so.stall = p.stall;
  so.heartbeat_file = p.heartbeat_file;
  so.gpu = gpu;
  so.gpu_sample_s = p.gpu_sample_s;
  so.kill_on_stall = p.stall_restart;
  return so;
}

// A stall or NaN alert: said, kept for the result, a hang attribution
// started (NaN is the command's own), published, and the site's hook run.
void OnAlert(const Alert& a, const EnvMap& env, const std::string& command, HangProbe* probe, const NodeWatch* watch,
             RunState& st) {
  st.alerts.push_back(a);
  Log(LogLevel::kError, "run", std::string("ALERT ") + AlertKindName(a.kind), a.detail);
  if (probe != nullptr && a.kind != AlertKind::kNan) {
    if (probe->Start()) {
      std::fprintf(stderr, "preflight: run: hang: asking NCCL RAS at %s which node is behind\n",
                   EnvOr(env, "NCCL_RAS_ADDR", "localhost:28028").c_str());
    } else {
      TakeHang(st, probe, watch, command);  // off, or too old an NCCL: the line says so
    }
  }
  Publish(st, BuildReport(st, command, nullptr, nullptr, false));
  const std::string& hook = st.p->alert_hook;
  if (hook.empty()) return;
  Status h = SpawnDetached({"/bin/sh", "-c", hook},
                           {"PREFLIGHT_ALERT_KIND=" + std::string(AlertKindName(a.kind)),
                            "PREFLIGHT_ALERT_DETAIL=" + a.detail, "PREFLIGHT_JOB_ID=" + st.job, "PREFLIGHT_NODE=" + st.node});
  if (!h.ok()) Log(LogLevel::kError, "run", "alert hook", h.message());
}

}  // namespace

int RunJob(const Config& cfg, const RunPolicy& p, const EnvMap& env, const std::vector<std::string>& argv) {
  RunState st;
  st.cfg = &cfg;
  st.p = &p;
  st.started = NowUnix();
  st.job = EnvOr(env, "SLURM_JOB_ID", EnvOr(env, "SLURM_JOBID"));
  st.node = EnvOr(env, "SLURMD_NODENAME", ShortHostname());
  auto rc = ParseCount(EnvOr(env, "SLURM_RESTART_COUNT", "0"));
  st.restarts = rc ? *rc : 0;
  const bool in_slurm = !st.job.empty();
  const std::string command = Join(argv, " ");

  std::vector<std::string> job_nodes;
  if (auto n = ExpandHostlist(EnvOr(env, "SLURM_JOB_NODELIST", EnvOr(env, "SLURM_NODELIST")))) job_nodes = *n;
  std::shared_ptr<NodeWatch> nwatch = MakeNodeWatch(p, job_nodes, in_slurm);
  std::function<bool(const std::string&)> watch_line;
  if (nwatch) watch_line = [w = nwatch](const std::string& l) { return w->OnLine(l, MonotonicSeconds()); };

  RunCounters counters;
  std::string counters_path;
  Tiers tiers;  // with a shared tier: local retention is the agent's, not Prune's
  if (!p.checkpoint_dir.empty()) {
    if (!SetUpCheckpoints(cfg, p, env, watch_line, &st, &tiers)) return 2;
    counters_path = CountersPath(p.checkpoint_dir);
  }
  if (nwatch && !tiers.agent) {  // no shared tier: the node agent runs for the watch alone
    auto argv = PersistAgentArgv(p.self_exe.empty() ? SelfExe() : p.self_exe, p.config_path, p.config_sets, p,
                                 job_nodes.size());
    auto agent = PersistAgent::Start(argv, watch_line);
    if (agent) tiers.agent = std::move(*agent);
    else Log(LogLevel::kError, "run", "GPU watch agent not started", agent.status().message());
  }
  counters = LoadCounters(counters_path, st.job, st.restarts);
  if (!p.checkpoint_request_file.empty() && ::unlink(p.checkpoint_request_file.c_str()) != 0 && errno != ENOENT)
    Log(LogLevel::kError, "run", "stale checkpoint request", Status::FromErrno(errno, p.checkpoint_request_file).message());

  Log(LogLevel::kInfo, "run",
      (in_slurm ? "job " + st.job + " on " + st.node : "on " + st.node) + ", restart " + std::to_string(st.restarts),
      st.resume.empty() ? "no complete checkpoint: starting fresh" : "resuming from " + st.resume);

  std::unique_ptr<GpuUtilSource> nvml_gpu = p.gpu == nullptr ? OpenGpuWatch(cfg, p, env) : nullptr;
  GpuUtilSource* gpu = p.gpu != nullptr ? p.gpu : nvml_gpu.get();
  SuperviseOptions so = SuperviseOptionsFor(p, argv, ChildEnv(p, st), gpu);
  std::unique_ptr<HangProbe> probe = MakeHangProbe(cfg, p, env);
  if (probe) so.kill_held = [&] { return probe->Running(); };
  so.on_alert = [&](const Alert& a) { OnAlert(a, env, command, probe.get(), nwatch.get(), st); };
  so.on_tick = [&] {
    if (!tiers.on) Prune(p);
    if (tiers.agent) tiers.agent->Watch();
    if (probe && !probe->Running()) TakeHang(st, probe.get(), nwatch.get(), command);
  };

  auto r = RunSupervised(so);
  if (!r) {
    Log(LogLevel::kError, "run", "command", r.status().message());
    return r.status().code() == Status::Code::kInvalidArgument ? 2 : 127;
  }
  if (!p.checkpoint_dir.empty() && !tiers.on) Prune(p);
  if (probe) {  // an attribution still under way ends within its bound
    for (double until = MonotonicSeconds() + probe->Bound(); probe->Running() && MonotonicSeconds() < until;)
      ::usleep(100000);
    if (!probe->Running()) TakeHang(st, probe.get(), nwatch.get(), command);
  }
  RunDecision d = Decide(*r, p, counters, in_slurm);
  if (st.hang && !st.hang->nodes.empty() && d.kind.compare(0, 6, "stall:") == 0) {
    // The named nodes are excluded from the retry, as a node failure's are.
    d.exclude_nodes = true;
    d.matched_line = Join(st.hang->nodes, " ");
    d.reason += "; hang attributed to " + Join(st.hang->nodes, ",");
  }
  int exit_code = r->exit.exit_code;
  bool requeued = false;
  if (d.action == RunAction::kRequeue) KeepCancelledCancelled(cfg, st.job, &d);
  if (d.action == RunAction::kRequeue) {
    requeued = RequeueAsDecided(cfg, env, st, d, &counters, counters_path);
    if (requeued) exit_code = kRequeuedExit;
  } else if (d.kind == "done" || d.kind == "cancelled") {
    EndTiers(tiers);
    Log(LogLevel::kInfo, "run", "finished", d.reason);
  } else {
    EndTiers(tiers);
    Log(LogLevel::kError, "run", "not requeued", d.reason);
  }
  Publish(st, BuildReport(st, command, &*r, &d, requeued));
  // After a requeue the agent is stopped last, never before the requeue and
  // the result: a preemption's grace time may be short, and Slurm now ends
  // the agent anyway; the epilog finishes the copy.
  if (tiers.agent) tiers.agent->Finish();
  return exit_code;
}

}  // namespace preflight
