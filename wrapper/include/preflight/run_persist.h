// preflight-run's two checkpoint tiers (issue 30; man preflight-run(1)):
// the job's persist plan, the per-node agent that makes complete local
// checkpoints durable on the shared tier while the job runs, and the
// resume choice across both tiers.
//
// THE AGENT. preflight-run runs on the batch node only. On a one-node job
// the agent is a child process (`preflight-run --persist-agent ...`, the
// hidden mode of the same binary, RunPersistAgentTask); on a multi-node job
// it is one background step running the same on every node (`srun --overlap
// --ntasks-per-node=1 ... preflight-run --persist-agent ...`).
// Either way, on each node: the plan is written into that node's local dir
// (WriteCkptPlan, for the epilog), the I/O priority set (ckpt_io_class),
// and PersistRound runs every ckpt_interval until told to stop, then once
// more (bounded by kAgentLastRoundS). One line per new record outcome goes
// to the job output (CkptRecordLine). Nothing the agent does fails the job:
// its errors are lines in the output, and the epilog finishes what it left.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "preflight/ckpt_config.h"
#include "preflight/ckpt_job.h"
#include "preflight/ckpt_record.h"
#include "preflight/ckpt_resume.h"
#include "preflight/config.h"
#include "preflight/job.h"
#include "preflight/job_liveness.h"
#include "preflight/process.h"
#include "preflight/run_policy.h"

namespace preflight {

// The last round after the command exited (and the step's stop wait) is bounded by this.
inline constexpr double kAgentLastRoundS = 60;

// The plan for this job: tier, run "<SLURM_JOB_ID>.<SLURM_RESTART_COUNT>",
// nodes SLURM_JOB_NODELIST expanded (the batch node alone without one),
// convention, marker, keep_shared (--keep-checkpoints), keep_local
// (ckpt_keep_local), verify. Unavailable outside a Slurm job.
Expected<CkptPlan> BuildCkptPlan(const Config& cfg, const RunPolicy& p, const EnvMap& env);

// Pure: whether `run` ("JOB.R") is an earlier run of the job whose run is
// `current`: same job id, lower restart count. Such a run is dead: Slurm
// starts a requeued job only after every epilog of its previous run ended.
bool EarlierRunOfJob(const std::string& run, const std::string& current);

// At the start of a run, on the batch node: the tier's hidden partial
// folders that no live run can still write are committed when complete,
// else removed (CkptTierGc, no retention). Dead are this job's earlier runs
// (a copy a preemption or a killed agent cut short; EarlierRunOfJob) and
// other jobs' runs that slurmctld says have ended or does not know (the
// partial folders of a chain's earlier job, whose last run no later run of
// its own will clean): `ask` is handed at most kCleanAskLimit such job ids
// and returns slurmctld's answer (AskSlurmJobs; job_liveness.h's rule,
// MayRemoveRecords). A job it was not asked about, or every one when it
// could not be asked, is kept; without `ask` only this job's earlier runs
// go. Returns the lines saying what went and what was kept for lack of an
// answer.
inline constexpr size_t kCleanAskLimit = 16;
using AskJobs = std::function<SlurmJobs(const std::set<std::string>& jobs)>;
std::vector<std::string> CleanEarlierRuns(const CkptPlan& plan, const AskJobs& ask = {});

// "preflight: checkpoint NAME on NODE: durable on TIER (N bytes in S s, R MB/s)",
// "...: waiting for parts of n2,n3", "...: failed: why", "...: copying".
std::string CkptRecordLine(const CkptRecord& r);

// Where to resume from across both tiers (`tier`, "" for none; the
// policy's local dir only when `allow_local`: a one-node job), checked at
// --verify-resume, and the lines saying so.
Expected<CkptResumeChoice> ChooseRunResume(const RunPolicy& p, const std::string& tier,
                                           const CkptConventionSpec& spec, bool allow_local);

// The loop of one node's agent over `local_dir`: a round every `interval_s`
// until `Stop`, then a last one. Prints each record's line once per change.
class PersistLoop {
 public:
  // rate_cap: bytes per second each copy writes at most (ckpt_rate_cap); 0: none.
  PersistLoop(std::string local_dir, CkptPlan plan, std::string node, double interval_s, CkptIoClass io,
              uint64_t rate_cap = 0);
  // Runs until Stop() (then the last round); returns the rounds run.
  unsigned Run();
  void Stop();
  // One round now (also what Run calls); deadline 0: none.
  void RoundOnce(double deadline);

 private:
  std::string local_dir_, node_;
  CkptPlan plan_;
  double interval_s_;
  CkptIoClass io_;
  uint64_t rate_cap_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::map<std::string, std::string> said_;  // name -> last line printed
};

// The job's agent, as the batch node sees it: a child process running
// `argv` (PersistAgentArgv), its output copied line by line to stderr (the
// job output) by a thread.
//
// An agent that ends abnormally while the job runs (killed: the OOM killer,
// kill -9, a node's step task lost; or a non-zero exit) is restarted by
// Watch, at most kAgentRestarts times, kAgentRestartDelayS after the end
// (doubling each time), each said in one line. What a killed agent left
// behind is a hidden partial folder the next round resumes or replaces:
// nothing it did is shown as durable unless the commit completed.
inline constexpr int kAgentRestarts = 3;
inline constexpr double kAgentRestartDelayS = 2;

class PersistAgent {
 public:
  ~PersistAgent();
  // on_line: each output line first (from the copier thread); true: taken
  // (the GPU watch's lines), not copied to the job output.
  static Expected<std::unique_ptr<PersistAgent>> Start(const std::vector<std::string>& argv,
                                                       std::function<bool(const std::string&)> on_line = nullptr);
  // Non-blocking, about once a second while the command runs: reaps an
  // agent that ended and restarts it (above). Returns the line it said, "" if none.
  std::string Watch();
  // SIGUSR1 (the agent does its last round), then waits at most `bound_s`,
  // then SIGTERM, SIGKILL to its process group. Idempotent.
  void Finish(double bound_s = kAgentLastRoundS + 10);

 private:
  PersistAgent() = default;
  Status Spawn();
  std::vector<std::string> argv_;
  std::function<bool(const std::string&)> on_line_;
  std::thread copier_;
  Child child_;
  bool finished_ = false;
  bool ended_ = false;        // the current child was reaped by Watch
  int restarts_ = 0;
  double restart_at_ = 0;     // monotonic time of the next restart (ended_)
  std::string end_;           // how the last one ended
};

// The agent's command line: `SELF --persist-agent [--config C] [--set K=V]...
// [--checkpoint-dir AS_GIVEN] --persist-to TIER ...`, behind `srun --overlap
// --nodes=N --ntasks=N --ntasks-per-node=1 ...` when nodes > 1.
// The watch interval the agent gets (node_watch.h): run_watch_gpus while a
// stall watch is on, else 0; always passed, so the agent never takes the
// site default on its own.
double AgentWatchSeconds(const RunPolicy& p);
std::vector<std::string> PersistAgentArgv(const std::string& self, const std::string& config,
                                          const std::vector<std::string>& sets, const RunPolicy& p, size_t nodes);

// The hidden `--persist-agent` mode on one node of the step: the node's
// local dir ($PREFLIGHT_CKPT_LOCAL, else the policy's dir with %n of this
// node), the plan written there, the loop until SIGUSR1 or SIGTERM, then
// a last round. Returns 0 whatever happened (errors are output lines).
int RunPersistAgentTask(const Config& cfg, const RunPolicy& p, const EnvMap& env);

}  // namespace preflight
