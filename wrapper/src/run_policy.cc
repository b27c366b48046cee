#include "preflight/run_policy.h"

#include <signal.h>

#include <cstring>

#include "preflight/hostlist.h"
#include "preflight/log.h"
#include "preflight/regex.h"
#include "preflight/supervisor.h"

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
    {"ras", "run_ras", "yes|no", "on a stall, ask the job's NCCL RAS which node is behind"},
    {"ras-min-nccl", "run_ras_min_nccl", "VERSION", "oldest NCCL whose RAS is asked"},
    {"watch-gpus", "run_watch_gpus", "DURATION", "with a stall watch, sample every node's GPUs this often (0: off)"},
    {"keep-checkpoints", "run_keep_checkpoints", "K", "keep the newest K complete checkpoints (0: all)"},
    {"checkpoint-marker", "run_checkpoint_marker", "NAME", "file that marks a checkpoint directory complete"},
};


// The two tiers' part of the policy (issue 30): the shared tier, the
// convention, the resume check, and the local dir a tier needs.
Status ResolveTiers(const Config& cfg, const po::variables_map& vm, const RunCli& cli, RunPolicy& p) {
  if (!cli.convention.empty()) {
    auto c = ParseCkptConvention(cli.convention);
    if (!c) return Status::InvalidArgument("--checkpoint-convention '" + cli.convention + "': " + c.status().message());
    p.convention = *c;
  }
  if (!cli.verify_resume.empty()) {
    auto v = ParseCkptVerify(cli.verify_resume);
    if (!v) return Status::InvalidArgument("--verify-resume '" + cli.verify_resume + "': " + v.status().message());
    p.verify_resume = *v;
  }
  const bool given = vm.count("persist-to") > 0;
  std::string tier = given ? cli.persist_to : cfg.ckpt.persist_to;
  const std::string origin = given ? "--persist-to '" + cli.persist_to + "'" : "ckpt_persist_to '" + tier + "'";
  auto expanded = ExpandTierPath(tier, cli.user, origin);
  if (!expanded) return expanded.status();
  tier = *expanded;
  if (!tier.empty() && p.checkpoint_dir.empty()) {
    if (!cli.ckpt_local.empty()) {
      p.checkpoint_dir = cli.ckpt_local;
    } else if (given) {
      return Status::InvalidArgument(
          origin + ": a shared tier needs a node-local checkpoint dir: give --checkpoint-dir, or ask the site "
                   "for ckpt_dir (the prolog's $PREFLIGHT_CKPT_LOCAL); --persist-to none turns persisting off");
    } else {
      tier.clear();  // the site's default tier, and no local dir: as before the two tiers
    }
  }
  p.persist_to = tier;
  return Status::Ok();
}

}  // namespace

Expected<std::string> ExpandTierPath(std::string tier, const std::string& user, const std::string& origin) {
  if (tier == "none") return std::string();
  bool missing = false;
  tier = ReplacePercent(tier, 'u', user, &missing);
  if (missing) return Status::InvalidArgument(origin + ": %u but the user's name is unknown");
  while (tier.size() > 1 && tier.back() == '/') tier.pop_back();
  if (!tier.empty() && tier[0] != '/') return Status::InvalidArgument(origin + ": not an absolute path");
  return tier;
}

