// preflight-run's policy: what the wrapper does, from the site config's
// run_* keys and the wrapper's own options (man preflight-run(1)).
//
// Precedence, lowest to highest: built-in defaults < site config (run_*
// keys) < --set KEY=VALUE < the wrapper's own options (--max-requeues ...).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "preflight/ckpt_convention.h"
#include "preflight/ckpt_verify.h"
#include "preflight/cli.h"
#include "preflight/config.h"
#include "preflight/stallwatch.h"

namespace preflight {

struct RetryClass {
  std::string name;     // "nccl", "cuda", "node"
  std::string pattern;  // POSIX ERE (preflight/regex.h)
};

struct RunPolicy {
  // Checkpoints (user's choice, never site policy).
  std::string checkpoint_dir;           // "" : no resume, no pruning (%n already this node's name)
  std::string checkpoint_dir_arg;       // --checkpoint-dir as given ("" when not), for the agent step
  std::string checkpoint_marker = "COMPLETE";
  std::string checkpoint_request_file;  // "" : none; default DIR/.preflight-checkpoint-request
  uint64_t keep_checkpoints = 0;        // with a tier: durable ones kept there (local: ckpt_keep_local)
  // The shared tier (--persist-to, else ckpt_persist_to; %u expanded): ""
  // when none, and then everything above works as before the two tiers.
  std::string persist_to;
  CkptConvention convention = CkptConvention::kMarker;
  CkptVerify verify_resume = CkptVerify::kSizes;
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
  // Hang attribution (hang_probe.h): on a stall alert, ask NCCL RAS at
  // $NCCL_RAS_ADDR (default localhost:28028) which node is behind.
  bool ras = true;
  std::string ras_min_nccl = "2.27.3";
  double ras_interval_s = 5;   // between RAS reports (tests shorten it)
  unsigned ras_polls = 3;
  // The node agent's GPU watch (node_watch.h): seconds between samples, 0: off.
  double watch_gpus_s = 10;
  // GPU samples for the stall watch. Null: RunJob opens NVML (nvml_library)
  // for the job's GPUs (SLURM_JOB_GPUS) when stall.gpu_s > 0. Not owned.
  GpuUtilSource* gpu = nullptr;
  double gpu_sample_s = 5;
  // How RunJob starts the checkpoint agent (run_persist.h): this binary,
  // the site config file and --set overrides it passes on. Empty self: SelfExe().
  std::string self_exe, config_path;
  std::vector<std::string> config_sets;
};

// The wrapper's options that mirror a run_* config key, and the user-only
// ones. Values are kept as text and applied in ResolveRunPolicy so that one
// parser (the config key table) validates both origins.
struct RunCli {
  std::vector<std::pair<std::string, std::string>> key_overrides;  // filled by ResolveRunPolicy
  std::string checkpoint_dir, checkpoint_request_file, heartbeat_file, result_file;
  std::string persist_to, convention, verify_resume;
  bool persist_agent = false;  // the hidden --persist-agent mode (run_persist.h)
  // Filled by main from the environment: this node's name (for %n in
  // --checkpoint-dir), the user's name (for %u in the tier), and
  // $PREFLIGHT_CKPT_LOCAL (the prolog's per-job local folder).
  std::string node, user, ckpt_local;
};
void AddRunOptions(po::options_description& desc, RunCli& cli);

// Config (already with --set applied) + the parsed command line -> policy.
// Errors name the option or key: "--max-requeues 'x': bad count 'x'".
Expected<RunPolicy> ResolveRunPolicy(const Config& cfg, const po::variables_map& vm, const RunCli& cli);

// Every %C in s replaced by `value` (--persist-to's %u, --checkpoint-dir's
// %n); *missing set when there is one and `value` is empty.
std::string ReplacePercent(const std::string& s, char c, const std::string& value, bool* missing);
// A shared tier as written (--persist-to, ckpt_persist_to, preflight
// accept's --train-tier): "none" and "" are "", %u is `user`, a trailing
// '/' is dropped. InvalidArgument, after `origin`, when there is a %u and
// no user name, or the path is not absolute.
Expected<std::string> ExpandTierPath(std::string tier, const std::string& user, const std::string& origin);

}  // namespace preflight
