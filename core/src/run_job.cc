#include "preflight/run_job.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "preflight/checkpoint.h"
#include "preflight/fileutil.h"
#include "preflight/gpu_util.h"
#include "preflight/log.h"
#include "preflight/process.h"
#include "preflight/regex.h"
#include "preflight/report.h"
#include "preflight/slurmctl.h"

namespace preflight {
namespace {

// The wrapper options that mirror a site config key: the command line wins.
struct MirrorOption {
  const char* option;
  const char* key;
  const char* value_name;
  const char* help;
};

const MirrorOption kMirrored[] = {
    {"requeue", "run_requeue", "yes|no", "may requeue this job (preemption, retryable failures)"},
    {"max-requeues", "run_max_requeues", "N", "most requeues after preemption"},
    {"max-failure-restarts", "run_max_failure_restarts", "N", "most requeues after a retryable failure"},
    {"grace", "run_grace", "DURATION", "time to checkpoint and exit after the preemption signal"},
    {"kill-wait", "run_kill_wait", "DURATION", "SIGTERM to SIGKILL wait when stopping COMMAND"},
    {"preempt-signals", "run_preempt_signals", "LIST", "signals that mean preemption (USR2,TERM)"},
    {"checkpoint-signal", "run_checkpoint_signal", "SIG", "signal that asks COMMAND to checkpoint (none: file only)"},
    {"retry-nccl", "run_retry_nccl", "REGEX", "output of a retryable NCCL failure ('' : off)"},
    {"retry-cuda", "run_retry_cuda", "REGEX", "output of a retryable CUDA failure ('' : off)"},
    {"retry-node", "run_retry_node", "REGEX", "output of a retryable node failure ('' : off)"},
    {"nan-pattern", "run_nan_pattern", "REGEX", "output line meaning the loss went NaN ('' : off)"},
    {"stall-output", "run_stall_output", "DURATION", "alert after this long without an output line (0: off)"},
    {"stall-heartbeat", "run_stall_heartbeat", "DURATION", "alert after this long without a heartbeat update (0: off)"},
    {"stall-gpu", "run_stall_gpu", "DURATION", "alert after every GPU idled this long (0: off; needs NVML)"},
    {"gpu-idle-percent", "run_gpu_idle_percent", "N", "GPU utilisation at or below N% is idle"},
    {"stall-restart", "run_stall_restart", "yes|no", "on a stall or NaN, kill COMMAND and requeue"},
    {"alert-hook", "run_alert_hook", "CMD", "shell command run on each alert"},
    {"keep-checkpoints", "run_keep_checkpoints", "K", "keep the newest K complete checkpoints (0: all)"},
    {"checkpoint-marker", "run_checkpoint_marker", "NAME", "file that marks a checkpoint directory complete"},
};

std::string EnvOr(const EnvMap& env, const std::string& k, const std::string& dflt = "") {
  auto it = env.find(k);
  return it == env.end() ? dflt : it->second;
}

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string o;
  for (const auto& s : v) o += (o.empty() ? "" : sep) + s;
  return o;
}

}  // namespace

void AddRunOptions(po::options_description& desc, RunCli& cli) {
  desc.add_options()
      ("checkpoint-dir", po::value<std::string>(&cli.checkpoint_dir)->value_name("DIR"),
       "one subdirectory per checkpoint; the newest complete one is exported as PREFLIGHT_RESUME_FROM")
      ("checkpoint-request-file", po::value<std::string>(&cli.checkpoint_request_file)->value_name("PATH"),
       "file created when a checkpoint is wanted (default DIR/.preflight-checkpoint-request)")
      ("heartbeat-file", po::value<std::string>(&cli.heartbeat_file)->value_name("PATH"),
       "file COMMAND touches as it progresses (for --stall-heartbeat)")
      ("result", po::value<std::string>(&cli.result_file)->value_name("FILE"),
       "also write the result JSON here");
  for (const auto& m : kMirrored)
    desc.add_options()(m.option, po::value<std::string>()->value_name(m.value_name),
                       (std::string(m.help) + " [site: " + m.key + "]").c_str());
}