std::string ReplacePercent(const std::string& s, char c, const std::string& value, bool* missing) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 1 < s.size() && s[i + 1] == c) {
      if (value.empty()) *missing = true;
      out += value;
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

void AddRunOptions(po::options_description& desc, RunCli& cli) {
  desc.add_options()
      ("checkpoint-dir", po::value<std::string>(&cli.checkpoint_dir)->value_name("DIR"),
       "one subdirectory per checkpoint; the newest complete one is exported as PREFLIGHT_RESUME_FROM")
      ("checkpoint-request-file", po::value<std::string>(&cli.checkpoint_request_file)->value_name("PATH"),
       "file created when a checkpoint is wanted (default DIR/.preflight-checkpoint-request)")
      ("heartbeat-file", po::value<std::string>(&cli.heartbeat_file)->value_name("PATH"),
       "file COMMAND touches as it progresses (for --stall-heartbeat)")
      ("result", po::value<std::string>(&cli.result_file)->value_name("FILE"),
       "also write the result JSON here")
      ("persist-to", po::value<std::string>(&cli.persist_to)->value_name("DIR"),
       "make complete checkpoints durable on this shared tier while the job runs (%u: your user name; "
       "none: off) [site: ckpt_persist_to]")
      ("checkpoint-convention", po::value<std::string>(&cli.convention)->value_name("NAME"),
       "how a checkpoint is known complete: marker (default), dcp, torchtitan, megatron, deepspeed, nemo")
      ("verify-resume", po::value<std::string>(&cli.verify_resume)->value_name("LEVEL"),
       "check of a shared-tier checkpoint before resuming from it: sizes (default), sample, full");
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
  p.checkpoint_dir_arg = cli.checkpoint_dir;
  bool no_node = false;
  p.checkpoint_dir = ReplacePercent(cli.checkpoint_dir, 'n', cli.node, &no_node);
  if (no_node) return Status::InvalidArgument("--checkpoint-dir '" + cli.checkpoint_dir + "': %n but no node name");
  if (p.checkpoint_dir != cli.checkpoint_dir) {
    Status v = ValidNodeName(cli.node);  // %n makes the node name a path component
    if (!v.ok()) return v.Context("--checkpoint-dir '" + cli.checkpoint_dir + "'");
  }
  while (p.checkpoint_dir.size() > 1 && p.checkpoint_dir.back() == '/') p.checkpoint_dir.pop_back();
  if (Status t = ResolveTiers(cfg, vm, cli, p); !t.ok()) return t;
  p.checkpoint_marker = cfg.run.checkpoint_marker;
  if (p.checkpoint_marker.empty() || p.checkpoint_marker.find('/') != std::string::npos)
    return Status::InvalidArgument("checkpoint marker '" + p.checkpoint_marker + "': must be a plain file name");
  p.checkpoint_request_file = cli.checkpoint_request_file;
  if (p.checkpoint_request_file.empty() && !p.checkpoint_dir.empty())
    p.checkpoint_request_file = p.checkpoint_dir + "/.preflight-checkpoint-request";
  p.keep_checkpoints = cfg.run.keep_checkpoints;
  if (p.keep_checkpoints > 0 && p.checkpoint_dir.empty())
    return Status::InvalidArgument("--keep-checkpoints " + std::to_string(p.keep_checkpoints) + " needs --checkpoint-dir");
  p.heartbeat_file = cli.heartbeat_file;
  p.result_file = cli.result_file;
  p.requeue = cfg.run.requeue;
  p.max_requeues = cfg.run.max_requeues;
  p.max_failure_restarts = cfg.run.max_failure_restarts;
  p.grace_s = cfg.run.grace_ms / 1000.0;
  p.kill_wait_s = cfg.run.kill_wait_ms / 1000.0;
  auto sigs = ParseSignalList(cfg.run.preempt_signals);
  if (!sigs) return sigs.status().Context("preempt signals");
  p.preempt_signals = *sigs;
  auto ck = ParseSignal(cfg.run.checkpoint_signal);
  if (!ck) return ck.status().Context("checkpoint signal");
  if (*ck == SIGUSR1)
    Log(LogLevel::kInfo, "run", "checkpoint signal SIGUSR1", "NCCL uses SIGUSR1 internally; USR2 is safer");
  p.checkpoint_signal = *ck;
  if (p.checkpoint_signal == 0 && p.checkpoint_request_file.empty() && !p.preempt_signals.empty())
    return Status::InvalidArgument(
        "checkpoint signal 'none' and no checkpoint request file: preemption could not reach the command");
  for (const auto& c : {RetryClass{"nccl", cfg.run.retry_nccl}, RetryClass{"cuda", cfg.run.retry_cuda},
                        RetryClass{"node", cfg.run.retry_node}}) {
    if (c.pattern.empty()) continue;
    auto re = Regex::Compile(c.pattern);
    if (!re) return re.status().Context("retry class " + c.name);
    p.retry_classes.push_back(c);
  }
  p.stall.output_s = cfg.run.stall_output_ms / 1000.0;
  p.stall.heartbeat_s = cfg.run.stall_heartbeat_ms / 1000.0;
  if (p.stall.heartbeat_s > 0 && p.heartbeat_file.empty())
    return Status::InvalidArgument("--stall-heartbeat needs --heartbeat-file");
  p.stall.gpu_s = cfg.run.stall_gpu_ms / 1000.0;
  p.stall.gpu_idle_percent = static_cast<unsigned>(std::min<uint64_t>(cfg.run.gpu_idle_percent, 100));
  p.stall.nan_pattern = cfg.run.nan_pattern;
  auto w = StallWatch::Create(p.stall, 0);  // validates the NaN regex
  if (!w) return w.status();
  p.stall_restart = cfg.run.stall_restart;
  p.alert_hook = cfg.run.alert_hook;
  p.ras = cfg.run.ras;
  p.ras_min_nccl = cfg.run.ras_min_nccl;
  p.watch_gpus_s = cfg.run.watch_gpus_ms / 1000.0;
  return p;
}

}  // namespace preflight
