// preflight-run's policy and its one entry point (man preflight-run(1)).
// The wrapper binary only parses its command line into a RunPolicy and
// calls RunJob; everything that decides lives here.
//
// Precedence, lowest to highest: built-in defaults < site config (run_*
// keys) < --set KEY=VALUE < the wrapper's own options (--max-requeues ...).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "preflight/cli.h"
#include "preflight/config.h"
#include "preflight/job.h"
#include "preflight/stallwatch.h"
#include "preflight/supervisor.h"

namespace preflight {

struct RetryClass {
  std::string name;     // "nccl", "cuda", "node"
  std::string pattern;  // POSIX ERE (preflight/regex.h)
};

struct RunPolicy {
  // Checkpoints (user's choice, never site policy).
  std::string checkpoint_dir;           // "" : no resume, no pruning
  std::string checkpoint_marker = "COMPLETE";
  std::string checkpoint_request_file;  // "" : none; default DIR/.preflight-checkpoint-request
  uint64_t keep_checkpoints = 0;
  std::string heartbeat_file;
  std::string result_file;              // extra copy of the result JSON for the user
  // Requeue policy.
  bool requeue = true;
  uint64_t max_requeues = 3;
  uint64_t max_failure_restarts = 2;
  double grace_s = 90;
  double kill_wait_s = 10;
  std::vector<int> preempt_signals;
  int checkpoint_signal = 0;
  std::vector<RetryClass> retry_classes;
  // Stall watch.
  StallOptions stall;
  bool stall_restart = false;
  std::string alert_hook;
  // GPU samples for the stall watch. Null: RunJob opens NVML (nvml_library)
  // for the job's GPUs (SLURM_JOB_GPUS) when stall.gpu_s > 0. Not owned.
  GpuUtilSource* gpu = nullptr;
  double gpu_sample_s = 5;
};

// The wrapper's options that mirror a run_* config key, and the user-only
// ones. Values are kept as text and applied in ResolveRunPolicy so that one
// parser (the config key table) validates both origins.
struct RunCli {
  std::vector<std::pair<std::string, std::string>> key_overrides;  // filled by ResolveRunPolicy
  std::string checkpoint_dir, checkpoint_request_file, heartbeat_file, result_file;
};
void AddRunOptions(po::options_description& desc, RunCli& cli);

// Config (already with --set applied) + the parsed command line -> policy.
// Errors name the option or key: "--max-requeues 'x': bad count 'x'".
Expected<RunPolicy> ResolveRunPolicy(const Config& cfg, const po::variables_map& vm, const RunCli& cli);

// --- pieces RunJob is made of, public for tests ---

// Per-job requeue counters, kept in CHECKPOINT_DIR/.preflight-run.state so
// preemption and failure requeues are bounded apart. Without a checkpoint
// dir both are SLURM_RESTART_COUNT (the bound is then on all restarts).
struct RunCounters {
  uint64_t preempt_requeues = 0;
  uint64_t failure_restarts = 0;
};
std::string CountersPath(const std::string& checkpoint_dir);
RunCounters LoadCounters(const std::string& path, const std::string& job_id, uint64_t slurm_restarts);
Status SaveCounters(const std::string& path, const std::string& job_id, const RunCounters& c);

// The first retry class matching one of the lines (last lines first); ""
// when none does. `matched` gets the matching line. Bad regexes are errors.
Expected<std::string> ClassifyFailure(const std::vector<std::string>& tail,
                                      const std::vector<RetryClass>& classes, std::string* matched);

// "n[1-3,7],gpu[01-02]" -> n1 n2 n3 n7 gpu01 gpu02.
Expected<std::vector<std::string>> ExpandHostlist(const std::string& s);

// Nodes to exclude after a retryable failure: the job's nodes named in the
// matching output line, plus those preflight has drained (condemned by its
// checks); when that is none, the node this wrapper runs on.
std::vector<std::string> CondemnedNodes(const std::string& matched_line, const std::vector<std::string>& job_nodes,
                                        const std::vector<std::string>& drained_by_preflight,
                                        const std::string& self);

enum class RunAction { kExit, kRequeue };
struct RunDecision {
  RunAction action = RunAction::kExit;
  std::string kind;         // "preemption", "failure:nccl", "stall:output", "done", "user-error", ...
  std::string reason;       // one line for the job output
  bool exclude_nodes = false;
  std::string matched_line;
};
RunDecision Decide(const SuperviseResult& r, const RunPolicy& p, const RunCounters& c, bool in_slurm);

// Exit status of preflight-run after it requeued the job: the batch script
// should stop (EX_TEMPFAIL).
inline constexpr int kRequeuedExit = 75;

// Run argv under `p` in the job described by env (SLURM_JOB_ID,
// SLURMD_NODENAME, SLURM_RESTART_COUNT, SLURM_JOB_NODELIST). Returns the
// exit status for preflight-run: the command's, kRequeuedExit after a
// requeue, 127 when it cannot be started, 2 for a bad policy.
int RunJob(const Config& cfg, const RunPolicy& p, const EnvMap& env, const std::vector<std::string>& argv);

}  // namespace preflight
