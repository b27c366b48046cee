// --stage in the prolog, the epilog and the task: the job's view of its
// staged datasets on one node.
//
// Prolog (root, every node, PrologFlags=Alloc): for each dataset of the
// job's --stage (JobContext::options), StageDataset() into <stage_dir>/cache reading as
// the job user, then a read-only, nosuid, nodev bind mount of the cached
// copy at <stage_dir>/jobs/<job>/<NAME>. The view is built root-owned and
// handed to the user (chown, 0700) only when complete, so the user can't
// swap a mount point for a symlink while root mounts.
//
// Failure policy (Slurm drains the node on any non-zero prolog exit, see
// slurm.conf(5) Prolog, and a drained node is lost to everyone):
//   the user's mistake or the source's trouble -- missing, unreadable,
//     refused symlink, changed while copying, timed out, does not fit on
//     this node (ENOSPC after evicting every unused dataset), staging not
//     enabled here -- fail the JOB, not the node: the prolog exits 0 and
//     writes <state_dir>/jobs/<job>/<node>.stage-error; the plugin's
//     task_init (remote context, before exec) prints it to the job's
//     stderr and refuses to start the task, so the job ends FAILED with
//     the reason in its output and the node stays in service. Most of
//     these are refused earlier, at submission (stage_spec.h).
//   the node's trouble -- local disk EIO/EROFS, mount failure, the cache
//     folder unusable -- returns drain=true: the prolog exits 1, Slurm
//     drains the node with the reason and requeues the job elsewhere.
//   the site's -- a stage_dir chain that others can write or that holds a
//     symlink (MakePrivateDirs) -- owner kConfig: drained once, the reason
//     naming the folder, never used.
//   a user's folder (or link, or file) where a folder of the chain belongs,
//     in a sticky world-writable folder such as /tmp: no one's fault but
//     that user's, so it never drains: set aside untouched beside it
//     (MakePrivateDirs' set_aside), a fresh private folder used, a warning
//     naming the owner in the log and the job's output. A user who keeps
//     racing that fails the job (kUser).
// The classes and what each does are fault.h's one rule.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "preflight/config.h"
#include "preflight/fault.h"
#include "preflight/job.h"
#include "preflight/job_liveness.h"
#include "preflight/report.h"
#include "preflight/stage_cache.h"

namespace preflight {

struct StageJobResult {
  bool requested = false;   // the job asked for --stage
  bool ok = true;
  bool drain = false;       // node or config fault: the prolog must fail
  FaultOwner owner = FaultOwner::kNone;  // who is at fault when !ok (fault.h)
  std::string message;      // "stage <path>: <cause>" when !ok
  std::string summary;      // lines for the job's output
  std::vector<std::pair<std::string, StagedDataset>> datasets;  // name, dataset
  double seconds = 0;
};

// The prolog's part: the datasets of job.options.stage (--stage as the job
// context parsed it; job.stage_error when it did not parse).
StageJobResult StageForJob(const Config& cfg, const JobContext& job);

struct UnstageResult {
  bool requested = false;
  std::vector<CheckResult> checks;  // "stage" (pass, or warn when cleanup failed)
  std::vector<std::pair<std::string, std::string>> notes;  // stage.* for the result JSON
};

// The epilog's part: unmount and remove the view, drop the job's cache
// references, trim the cache to stage_cache_quota, write the node's stage
// metrics (<textfile_dir>/preflight_<node>_stage.prom).
UnstageResult UnstageForJob(const Config& cfg, const JobContext& job);

// Jobs with a slurmstepd on this host: slurmstepd titles itself
// "slurmstepd: [JOB.STEP]" (every release since 2.x), read from
// <proc>/*/cmdline. On an emulated cluster every node shares one /proc, so
// a job alive on any of them counts as alive: that errs on keeping.
std::set<std::string> LiveSlurmJobs(const std::string& proc = "/proc");

// Views and cache holds that look left behind by a job that is gone
// (slurmd was killed, so no epilog ran): a job not in `live` whose view or
// hold is older than stage_timeout + 10 minutes (a prolog may stage that
// long before any slurmstepd exists). What the shell asks slurmctld about.
std::set<std::string> StaleStageJobs(const Config& cfg, const std::set<std::string>& live, double now_epoch);
// Of StaleStageJobs, unmount and release those job_liveness.h lets go
// (MayReleaseStage: slurmctld answered and does not list the job as
// running on this node); the others are kept: without an extern step
// (PrologFlags=Alloc, no Contain) a running job may have no slurmstepd here
// between its steps. Returns one line per stale job, released or kept and why.
std::vector<std::string> ReleaseStaleJobs(const Config& cfg, const std::set<std::string>& live, const SlurmJobs& slurm,
                                          double now_epoch);

// One node's staging as the prolog recorded it: <state_dir>/jobs/<job>/
// <node>.stage.json (state_paths.h), root-written, the record the task
// trusts (never the job's environment) and the epilog reports from.
struct StageRecord {
  bool ok = false;
  uint64_t bytes = 0, files = 0;
  double seconds = 0;
  uint64_t hits = 0, misses = 0;       // datasets served from the cache / copied
  std::vector<std::string> datasets;  // names, as the job sees them
};
// NotFound when no prolog staged there. Releases before this one also
// wrote <node>.stage.kv (key=value) beside the same JSON record, which
// has held every field read here since --stage began, so a job staged by
// an older prolog reads the same; the .stage.kv is no longer read.
Expected<StageRecord> ReadStageRecord(const Config& cfg, const std::string& job_id, const std::string& node);

std::string StageViewDir(const Config& cfg, const std::string& job_id);
std::string StageErrorFile(const Config& cfg, const std::string& job_id, const std::string& node);
StageCacheOptions CacheOptionsFor(const Config& cfg);

// Prometheus text for the stage metrics (exposed for tests).
std::string StagePrometheus(const std::string& node, const std::vector<std::pair<std::string, std::string>>& notes);

}  // namespace preflight
