#include "preflight/run_persist.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "preflight/ckpt_retention.h"
#include "preflight/ckpt_tier.h"
#include "preflight/config_values.h"
#include "preflight/clock.h"
#include "preflight/fileutil.h"
#include "preflight/hostlist.h"
#include "preflight/job.h"
#include "preflight/node_watch.h"
#include "preflight/nvml.h"
#include "preflight/strings.h"
#include "preflight/supervisor.h"

namespace preflight {
namespace {

std::string EnvOr(const EnvMap& env, const std::string& k, const std::string& dflt = "") {
  auto it = env.find(k);
  return it == env.end() || it->second.empty() ? dflt : it->second;
}

// One whole line to stderr (the job output), as Log writes its own.
void Say(const std::string& line) {
  std::string l = line + "\n";
  size_t off = 0;
  while (off < l.size()) {
    ssize_t n = ::write(2, l.data() + off, l.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

Expected<CkptPlan> BuildCkptPlan(const Config& cfg, const RunPolicy& p, const EnvMap& env) {
  std::string job = EnvOr(env, "SLURM_JOB_ID", EnvOr(env, "SLURM_JOBID"));
  if (job.empty()) return Status::Unavailable("not in a Slurm job: no run id for the shared tier");
  CkptPlan plan;
  plan.tier = p.persist_to;
  plan.run = job + "." + EnvOr(env, "SLURM_RESTART_COUNT", "0");
  std::string nodelist = EnvOr(env, "SLURM_JOB_NODELIST", EnvOr(env, "SLURM_NODELIST"));
  if (!nodelist.empty()) {
    auto nodes = ExpandHostlist(nodelist);
    if (!nodes) return nodes.status().Context("SLURM_JOB_NODELIST");
    plan.nodes = *nodes;
  } else {
    plan.nodes = {EnvOr(env, "SLURMD_NODENAME", ShortHostname())};
  }
  plan.convention = p.convention;
  plan.marker = p.checkpoint_marker;
  plan.keep_shared = p.keep_checkpoints;
  plan.keep_local = cfg.ckpt.keep_local;
  plan.verify = p.verify_resume;
  if (Status s = ValidCkptPlan(plan); !s.ok()) return s;
  return plan;
}

std::string CkptRecordLine(const CkptRecord& r) {
  std::string head = "preflight: checkpoint " + r.name + " on " + r.node + ": ";
  switch (r.state) {
    case CkptState::kDurable:
      return head + "durable on " + r.tier + " (" + std::to_string(r.bytes) + " bytes in " + Fixed(r.copy_seconds, 1) +
             " s, " + Fixed(r.Throughput() / 1e6, 1) + " MB/s)";
    case CkptState::kPersisting:
      if (!r.missing.empty()) return head + "waiting for parts of " + Join(r.missing, ",");
      return head + "copying to " + r.tier;
    case CkptState::kFailed:
      return head + "failed: " + r.error;
    case CkptState::kLocal:
      break;
  }
  return head + "complete on local disk";
}

Expected<CkptResumeChoice> ChooseRunResume(const RunPolicy& p, const std::string& tier,
                                           const CkptConventionSpec& spec, bool allow_local) {
  CkptResumeInputs in;
  in.local_dir = p.checkpoint_dir;
  in.convention = spec;
  in.allow_local = allow_local;
  in.tier = tier;
  in.verify.level = p.verify_resume;
  in.verify.seed = static_cast<uint64_t>(NowUnix() * 1000);  // different files on each resume
  return ChooseCkptResume(in);
}

PersistLoop::PersistLoop(std::string local_dir, CkptPlan plan, std::string node, double interval_s, CkptIoClass io,
                         uint64_t rate_cap)
    : local_dir_(std::move(local_dir)), node_(std::move(node)), plan_(std::move(plan)), interval_s_(interval_s),
      io_(io), rate_cap_(rate_cap) {}

void PersistLoop::Stop() {
  std::lock_guard<std::mutex> l(mu_);
  stop_ = true;
  cv_.notify_all();
}

void PersistLoop::RoundOnce(double deadline) {
  CkptRoundOptions o;
  o.deadline = deadline;
  o.rate_cap = rate_cap_;
  auto r = PersistRound(local_dir_, plan_, node_, o);
  auto once = [&](const std::string& key, const std::string& line) {
    if (said_[key] == line) return;
    said_[key] = line;
    Say(line);
  };
  if (!r) {
    once(" round", "preflight: checkpoint agent on " + node_ + ": " + r.status().message());
    return;
  }
  said_.erase(" round");
  for (const auto& rec : r->records) once(rec.name, CkptRecordLine(rec));
  for (const auto& path : r->removed_local)
    Say("preflight: checkpoint " + path.substr(path.rfind('/') + 1) + " on " + node_ + ": removed from local disk (durable on the tier, ckpt_keep_local)");
  for (const auto& path : r->removed_shared)
    Say("preflight: checkpoint " + path.substr(path.rfind('/') + 1) + ": removed from " + plan_.tier + " (--keep-checkpoints " +
        std::to_string(plan_.keep_shared) + ")");
  for (const auto& n : r->notes) once(" note " + n, "preflight: checkpoint agent on " + node_ + ": " + n);
  if (r->timed_out)
    Say("preflight: checkpoint agent on " + node_ + ": stopped at its deadline; " +
        std::to_string(r->bytes_not_durable) + " bytes of complete checkpoints not durable yet (the epilog carries on)");
}

unsigned PersistLoop::Run() {
  Status io = SetCkptIoClass(io_);
  if (!io.ok()) Say("preflight: checkpoint agent on " + node_ + ": " + io.message() + " (copying at normal priority)");
  unsigned rounds = 0;
  for (;;) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stop_) break;
    }
    RoundOnce(0);
    ++rounds;
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, std::chrono::duration<double>(interval_s_), [&] { return stop_; });
    if (stop_) break;
  }
  RoundOnce(MonotonicSeconds() + kAgentLastRoundS);
  return rounds + 1;
}

bool EarlierRunOfJob(const std::string& run, const std::string& current) {
  auto split = [](const std::string& r, std::string* job, uint64_t* restart) {
    size_t dot = r.rfind('.');
    if (dot == std::string::npos || dot == 0) return false;
    auto n = ParseCount(r.substr(dot + 1));
    if (!n) return false;
    *job = r.substr(0, dot);
    *restart = *n;
    return true;
  };
  std::string j1, j2;
  uint64_t r1 = 0, r2 = 0;
  return split(run, &j1, &r1) && split(current, &j2, &r2) && j1 == j2 && r1 < r2;
}

namespace {
// "JOB" of a run id "JOB.R"; "" when it is none.
std::string JobOfRun(const std::string& run) {
  size_t dot = run.rfind('.');
  return dot == std::string::npos || dot == 0 ? std::string() : run.substr(0, dot);
}
}  // namespace

std::vector<std::string> CleanEarlierRuns(const CkptPlan& plan, const AskJobs& ask) {
  std::vector<std::string> lines;
  const std::string current = plan.run;
  const std::string current_job = JobOfRun(current);
  // Other jobs owning partial folders: asked about, at most kCleanAskLimit
  // (the rest wait for a later run).
  std::set<std::string> others;
  auto listed = ListCkptTier(plan.tier);
  if (listed) {
    for (const auto& e : *listed) {
      if (e.kind != CkptTierKind::kPartial) continue;
      std::string job = JobOfRun(e.run);
      if (!job.empty() && job != current_job && others.size() < kCleanAskLimit) others.insert(job);
    }
  }
  SlurmJobs slurm;  // not answered: no other job's folder goes
  if (!others.empty() && ask) slurm = ask(others);
  if (!others.empty() && ask && !slurm.answered)
    lines.push_back("preflight: run: other jobs' unfinished copies on " + plan.tier +
                    " kept: slurmctld could not be asked: " + slurm.error);
  CkptTierGcOptions o;  // keep 0: no retention, only the cleaning
  o.run_dead = [current, current_job, slurm](const std::string& run) {
    if (EarlierRunOfJob(run, current)) return true;
    std::string job = JobOfRun(run);
    return !job.empty() && job != current_job && slurm.asked.count(job) > 0 && MayRemoveRecords(slurm, job);
  };
  auto gc = CkptTierGc(plan.tier, o);
  if (!gc) {
    lines.push_back("preflight: run: cleaning the shared tier " + plan.tier + ": " + gc.status().message());
    return lines;
  }
  if (!gc->stale.empty())
    lines.push_back("preflight: run: removed " + std::to_string(gc->stale.size()) + " unfinished cop" +
                    (gc->stale.size() == 1 ? "y" : "ies") + " of ended runs from " + plan.tier + " (" +
                    Join(gc->stale, " ") + ")");
  if (!gc->committed.empty())
    lines.push_back("preflight: run: committed " + Join(gc->committed, " ") + " on " + plan.tier +
                    " (complete, left uncommitted by an ended run)");
  return lines;
}

double AgentWatchSeconds(const RunPolicy& p) {
  const bool stall = p.stall.output_s > 0 || p.stall.heartbeat_s > 0 || p.stall.gpu_s > 0;
  return stall ? p.watch_gpus_s : 0;
}

std::vector<std::string> PersistAgentArgv(const std::string& self, const std::string& config,
                                          const std::vector<std::string>& sets, const RunPolicy& p, size_t nodes) {
  std::vector<std::string> a;
  if (nodes > 1) {
    // --overlap (Slurm 20.11+): the step shares the job's CPUs, memory and
    // GRES with every other step, so it never holds up the training step.
    // --kill-on-bad-exit=1: one node's agent killed ends the whole step, so
    // srun's exit tells PersistAgent::Watch, which restarts it on every node.
    a = {"srun", "--overlap", "--nodes=" + std::to_string(nodes), "--ntasks=" + std::to_string(nodes),
         "--ntasks-per-node=1", "--cpus-per-task=1", "--kill-on-bad-exit=1", "--job-name=preflight-persist",
         "--quiet"};
  }
  a.insert(a.end(), {self, "--persist-agent"});
  if (!config.empty()) a.insert(a.end(), {"--config", config});
  for (const auto& s : sets) a.insert(a.end(), {"--set", s});
  if (!p.checkpoint_dir_arg.empty()) a.insert(a.end(), {"--checkpoint-dir", p.checkpoint_dir_arg});
  const double watch = AgentWatchSeconds(p);
  a.insert(a.end(), {"--watch-gpus", std::to_string(static_cast<long>(watch * 1000)) + "ms"});
  a.insert(a.end(), {"--persist-to", p.persist_to.empty() ? "none" : p.persist_to, "--checkpoint-convention", CkptConventionName(p.convention),
                     "--checkpoint-marker", p.checkpoint_marker, "--verify-resume", CkptVerifyName(p.verify_resume),
                     "--keep-checkpoints", std::to_string(p.keep_checkpoints)});
  return a;
}

Status PersistAgent::Spawn() {
  SpawnSpec spec;
  spec.argv = argv_;
  spec.env = MergedEnv({});
  spec.output = SpawnSpec::Output::kMerged;
  spec.exec_error_as_status = true;
  auto c = preflight::Start(spec);
  if (!c) return c.status();
  child_ = *c;
  ended_ = false;
  int fd = c->out;
  auto hook = on_line_;
  copier_ = std::thread([fd, hook] {
    // Line by line: the GPU watch's lines go to `hook` (node_watch.h), the
    // rest to the job output unchanged.
    char buf[4096];
    std::string partial;
    auto emit = [&](const std::string& line) {
      if (hook && hook(line)) return;
      std::string l = line + "\n";
      for (size_t off = 0; off < l.size();) {
        ssize_t w = ::write(2, l.data() + off, l.size() - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += static_cast<size_t>(w);
      }
    };
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      partial.append(buf, static_cast<size_t>(n));
      size_t nl;
      while ((nl = partial.find('\n')) != std::string::npos) {
        emit(partial.substr(0, nl));
        partial.erase(0, nl + 1);
      }
      if (partial.size() > 65536) { emit(partial); partial.clear(); }
    }
    if (!partial.empty()) emit(partial);
    ::close(fd);
  });
  return Status::Ok();
}

Expected<std::unique_ptr<PersistAgent>> PersistAgent::Start(const std::vector<std::string>& argv,
                                                           std::function<bool(const std::string&)> on_line) {
  std::unique_ptr<PersistAgent> a(new PersistAgent());
  a->argv_ = argv;
  a->on_line_ = std::move(on_line);
  Status s = a->Spawn();
  if (!s.ok()) return s;
  return a;
}

namespace {
std::string HowEnded(int status) {
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + SignalName(WTERMSIG(status)) + ")";
  return "exit status " + std::to_string(WEXITSTATUS(status));
}
}  // namespace

std::string PersistAgent::Watch() {
  if (finished_) return "";
  if (!ended_) {
    int status = 0;
    pid_t w = ::waitpid(child_.pid, &status, WNOHANG);
    if (w != child_.pid) return "";
    // Its output may still hold a last line (a grandchild keeps the pipe:
    // the copier ends on its own, never waited on here).
    if (copier_.joinable()) copier_.detach();
    child_.pid = -1;
    ended_ = true;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      finished_ = true;  // it ended by itself and said why (e.g. nothing to do)
      return "";
    }
    end_ = HowEnded(status);
    if (restarts_ >= kAgentRestarts) {
      finished_ = true;
      std::string line = "preflight: run: node agent ended (" + end_ + ") after " + std::to_string(restarts_) +
                         " restarts: not restarted again; the epilog makes the newest complete checkpoint durable";
      Say(line);
      return line;
    }
    restart_at_ = MonotonicSeconds() + kAgentRestartDelayS * (1 << restarts_);
    return "";
  }
  if (MonotonicSeconds() < restart_at_) return "";
  ++restarts_;
  Status s = Spawn();
  std::string line = "preflight: run: node agent ended (" + end_ + "); " +
                     (s.ok() ? "restarted (" + std::to_string(restarts_) + " of " + std::to_string(kAgentRestarts) + ")"
                             : "restart failed: " + s.message() + "; the epilog makes the newest complete checkpoint durable");
  if (!s.ok()) finished_ = true;
  Say(line);
  return line;
}

