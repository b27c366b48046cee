// The per-task environment's merge policy: what of an EnvPlan (topo.h) a
// task gets, given what its environment already holds, and the words for
// its record and for --preflight-env=show. The plugin (spank_env.cc) only
// reads the task's variables, applies the decision and writes the record.
//
// "User-set" and our own earlier values: a batch step's tasks get the
// environment for all the job's GPUs, and its `srun` steps inherit it. So
// the plugin also sets PREFLIGHT_TOPO_ENV listing NAME=VALUE of what it set
// ("A=x;B=y"); a later step recomputes a variable whose value still equals
// what was set, and leaves alone any variable the user set or changed.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "preflight/topo.h"

namespace preflight {

inline constexpr const char* kTopoEnvMarker = "PREFLIGHT_TOPO_ENV";

// The value recorded for `name` in a marker, or nullopt.
std::optional<std::string> MarkerValue(const std::string& marker, const std::string& name);

// The task's environment as the merge sees it: a variable's value, or
// nullopt when the task does not have it.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

struct EnvMerge {
  std::vector<EnvVar> set;          // to set (overwrite): unset, or still our earlier value
  std::vector<EnvVar> kept;         // left alone: the user's (or an image's) value
  std::vector<std::string> remove;  // ours from an earlier step, not planned now
  bool marker_found = false;        // the task's environment has a marker
};
EnvMerge MergeEnv(const EnvPlan& plan, const EnvLookup& current);

// A kept variable the task got after the step was submitted: its value
// now differs from the step's environment as slurmstepd received it (or
// the step had none). With pyxis that is the container image's ENV, which
// pyxis's task_init imported; without a container, a TaskProlog or a
// plugin that ran earlier. preflight leaves it alone (the image may know
// best) and says so, once per step, with the pyxis option that lets the
// job's own value, and so preflight's, win.
struct LateEnv {
  std::string name;
  std::string found;     // the task's value now
  std::string computed;  // what preflight planned for the task
};
std::vector<LateEnv> LateEnvValues(const EnvPlan& plan, const EnvMerge& merge, const EnvLookup& submitted);
// "preflight: on NODE the container image sets NCCL_IB_HCA=mlx5_0 where
// preflight computed mlx5_0:1,mlx5_2:1 for this task, and left it; to let
// preflight's value win, run with --container-env=NCCL_IB_HCA" (one line
// per variable; values cut to 200 bytes, printable), then one line naming
// every variable in one --container-env. `container`: the task is known to
// run in a container (its mount namespace is not slurmstepd's); else the
// words name every possible source and the pyxis option as a hint.
std::string LateEnvText(const std::vector<LateEnv>& late, const std::string& node, bool container);

// One task's plan: its GPUs from the task's Slurm and visible-devices
// variables (TaskGpus: CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES or
// HIP_VISIBLE_DEVICES, the first the task has), the job's GPUs on the node
// (JobGpusOnNode), then ComputeEnv. With `rails_error` (the site's
// topo_rails names a NIC the node lacks) or GPUs that cannot be told (e.g.
// CUDA_VISIBLE_DEVICES=GPU-<uuid> set outside GRES), nothing is planned and
// every variable's reason says why.
struct TaskEnvPlan {
  EnvPlan plan;
  std::string node_gpus_from;  // JobGpusOnNode's source ("" when not computed)
};
TaskEnvPlan PlanTaskEnv(const Topology& topo, const std::vector<GpuPairing>& pairing, const EnvPolicy& policy,
                        const NodeGpuInputs& node_gpus, const std::string& rails_error, const EnvLookup& env);

// The marker after applying `applied` (what was actually set).
std::string MarkerFor(const std::vector<EnvVar>& applied);

// One task's record: one JSON line in <state_dir>/jobs/<job>/<node>.env.jsonl.
struct EnvTaskRecord {
  std::string node, step, topology_source, node_gpus_from;
  int64_t task = 0;
  double load_seconds = 0, env_seconds = 0;
  const EnvPlan* plan = nullptr;
  std::vector<EnvVar> set, kept;
};
std::string EnvRecordLine(const EnvTaskRecord& r);  // ends in '\n'

// The --preflight-env=show lines of one task ("preflight-env: n1 task 0 ...");
// the reasons for what was not set only when `with_reasons` (local task 0).
std::string EnvShowText(const EnvTaskRecord& r, bool with_reasons);

}  // namespace preflight