Expected<RunPolicy> ResolveRunPolicy(const Config& site, const po::variables_map& vm, const RunCli& cli) {
  Config cfg = site;
  for (const auto& m : kMirrored) {
    if (!vm.count(m.option)) continue;
    std::string v = vm[m.option].as<std::string>();
    Status s = ApplyOverrides(cfg, {std::string(m.key) + "=" + v}, std::string("--") + m.option, "");
    if (!s.ok()) {
      // "--grace 'soon': key 'run_grace': bad duration 'soon'"
      size_t k = s.message().find("key '");
      return Status::InvalidArgument(std::string("--") + m.option + " '" + v + "': " +
                                     (k == std::string::npos ? s.message() : s.message().substr(k)));
    }
  }
  RunPolicy p;
  p.checkpoint_dir = cli.checkpoint_dir;
  while (p.checkpoint_dir.size() > 1 && p.checkpoint_dir.back() == '/') p.checkpoint_dir.pop_back();
  p.checkpoint_marker = cfg.run_checkpoint_marker;
  if (p.checkpoint_marker.empty() || p.checkpoint_marker.find('/') != std::string::npos)
    return Status::InvalidArgument("checkpoint marker '" + p.checkpoint_marker + "': must be a plain file name");
  p.checkpoint_request_file = cli.checkpoint_request_file;
  if (p.checkpoint_request_file.empty() && !p.checkpoint_dir.empty())
    p.checkpoint_request_file = p.checkpoint_dir + "/.preflight-checkpoint-request";
  p.keep_checkpoints = cfg.run_keep_checkpoints;
  if (p.keep_checkpoints > 0 && p.checkpoint_dir.empty())
    return Status::InvalidArgument("--keep-checkpoints " + std::to_string(p.keep_checkpoints) + " needs --checkpoint-dir");
  p.heartbeat_file = cli.heartbeat_file;
  p.result_file = cli.result_file;
  p.requeue = cfg.run_requeue;
  p.max_requeues = cfg.run_max_requeues;
  p.max_failure_restarts = cfg.run_max_failure_restarts;
  p.grace_s = cfg.run_grace_ms / 1000.0;
  p.kill_wait_s = cfg.run_kill_wait_ms / 1000.0;
  auto sigs = ParseSignalList(cfg.run_preempt_signals);
  if (!sigs) return sigs.status().Context("preempt signals");
  p.preempt_signals = *sigs;
  auto ck = ParseSignal(cfg.run_checkpoint_signal);
  if (!ck) return ck.status().Context("checkpoint signal");
  if (*ck == SIGUSR1)
    Log(LogLevel::kInfo, "run", "checkpoint signal SIGUSR1", "NCCL uses SIGUSR1 internally; USR2 is safer");
  p.checkpoint_signal = *ck;
  if (p.checkpoint_signal == 0 && p.checkpoint_request_file.empty() && !p.preempt_signals.empty())
    return Status::InvalidArgument(
        "checkpoint signal 'none' and no checkpoint request file: preemption could not reach the command");
  for (const auto& c : {RetryClass{"nccl", cfg.run_retry_nccl}, RetryClass{"cuda", cfg.run_retry_cuda},
                        RetryClass{"node", cfg.run_retry_node}}) {
    if (c.pattern.empty()) continue;
    auto re = Regex::Compile(c.pattern);
    if (!re) return re.status().Context("retry class " + c.name);
    p.retry_classes.push_back(c);
  }
  p.stall.output_s = cfg.run_stall_output_ms / 1000.0;
  p.stall.heartbeat_s = cfg.run_stall_heartbeat_ms / 1000.0;
  if (p.stall.heartbeat_s > 0 && p.heartbeat_file.empty())
    return Status::InvalidArgument("--stall-heartbeat needs --heartbeat-file");
  p.stall.gpu_s = cfg.run_stall_gpu_ms / 1000.0;
  p.stall.gpu_idle_percent = static_cast<unsigned>(std::min<uint64_t>(cfg.run_gpu_idle_percent, 100));
  p.stall.nan_pattern = cfg.run_nan_pattern;
  auto w = StallWatch::Create(p.stall, 0);  // validates the NaN regex
  if (!w) return w.status();
  p.stall_restart = cfg.run_stall_restart;
  p.alert_hook = cfg.run_alert_hook;
  return p;
}

std::string CountersPath(const std::string& checkpoint_dir) { return checkpoint_dir + "/.preflight-run.state"; }