void PersistAgent::Finish(double bound_s) {
  if (finished_ || ended_ || child_.pid <= 0) {
    finished_ = true;
    return;
  }
  finished_ = true;
  ::kill(child_.pid, SIGUSR1);
  const double until = MonotonicSeconds() + bound_s;
  int status = 0;
  bool reaped = false;
  int stage = 0;
  for (;;) {
    pid_t w = ::waitpid(child_.pid, &status, WNOHANG);
    if (w == child_.pid || (w < 0 && errno != EINTR)) {
      reaped = true;
      break;
    }
    double now = MonotonicSeconds();
    if (stage == 0 && now > until) {
      Say("preflight: run: node agent: not done after " + Fixed(bound_s, 0) + " s: stopped (the epilog carries on)");
      ::kill(-child_.pid, SIGTERM);
      stage = 1;
    } else if (stage == 1 && now > until + 5) {
      ::kill(-child_.pid, SIGKILL);
      stage = 2;
    } else if (stage == 2 && now > until + 10) {
      break;  // not reaped: left behind rather than waited on forever
    }
    ::poll(nullptr, 0, 100);
  }
  if (copier_.joinable()) {
    if (reaped) copier_.join();
    else copier_.detach();
  }
}

PersistAgent::~PersistAgent() { Finish(); }

