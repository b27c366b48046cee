// The NVML-backed GpuUtilSource for preflight-run's GPU stall watch, over
// the dlopen'ed NVML table (preflight/nvml.h). Real NVML on GPU nodes; the
// fake library in tests/fakes behind the same path in tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "preflight/nvml.h"
#include "preflight/stallwatch.h"

namespace preflight {

// Watch the GPUs whose minor numbers (/dev/nvidiaN) are in `minors` (the
// job's SLURM_JOB_GPUS); every GPU when empty. Unavailable when NVML can't
// be loaded or initialised, lacks nvmlDeviceGetUtilizationRates, or none of
// the job's GPUs is found. NVML is initialised once and never shut down.
// NVML loaded and initialised, and the job's GPUs among the node's (the
// same selection as above): shared by the stall watch and the node watch.
struct NvmlJobGpus {
  const NvmlApi* api = nullptr;
  std::vector<nvmlDevice_t> devs;
  std::vector<unsigned> index;  // NVML index of each
};
Expected<NvmlJobGpus> OpenNvmlJobGpus(const std::string& library, const std::vector<int>& minors);

Expected<std::unique_ptr<GpuUtilSource>> OpenNvmlGpuUtil(const std::string& library, const std::vector<int>& minors);

}  // namespace preflight