RunCounters LoadCounters(const std::string& path, const std::string& job_id, uint64_t slurm_restarts) {
  RunCounters c;
  if (path.empty()) {
    c.preempt_requeues = c.failure_restarts = slurm_restarts;
    return c;
  }
  std::ifstream in(path);
  std::string line, job;
  RunCounters got;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    auto n = ParseCount(v);
    if (k == "job") job = v;
    else if (k == "preempt_requeues" && n) got.preempt_requeues = *n;
    else if (k == "failure_restarts" && n) got.failure_restarts = *n;
  }
  // Counters of another job (the directory reused by a new submission) start over.
  if (!job.empty() && job == job_id) c = got;
  return c;
}

Status SaveCounters(const std::string& path, const std::string& job_id, const RunCounters& c) {
  return WriteFileAtomic(path, "job=" + job_id + "\npreempt_requeues=" + std::to_string(c.preempt_requeues) +
                                   "\nfailure_restarts=" + std::to_string(c.failure_restarts) + "\n");
}

Expected<std::string> ClassifyFailure(const std::vector<std::string>& tail, const std::vector<RetryClass>& classes,
                                      std::string* matched) {
  std::vector<Regex> res;
  for (const auto& c : classes) {
    auto re = Regex::Compile(c.pattern);
    if (!re) return re.status().Context("retry class " + c.name);
    res.push_back(*re);
  }
  for (auto it = tail.rbegin(); it != tail.rend(); ++it) {
    for (size_t i = 0; i < classes.size(); ++i) {
      if (res[i].Search(*it)) {
        if (matched) *matched = *it;
        return classes[i].name;
      }
    }
  }
  return std::string();
}

Expected<std::vector<std::string>> ExpandHostlist(const std::string& s) {
  std::vector<std::string> out;
  // Split at top-level commas.
  std::vector<std::string> items;
  int depth = 0;
  std::string cur;
  for (char c : s) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) return Status::InvalidArgument("hostlist '" + s + "': unbalanced ']'");
    if (c == ',' && depth == 0) { items.push_back(cur); cur.clear(); continue; }
    cur += c;
  }
  if (depth != 0) return Status::InvalidArgument("hostlist '" + s + "': unbalanced '['");
  items.push_back(cur);
  for (const auto& item : items) {
    if (item.empty()) continue;
    size_t lb = item.find('[');
    if (lb == std::string::npos) { out.push_back(item); continue; }
    size_t rb = item.find(']', lb);
    std::string prefix = item.substr(0, lb), ranges = item.substr(lb + 1, rb - lb - 1);
    auto rest = ExpandHostlist(item.substr(rb + 1));  // further bracket groups
    if (!rest) return rest.status();
    if (rest->empty()) rest->push_back("");
    std::stringstream rs(ranges);
    std::string r;
    while (std::getline(rs, r, ',')) {
      size_t dash = r.find('-');
      std::string a = r.substr(0, dash), b = dash == std::string::npos ? a : r.substr(dash + 1);
      auto lo = ParseCount(a), hi = ParseCount(b);
      if (!lo || !hi || *hi < *lo || *hi - *lo > 100000)
        return Status::InvalidArgument("hostlist '" + s + "': bad range '" + r + "'");
      for (uint64_t n = *lo; n <= *hi; ++n) {
        std::string num = std::to_string(n);
        if (num.size() < a.size()) num = std::string(a.size() - num.size(), '0') + num;  // keep padding
        for (const auto& suffix : *rest) out.push_back(prefix + num + suffix);
      }
    }
  }
  return out;
}

std::vector<std::string> CondemnedNodes(const std::string& matched_line, const std::vector<std::string>& job_nodes,
                                        const std::vector<std::string>& drained_by_preflight,
                                        const std::string& self) {
  std::set<std::string> named;
  std::string tok;
  auto flush = [&] {
    std::string t = tok.substr(0, tok.find('.'));  // n2.cluster.local -> n2
    for (const auto& n : job_nodes)
      if (tok == n || t == n) named.insert(n);
    tok.clear();
  };
  for (char c : matched_line) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') tok += c;
    else flush();
  }
  flush();
  std::vector<std::string> out;
  for (const auto& n : job_nodes)
    if (named.count(n) || std::find(drained_by_preflight.begin(), drained_by_preflight.end(), n) !=
                              drained_by_preflight.end())
      out.push_back(n);
  if (out.empty() && !self.empty()) out.push_back(self);
  return out;
}

