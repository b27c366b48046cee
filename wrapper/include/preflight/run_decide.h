// preflight-run's decisions after the command ended: requeue or exit, the
// bounded counters, failure classes and the nodes to exclude. Pure
// functions of their inputs, unit-tested.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "preflight/run_policy.h"
#include "preflight/supervisor.h"

namespace preflight {

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

}  // namespace preflight
