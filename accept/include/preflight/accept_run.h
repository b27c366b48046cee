// The acceptance run's orchestration: which steps run, in what order, within
// what budget, and what their output means. The commands themselves (srun,
// preflight-nccl, preflight-prolog, the storage worker) run through a Runner
// the shell passes in (admin/accept_cmd.cc: core's RunCommand), so the order,
// the budgets, the parsing and the handling of a lost node are unit-tested
// with a scripted Runner and no Slurm.
//
// Stages, each with its own budget (a step that would start past it is
// skipped and said so):
//   nodes       the node checks (preflight-prolog --level L, never draining)
//               on every node at once; the fleet comparison (preflight fleet)
//   collective  intra-node on every node, then 2, 4, 8, ... and N nodes
//               (preflight-nccl --json, data verified), then the ring pairs
//               (--scope pairs --records, measured again for the nodes the
//               straggler rule names)
//   storage     each path from every node at once, then from one node alone
//               (preflight accept --storage-worker)
//   train       a training command on every node at once, bounded, its
//               progress lines sampled by a tap (preflight accept
//               --train-tap; accept_train.h)
// A node that stops answering (slurmctld's record says down, not responding
// or failing after a failed step; `preflight slurm nodes`) is named and left
// out of the later steps.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "preflight/accept_report.h"
#include "preflight/process.h"
#include "preflight/status.h"

namespace preflight::accept {

struct RunOptions {
  std::string level = "quick";              // quick | full
  std::vector<std::string> nodes;           // the allocation, in ring order
  std::string job_id;
  std::vector<std::string> storage_paths;
  Thresholds thresholds;
  std::string tool_version;
  // Programs (absolute paths beside this binary, or names searched in PATH).
  std::string srun = "srun";
  std::string preflight = "preflight", nccl = "preflight-nccl", prolog = "preflight-prolog";
  std::string preflight_run = "preflight-run";
  std::vector<std::string> pass_args;       // --config/--set, given to every preflight program
  int ranks_per_node = 0;                   // 0: srun's default (one per node)
  std::string max_bytes;                    // preflight-nccl --max-bytes ("" the level's)
  std::string storage_bytes;                // storage worker --storage-bytes ("" the level's)
  int storage_files = 0;                    // ... --storage-files (0 the level's)
  std::string storage_runtime;              // ... --storage-runtime seconds ("" the level's)
  std::string tag;                          // the storage workers' private directory suffix
  // state_dir for the user-run node checks and the fleet comparison: the
  // checks record versions and results there, never in the site's state_dir
  // (root's); under --out, which the nodes should share. Removed after the
  // stage. "" leaves the site's.
  std::string node_state_dir;
  double budget_nodes = 0, budget_collective = 0, budget_storage = 0;  // seconds (0: the level's)
  // The training stage (accept_train.h): `train` run by /bin/sh -c on every
  // node at once, one task per node, for `train_seconds` (0: the level's,
  // quick 30, full 300); "" skips the stage, saying why (`train_skip`).
  std::string train;
  std::string train_skip;
  double train_seconds = 0;
  double budget_train = 0;                  // 0: the run, the resume run, their graces, 60 s of start-up (DefaultBudgets)
  // The checkpoint round trip through a shared tier (preflight-accept(1)):
  // the tier's absolute path (%u expanded; "" none: each node's round trip
  // stays on its own disk), and the newest checkpoint durable in a folder
  // of it ("" none; the shell's: ckpt's tier listing).
  std::string train_tier;
  // How the command's checkpoints are known complete (preflight-run's
  // --checkpoint-convention; "" or "marker" its default). A framework's own
  // (dcp, torchtitan, megatron, deepspeed, nemo) needs the whole node set:
  // through a shared tier only; without one there is no round trip.
  std::string train_convention;
  std::function<Expected<std::string>(const std::string& dir)> newest_durable;
};

// The budgets of a level in seconds: quick 300/600/600, full 1200/1800/1800;
// the training run's bound (quick 30, full 300) and its budget (bound + 90).
void DefaultBudgets(RunOptions* o);

using Runner = std::function<ProcessResult(const std::vector<std::string>& argv, unsigned timeout_ms)>;
using Progress = std::function<void(const std::string& line)>;

// Node counts of the curve: 2, 4, 8, ... below n, and n (none for n < 2).
std::vector<int> NodeCounts(int n);

// Run every stage and judge (Judge is called). Never throws.
Report RunAccept(const RunOptions& o, const Runner& run, const Progress& progress);

// --out: a directory that does not exist is created; one that holds nothing
// or only a previous report (report.json, report.html) is used as is; one
// that holds other files is left alone and a new subdirectory
// DIR/preflight-accept-TAG is used instead, `note` saying so. `used` is the
// directory to write to.
Status PrepareOutDir(const std::string& dir, const std::string& tag, std::string* used, std::string* note);

// Parse preflight-nccl's --json document (one sweep) into a curve.
Status ParseNcclJson(const std::string& text, Curve* c);
// preflight-nccl --ops --json: an array, one document per operation, each
// a curve with its `op` set (the document's "test").
Status ParseNcclOpsJson(const std::string& text, std::vector<Curve>* curves);

}  // namespace preflight::accept