int RunPersistAgentTask(const Config& cfg, const RunPolicy& p, const EnvMap& env) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGUSR1, SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, s);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any thread: the loop's threads inherit it
  const std::string node = EnvOr(env, "SLURMD_NODENAME", ShortHostname());
  const std::string who = "preflight: checkpoint agent on " + node + ": ";
  // The GPU watch (node_watch.h): one line per sample, read by the batch
  // node's preflight-run; its own thread, whatever the persist does.
  std::unique_ptr<GpuWatchLoop> watch;
  if (p.watch_gpus_s > 0) {
    std::vector<int> minors;
    auto ids = ParseIdList(EnvOr(env, "SLURM_STEP_GPUS", EnvOr(env, "SLURM_JOB_GPUS")));
    if (ids) minors = *ids;
    ExportNvmlTestFaults(cfg);  // the fake NVML's per-node faults, as the GPU checks
    watch = std::make_unique<GpuWatchLoop>(cfg.nvml_library, minors, node, p.watch_gpus_s, Say);
  }
  std::unique_ptr<PersistLoop> loop;
  std::thread t;
  if (p.persist_to.empty() || p.checkpoint_dir.empty()) {
    if (!watch) {
      Say(who + "no shared tier or no local checkpoint dir: nothing to do");
      return 0;
    }
  } else if (auto plan = BuildCkptPlan(cfg, p, env); !plan) {
    Say(who + plan.status().message());
  } else {
    bool made = true;
    for (const auto& d : {p.checkpoint_dir, p.persist_to}) {
      Status s = MakeDirs(d, d == p.persist_to ? 0700 : 0755);
      if (!s.ok()) {
        Say(who + s.message());
        made = false;
        break;
      }
    }
    if (made) {
      Status w = WriteCkptPlan(p.checkpoint_dir, *plan);
      if (!w.ok()) Say(who + "plan for the epilog not written: " + w.message());
      loop = std::make_unique<PersistLoop>(p.checkpoint_dir, *plan, node, cfg.ckpt.interval_ms / 1000.0,
                                           cfg.ckpt.io_class, cfg.ckpt.rate_cap);
      t = std::thread([&] { loop->Run(); });
    }
  }
  if (!loop && !watch) return 0;
  int sig = 0;
  while (::sigwait(&set, &sig) != 0) {}
  if (watch) watch->Stop();
  if (loop) {
    loop->Stop();
    t.join();
  }
  return 0;
}

}  // namespace preflight
