// One phase of the node binaries (prolog, epilog, health check), Slurm-free:
// what runs and what it decides. node_main.cc, the shared main of
// preflight-prolog (prolog/prolog_main.cc), preflight-epilog
// (epilog/epilog_main.cc) and preflight-healthcheck
// (prolog/healthcheck_main.cc), reads the command line, the config and the
// environment, calls RunNodePhase, prints the summary and carries out the
// plan's drain, comment and resume through slurmctl.h.
#pragma once

#include <string>
#include <vector>

#include "preflight/checks.h"
#include "preflight/config.h"
#include "preflight/job.h"
#include "preflight/node_ckpt.h"
#include "preflight/node_run.h"
#include "preflight/slurmctl.h"
#include "preflight/stage_job.h"
#include "preflight/status.h"

namespace preflight {

// How a failed prolog or epilog gets preflight's reason on the node.
//   kNone      set_drain_reason=no, or the health check (it drains itself):
//              Slurm's own "Prolog error"/"Epilog error" stays
//   kNow       PrologFlags=RunInJob (24.05+): prolog and epilog run in the
//              job's extern step, which a detached helper may not outlive
//   kDetached  a detached `--finish-drain` helper waits for Slurm's drain,
//              then replaces its generic reason, and only that (Slurm asks
//              prologs not to call Slurm commands; see drain_finisher.h)
enum class DrainMode { kNone, kNow, kDetached };
// `prolog_flags`: slurm.conf's PrologFlags (slurm_conf.h); unreadable counts
// as no RunInJob.
DrainMode PlanDrain(Phase phase, bool set_drain_reason, const Expected<std::vector<std::string>>& prolog_flags);

// The health check's decisions about the node, from this run and the
// node's record in slurmctld.
struct HealthPlan {
  enum class Comment { kKeep, kSet, kClear };
  Comment comment = Comment::kKeep;  // kSet: the run's warnings; kClear: only a comment preflight set
  bool drain = false;   // failed and not drained yet (an admin's drain is never replaced)
  bool resume = false;  // passes and preflight drained it (any version's reason, drain_reason.h)
};
// `node`: nullptr when slurmctld could not be asked (then no drain, no resume).
HealthPlan PlanHealth(bool failed, const std::string& warnings, bool our_comment_set, const NodeState* node);

// A --stage result folded into the prolog's outcome: a node or config
// fault fails the prolog with a "stage" drain reason (drain_reason.h); a
// user fault fails only the job. Returns the line to log when the job fails
// and the node stays in service ("" otherwise).
std::string FoldStageResult(const StageJobResult& st, NodeRunOutcome* out);

// The prolog's checkpoint folder (node_ckpt.h: MakeCkptJobDir) folded in
// the same way: the site's (kConfig) or the node's (kNode) fault fails
// the prolog with a "ckpt" drain reason; a user's only loses the folder.
// Returns the line to log when the node stays in service ("" otherwise).
std::string FoldCkptDirResult(const CkptDirResult& c, NodeRunOutcome* out);

// The phase's work, in order: the epilog's stage cleanup, its finishing
// copy of the job's checkpoints (node_ckpt.h: never fails the epilog) and
// removal of the job from dcgm_job_map_dir (gpu_job_map.h); the node checks
// (node_run.h); epilog and health: state_dir pruning and stale stage holds;
// prolog on a passing node: --stage, then the job's checkpoint folder
// (ckpt_dir); prolog: the topology cache, rails and
// job GPU records; prolog on a passing node: the job in dcgm_job_map_dir
// for its SLURM_JOB_GPUS; prolog: the summary file for the plugin. What cannot be written
// is logged under `prog`, never fatal. The outcome's summary is for stdout.
NodeRunOutcome RunNodePhase(const Config& cfg, const JobContext& job, Phase phase, const EnvMap& env, const char* prog);

}  // namespace preflight
