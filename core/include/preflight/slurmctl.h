// The few Slurm controller interactions preflight needs, through scontrol
// with a time bound. Slurm asks prologs not to call Slurm commands (they can
// block on slurmctld); the prolog therefore never calls these directly but
// starts `preflight-prolog --finish-drain` detached (see man preflight(7)).
#pragma once

#include <string>
#include <vector>

#include "preflight/config.h"
#include "preflight/status.h"

namespace preflight {

struct NodeState {
  std::string state;   // e.g. "IDLE+DRAIN", "MIXED"
  std::string reason;  // without Slurm's " [user@time]" suffix
  bool drained() const { return state.find("DRAIN") != std::string::npos; }
  bool ours() const;   // reason starts with kDrainPrefix
};

// Parse one line of `scontrol -o show node`.
Expected<NodeState> ParseNodeLine(const std::string& line);

Expected<NodeState> QueryNode(const Config& cfg, const std::string& node);
Status DrainNode(const Config& cfg, const std::string& node, const std::string& reason);
Status ResumeNode(const Config& cfg, const std::string& node);

// Wait (bounded by wait_ms) until Slurm has drained `node` after the failed
// prolog, then replace its generic "Prolog error" with `reason`. If Slurm
// never drains it in time, drain it ourselves: the check did fail.
Status FinishDrain(const Config& cfg, const std::string& node, const std::string& reason, unsigned wait_ms);

// Jobs, for preflight-run. All bounded by probe_timeout.
// One field of `scontrol -o show job J` ("" when absent or "(null)").
Expected<std::string> JobField(const Config& cfg, const std::string& job, const std::string& field);
Status RequeueJob(const Config& cfg, const std::string& job);
// Slurm accepts ExcNodeList only while the job is pending (after a requeue).
Status SetJobExcludedNodes(const Config& cfg, const std::string& job, const std::string& hostlist);
// Nodes among `hostlist` that preflight drained (reason starts with kDrainPrefix).
Expected<std::vector<std::string>> NodesDrainedByPreflight(const Config& cfg, const std::string& hostlist);

}  // namespace preflight