RunDecision Decide(const SuperviseResult& r, const RunPolicy& p, const RunCounters& c, bool in_slurm) {
  RunDecision d;
  const int code = r.exit.exit_code;
  auto gate = [&](uint64_t done, uint64_t max, const std::string& what) {
    if (!in_slurm) { d.reason = what + ", but not in a Slurm job: nothing to requeue"; return; }
    if (!p.requeue) { d.reason = what + ", but requeueing is off (--requeue / run_requeue)"; return; }
    if (max == 0) { d.reason = what + ", but requeues for this are off (max 0)"; return; }
    if (done >= max) {
      d.reason = what + ", but already requeued " + std::to_string(done) + " time(s) for this (max " +
                 std::to_string(max) + ")";
      return;
    }
    d.action = RunAction::kRequeue;
    d.reason = what + ": requeue " + std::to_string(done + 1) + " of " + std::to_string(max);
  };
  if (r.preempted) {
    d.kind = "preemption";
    gate(c.preempt_requeues, p.max_requeues,
         "preempted (" + SignalName(r.preempt_signal) + "), command exited " + std::to_string(code) +
             (r.grace_expired ? " after the grace period ran out" : " after the checkpoint request"));
    return d;
  }
  if (r.killed_for_alert && !r.alerts.empty()) {
    const Alert& a = r.alerts.front();
    d.kind = std::string("stall:") + AlertKindName(a.kind);
    gate(c.failure_restarts, p.max_failure_restarts, "stopped the command: " + a.detail);
    return d;
  }
  if (code == 0) {
    d.kind = "done";
    d.reason = "command exited 0";
    return d;
  }
  std::string line;
  auto cls = ClassifyFailure(r.tail, p.retry_classes, &line);
  if (!cls) {
    d.kind = "user-error";
    d.reason = "exit " + std::to_string(code) + ": " + cls.status().message();
    return d;
  }
  if (cls->empty()) {
    d.kind = "user-error";
    d.reason = "command exited " + std::to_string(code) + "; its output matches no retryable failure class: not retried";
    return d;
  }
  d.kind = "failure:" + *cls;
  d.matched_line = line;
  d.exclude_nodes = true;
  gate(c.failure_restarts, p.max_failure_restarts,
       "command exited " + std::to_string(code) + " with a retryable " + *cls + " failure");
  return d;
}

