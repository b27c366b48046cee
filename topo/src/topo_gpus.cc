// The job's and the task's GPUs from Slurm's variables (JobGpusOnNode,
// TaskGpus) and the warning when Slurm's GPUs are missing from the
// topology (GpuGresWarning); see topo.h.
#include "preflight/topo.h"

#include <algorithm>
#include <string>
#include <vector>

#include "preflight/job.h"

namespace preflight {

NodeGpuSet JobGpusOnNode(const NodeGpuInputs& in, const std::vector<int>& task_gpus) {
  NodeGpuSet out;
  std::vector<int> base;
  if (in.have_prolog) {
    base = in.prolog_gpus;
    out.source = "prolog";
  } else if (auto j = in.batch_step && !in.job_gpus.empty() ? ParseIdList(in.job_gpus)
                                                             : Expected<std::vector<int>>(Status::NotFound("")); j) {
    base = *j;
    out.source = "SLURM_JOB_GPUS";
  } else if (auto st = !in.step_gpus.empty() ? ParseIdList(in.step_gpus)
                                             : Expected<std::vector<int>>(Status::NotFound("")); st) {
    base = *st;
    out.source = "SLURM_STEP_GPUS";
  } else {
    out.source = "task";
  }
  base.insert(base.end(), task_gpus.begin(), task_gpus.end());
  std::sort(base.begin(), base.end());
  base.erase(std::unique(base.begin(), base.end()), base.end());
  out.gpus = std::move(base);
  return out;
}

std::string GpuGresWarning(const Topology& topo, const std::string& job_gpus, const std::string& step_gpus) {
  const std::string& text = !job_gpus.empty() ? job_gpus : step_gpus;
  const char* name = !job_gpus.empty() ? "SLURM_JOB_GPUS" : "SLURM_STEP_GPUS";
  if (text.empty() || !topo.gpus.empty()) return "";
  auto ids = ParseIdList(text);
  if (ids && ids->empty()) return "";
  return std::string("Slurm gave this node GPUs (") + name + "=" + text +
         ") but the topology shows none (no NVIDIA or AMD GPU in " + topo.source +
         "): GPU-NIC pairing and the NCCL environment are empty; check the driver and hwloc's PCI view "
         "(`lstopo --whole-io`)";
}

Expected<std::vector<int>> TaskGpus(const std::string& step_gpus, const std::string& job_gpus,
                                    const std::string& cuda_visible, const std::string& visible_name) {
  std::string base_text = !step_gpus.empty() ? step_gpus : job_gpus;
  const char* base_name = !step_gpus.empty() ? "SLURM_STEP_GPUS" : "SLURM_JOB_GPUS";
  auto cvd = cuda_visible.empty() ? Expected<std::vector<int>>(std::vector<int>{}) : ParseIdList(cuda_visible);
  if (base_text.empty()) {
    // No Slurm GPU variables: trust CUDA_VISIBLE_DEVICES only if numeric
    // (UUIDs and MIG names cannot be placed without NVML).
    if (!cvd) return Status::InvalidArgument(visible_name + "='" + cuda_visible + "': " + cvd.status().message());
    return *cvd;
  }
  auto base = ParseIdList(base_text);
  if (!base) return Status::InvalidArgument(std::string(base_name) + "='" + base_text + "': " + base.status().message());
  if (!cvd || cvd->empty() || cvd->size() >= base->size()) return *base;
  bool global = true;
  for (int c : *cvd)
    if (std::find(base->begin(), base->end(), c) == base->end()) global = false;
  if (global) return *cvd;
  std::vector<int> out;
  for (int c : *cvd) {
    if (c < 0 || static_cast<size_t>(c) >= base->size())
      return Status::InvalidArgument(visible_name + "='" + cuda_visible + "': entry " + std::to_string(c) +
                                     " is outside " + base_name + "='" + base_text + "'");
    out.push_back((*base)[static_cast<size_t>(c)]);
  }
  return out;
}

}  // namespace preflight
