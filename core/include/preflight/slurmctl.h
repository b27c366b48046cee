// The Slurm controller interactions preflight needs, bounded in time.
//
// Reads: job, step and node records come from `preflight slurm job|steps|
// nodes` (slurmapi/, libslurm) as JSON and are parsed here; never from
// scontrol's text, whose user-written fields (JobName, Command, WorkDir,
// SubmitLine) can hold " NodeList=..." and steer a text search.
// Writes (drain, resume, requeue, job updates) go through `scontrol update`,
// whose output is only its exit status.
//
// Slurm asks prologs not to call Slurm commands (they can block on
// slurmctld); the prolog therefore never calls these directly but starts
// `preflight-prolog --finish-drain` detached (prolog/: drain_finisher.h).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "preflight/config.h"
#include "preflight/job_liveness.h"
#include "preflight/status.h"

namespace preflight {

struct NodeState {
  std::string name;
  std::string state;   // scontrol's State= text, e.g. "IDLE+DRAIN", "MIXED"
  std::string reason;  // as set (Slurm keeps no " [user@time]" in the record)
  bool drain = false;  // NODE_STATE_DRAIN: draining or drained
  bool drained() const { return drain; }
  long long reason_time = 0;  // when the reason was set (Unix seconds; 0: not known)
  std::string addr;    // NodeAddr ("" when not known)
  bool ours() const;   // preflight wrote the reason (drain_reason.h, any version)
};

struct JobRecord {
  std::string job_id;
  std::string state;          // "RUNNING", "COMPLETING", "CANCELLED", ...
  std::string node_list;      // Slurm hostlist, e.g. "n[1-3]"
  std::vector<std::string> nodes;  // expanded, in Slurm's order
  std::string batch_host;
  int restarts = 0;
  std::string admin_comment;  // only an operator (or root) can write it
  std::string exc_node_list;
  std::vector<std::string> required_nodes;  // the nodes the job named (-w), expanded; {} when none
  std::map<std::string, std::string> gres_per_node;  // node -> "gpu:2(IDX:0-1)"
};

struct StepRecord {
  std::string id;    // "12.0", "12.batch", "12.extern"
  std::string step;  // "0", "batch", "extern", "interactive"
  std::vector<std::string> nodes;
};

// The JSON `preflight slurm ...` prints (its last line starting with '{').
Expected<JobRecord> ParseJobRecord(const std::string& output);
Expected<std::vector<StepRecord>> ParseStepRecords(const std::string& output);
Expected<std::vector<NodeState>> ParseNodeRecords(const std::string& output);

// The GPU indexes of a GRES detail string: "gpu:2(IDX:0-1)",
// "gpu:a100:2(IDX:0,2),nic:1(IDX:0)" -> {0,1} / {0,2}; no gpu entry -> {}.
Expected<std::vector<int>> GpuIndexesFromGres(const std::string& gres);

// Steps other than batch/extern/interactive and `self_id` ("12.4"), joined
// with ',' ("" when none).
std::string OtherSteps(const std::vector<StepRecord>& steps, const std::string& self_id);

// NotFound when slurmctld does not know the job (never ran, or ended more
// than MinJobAge ago); any other error when it could not be asked.
Expected<JobRecord> LoadJob(const Config& cfg, const std::string& job);
// What slurmctld says of `jobs` on `node` (job_liveness.h), for the
// collectors of stale leftovers: one `preflight slurm job` each, bounded
// by probe_timeout, at most `limit` of them (the rest are not asked, so
// kept this time); a name that is not a job id is gone without asking.
// The first error other than "no such job" stops: answered = false.
SlurmJobs AskSlurmJobs(const Config& cfg, const std::string& node, const std::set<std::string>& jobs, size_t limit);
Expected<std::vector<StepRecord>> LoadSteps(const Config& cfg, const std::string& job);
Expected<std::vector<NodeState>> LoadNodes(const Config& cfg, const std::string& hostlist);
Expected<NodeState> QueryNode(const Config& cfg, const std::string& node);
// The node with index `nodeid` of step `job`.`step` (node ids come from the
// signed launch credential, the step's node list from slurmctld).
Expected<std::string> StepNode(const Config& cfg, const std::string& job, const std::string& step, uint32_t nodeid);

Status DrainNode(const Config& cfg, const std::string& node, const std::string& reason);
Status ResumeNode(const Config& cfg, const std::string& node);
// The node's Comment (shown by scontrol show node, sinfo -O comment); "" clears it.
Status SetNodeComment(const Config& cfg, const std::string& node, const std::string& comment);

// The reason alone, the node's state untouched (scontrol update Reason=):
// how a drain Slurm made gets preflight's reason (drain_finisher.h).
Status SetNodeReason(const Config& cfg, const std::string& node, const std::string& reason);

Status RequeueJob(const Config& cfg, const std::string& job);
// Slurm accepts ExcNodeList only while the job is pending (after a requeue).
Status SetJobExcludedNodes(const Config& cfg, const std::string& job, const std::string& hostlist);
// After RequeueJob: add `nodes` to the job's ExcNodeList, keeping what is
// there. slurmctld refuses the update until the job is pending again, i.e.
// after every node's epilog, and, when the caller is the batch step (the
// plugin), only after the caller has exited: tried once now, then retried
// by a detached helper for up to two minutes (the time Slurm holds a
// requeued job). Best effort: the drain is what keeps the job off a node.
Status ExcludeNodesWhenPending(const Config& cfg, const std::string& job, const std::vector<std::string>& nodes);
// The GPU indexes slurmctld allocated to `job` on `node` ("0,1,2,3"; ""
// when the job holds none there), from the job record's GRES detail. An
// unreadable record is an error, never "no GPUs" (that would quietly turn
// a root-run GPU check into a host one).
Expected<std::string> JobGpusOn(const Config& cfg, const std::string& job, const std::string& node);
// Steps of `job` running now other than batch/extern/interactive and
// `self` (a step number), joined ("13.4"; "" when none).
Expected<std::string> OtherStepsOf(const Config& cfg, const std::string& job, uint32_t self);
Status SetJobAdminComment(const Config& cfg, const std::string& job, const std::string& comment);
// Nodes among `hostlist` that preflight drained (NodeState::ours()).
Expected<std::vector<std::string>> NodesDrainedByPreflight(const Config& cfg, const std::string& hostlist);

}  // namespace preflight
