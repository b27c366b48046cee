// gpu.bandwidth: the bandwidth tier on the node (issue 13, item 4).
//
// With the CUDA runtime present (dlopen'ed, as the NCCL backend does; a CPU
// node without it skips, saying why), at the full level (prolog of a
// --nccl-check=full job, epilog after such a job failed): per GPU the
// host-to-device and device-to-host copy bandwidth (pinned memory,
// cudaMemcpy), and per GPU pair that can reach each other the peer copy
// bandwidth (cudaMemcpyPeer), each held against bw_min_fraction of the
// per-direction peak of the GPU's profile (bw_profile, or matched from the
// NVML name): kBwProfiles below, figures from the vendors' datasheets. The
// intra-node NCCL all-reduce is the collective check's (preflight-nccl(1):
// nccl_min_intra_busbw and its node profiles), not repeated here.
//
// Seams: the measurement (CUDA, GPU only) is separate from the judgement
// (JudgeBandwidth: figures in, results out), which is what the CPU tests
// exercise; tests/gpu/run_gpu_checks.sh runs the whole tier on a GPU machine.
#pragma once

#include <string>
#include <vector>

#include "preflight/checks.h"
#include "preflight/dl_library.h"  // CudaRuntimeNames: the runtimes tried, in order

namespace preflight {

struct BwProfile {
  const char* name;     // "H100"
  const char* match;    // substring of the NVML device name
  double h2d_peak;      // bytes/s per direction, host link
  double p2p_peak;      // bytes/s per direction, GPU to GPU (NVLink, or PCIe)
  const char* source;   // where the peaks come from
};
const std::vector<BwProfile>& BwProfiles();

// By name ("H100") or, for "auto", the first whose match is in gpu_name.
const BwProfile* FindBwProfile(const std::string& name, const std::string& gpu_name);

struct BwSample {
  std::string kind;  // "h2d", "d2h", "p2p"
  int gpu = 0, peer = -1;
  double bytes = 0, seconds = 0;
  std::string error;  // a CUDA call failed: what and why
  double rate() const { return seconds > 0 ? bytes / seconds : 0; }
};
std::vector<CheckResult> JudgeBandwidth(const BwProfile& p, double min_fraction, const std::vector<BwSample>& s);

std::vector<CheckResult> CheckBandwidth(const CheckEnv& env);

}  // namespace preflight
