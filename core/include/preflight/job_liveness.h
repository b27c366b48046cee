// Whether what a job left on a node may be released by a garbage
// collector rather than by the job's own epilog: its stage view and cache
// holds (stage_job.h: ReleaseStaleJobs) and its state_dir records
// (state_paths.h: PruneJobState).
//
// Age and the absence of a slurmstepd only make a job look stale; neither
// proves it gone. With PrologFlags=Alloc and no Contain there is no extern
// step, so an salloc job between steps, or a batch job's non-first node
// before its first srun, has no slurmstepd on the node at all. slurmctld
// decides: the shells that collect (epilog, health check, `preflight cache
// gc` and `state gc`; never a prolog, which may call no Slurm command) ask
// it about the jobs that look stale (slurmctl.h: AskSlurmJobs) and hand its
// answer here as plain sets, so the rule is testable without Slurm.
//
// The rule, one place: a job is released only when slurmctld answered for
// it and does not list it as running here (a job slurmctld does not know
// is gone); a job it was not asked about, or every job when it could not be
// asked, is kept. Keeping errs on the side of the job's data.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace preflight {

struct SlurmJobs {
  bool answered = false;          // false: slurmctld could not be asked; nothing is released
  std::string error;              // why not (for the log)
  std::set<std::string> asked;    // the jobs slurmctld answered for (known or not)
  std::set<std::string> on_node;  // of those, the ones it lists as running on this node
  std::set<std::string> alive;    // of those, the ones not ended (pending, running, completing;
                                  // on any node); holds on_node
};

// Where slurmctld places a job, from its record's state and node list.
enum class JobWhere { kGone, kElsewhere, kHere };
// kGone: an ended state (COMPLETED, CANCELLED, FAILED, TIMEOUT, NODE_FAIL,
// PREEMPTED, BOOT_FAIL, DEADLINE, OUT_OF_MEMORY). kHere: any other state
// (RUNNING, CONFIGURING, COMPLETING, SUSPENDED, a state this list does not
// name) with `node` in `nodes`, or with no node list at all (kept: not
// known to be elsewhere). kElsewhere: pending, or running on other nodes.
JobWhere ClassifyJob(const std::string& state, const std::vector<std::string>& nodes, const std::string& node);
// Record slurmctld's answer for `job` in `s` (a job it does not know: kGone).
void AddAnswer(SlurmJobs* s, const std::string& job, JobWhere where);

// A job's stage view and cache holds on this node may go: answered, and
// not listed as running on this node.
bool MayReleaseStage(const SlurmJobs& s, const std::string& job);
// A job's state_dir records may go: answered, and ended or unknown
// (state_dir may be shared by every node: a job running anywhere keeps it).
bool MayRemoveRecords(const SlurmJobs& s, const std::string& job);
// Why `job` is kept, for the log ("slurmctld lists it as running on this
// node", "slurmctld could not be asked: ..."); "" when nothing keeps it.
// `records`: the state_dir rule (MayRemoveRecords), else the stage one.
std::string KeptBecause(const SlurmJobs& s, const std::string& job, bool records);

}  // namespace preflight