namespace {

struct RunState {
  const Config* cfg;
  const RunPolicy* p;
  std::string job, node, resume;
  uint64_t restarts = 0;
  double started = 0;
  std::vector<Alert> alerts;
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

void Prune(const RunPolicy& p) {
  if (p.keep_checkpoints == 0) return;
  auto d = PruneCheckpoints(p.checkpoint_dir, p.checkpoint_marker, p.keep_checkpoints);
  if (!d) {
    Log(LogLevel::kError, "run", "checkpoint pruning", d.status().message());
    return;
  }
  for (const auto& path : *d) Log(LogLevel::kInfo, "run", "deleted old checkpoint " + path);
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

  RunCounters counters;
  std::string counters_path;
  if (!p.checkpoint_dir.empty()) {
    Status s = MakeDirs(p.checkpoint_dir, 0755);
    if (!s.ok()) {
      Log(LogLevel::kError, "run", "checkpoint dir", s.message());
      return 2;
    }
    auto newest = NewestCompleteCheckpoint(p.checkpoint_dir, p.checkpoint_marker);
    if (newest) st.resume = *newest;
    else Log(LogLevel::kError, "run", "looking for a checkpoint to resume from", newest.status().message());
    Prune(p);
    counters_path = CountersPath(p.checkpoint_dir);
  }
  counters = LoadCounters(counters_path, st.job, st.restarts);
  if (!p.checkpoint_request_file.empty() && ::unlink(p.checkpoint_request_file.c_str()) != 0 && errno != ENOENT)
    Log(LogLevel::kError, "run", "stale checkpoint request", Status::FromErrno(errno, p.checkpoint_request_file).message());

  std::vector<std::string> child_env = {
      "PREFLIGHT_RESTART_COUNT=" + std::to_string(st.restarts),
      "PREFLIGHT_RESUME_FROM=" + st.resume,
      "PREFLIGHT_CHECKPOINT_DIR=" + p.checkpoint_dir,
      "PREFLIGHT_CHECKPOINT_MARKER=" + p.checkpoint_marker,
      "PREFLIGHT_CHECKPOINT_REQUEST=" + p.checkpoint_request_file,
      "PREFLIGHT_CHECKPOINT_SIGNAL=" + (p.checkpoint_signal ? SignalName(p.checkpoint_signal).substr(3) : "none"),
      "PREFLIGHT_HEARTBEAT_FILE=" + p.heartbeat_file,
  };
  Log(LogLevel::kInfo, "run",
      (in_slurm ? "job " + st.job + " on " + st.node : "on " + st.node) + ", restart " + std::to_string(st.restarts),
      st.resume.empty() ? "no complete checkpoint: starting fresh" : "resuming from " + st.resume);

  std::unique_ptr<GpuUtilSource> nvml_gpu;
  GpuUtilSource* gpu = p.gpu;
  if (p.stall.gpu_s > 0 && gpu == nullptr) {
    std::vector<int> minors;
    auto ids = ParseIdList(EnvOr(env, "SLURM_JOB_GPUS"));
    if (ids) minors = *ids;
    auto src = OpenNvmlGpuUtil(cfg.nvml_library, minors);
    if (src) {
      nvml_gpu = std::move(*src);
      gpu = nvml_gpu.get();
    } else {
      Log(LogLevel::kInfo, "run", "GPU stall watch off", src.status().message());
    }
  }
  SuperviseOptions so;
  so.argv = argv;
  so.env = child_env;
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
  so.on_alert = [&](const Alert& a) {
    st.alerts.push_back(a);
    Log(LogLevel::kError, "run", std::string("ALERT ") + AlertKindName(a.kind), a.detail);
    Publish(st, BuildReport(st, command, nullptr, nullptr, false));
    if (!p.alert_hook.empty()) {
      Status h = SpawnDetached({"/bin/sh", "-c", p.alert_hook},
                               {"PREFLIGHT_ALERT_KIND=" + std::string(AlertKindName(a.kind)),
                                "PREFLIGHT_ALERT_DETAIL=" + a.detail, "PREFLIGHT_JOB_ID=" + st.job,
                                "PREFLIGHT_NODE=" + st.node});
      if (!h.ok()) Log(LogLevel::kError, "run", "alert hook", h.message());
    }
  };
  so.on_tick = [&] { Prune(p); };

  auto r = RunSupervised(so);
  if (!r) {
    Log(LogLevel::kError, "run", "command", r.status().message());
    return r.status().code() == Status::Code::kInvalidArgument ? 2 : 127;
  }
  if (!p.checkpoint_dir.empty()) Prune(p);
  RunDecision d = Decide(*r, p, counters, in_slurm);
  int exit_code = r->exit.exit_code;
  bool requeued = false;
  if (d.action == RunAction::kRequeue) {
    // scancel sends the same SIGTERM as a preemption, and slurmctld accepts
    // a requeue of a job it is cancelling: a cancelled job must stay
    // cancelled. While Slurm ends a job (scancel, the time limit itself) its
    // JobState reads COMPLETING (CANCELLED once done); a job asked to
    // checkpoint ahead (--signal=B:USR2@T) or in a preemption grace time is
    // still RUNNING.
    auto rec = LoadJob(cfg, st.job);
    if (rec && (rec->state == "CANCELLED" || rec->state == "COMPLETING")) {
      d.action = RunAction::kExit;
      d.kind = "cancelled";
      d.reason = "job " + st.job + " is ending (" + rec->state + ", e.g. scancel): not requeued (" + d.reason + ")";
    }
  }
  if (d.action == RunAction::kRequeue) {
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
    if (d.kind == "preemption") ++counters.preempt_requeues;
    else ++counters.failure_restarts;
    if (!counters_path.empty()) {
      Status s = SaveCounters(counters_path, st.job, counters);
      if (!s.ok()) Log(LogLevel::kError, "run", "requeue counters", s.message());
    }
    Status s = Requeue(cfg, st.job, exclude);
    if (s.ok()) {
      requeued = true;
      exit_code = kRequeuedExit;
      Log(LogLevel::kInfo, "run", "requeued job " + st.job,
          d.reason + (exclude.empty() ? "" : "; excluding " + Join(exclude, ",")));
    } else {
      Log(LogLevel::kError, "run", "requeue of job " + st.job + " failed", s.message() + " (" + d.reason + ")");
    }
  } else if (d.kind == "done" || d.kind == "cancelled") {
    Log(LogLevel::kInfo, "run", "finished", d.reason);
  } else {
    Log(LogLevel::kError, "run", "not requeued", d.reason);
  }
  Publish(st, BuildReport(st, command, &*r, &d, requeued));
  return exit_code;
}

}  // namespace preflight
