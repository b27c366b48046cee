// gpu-check: runs preflight's GPU and Xid checks (the production RunChecks
// harness, CheckGpus and CheckXid, NVML dlopen'ed) once on this machine and
// prints one tab-separated line per result:
//   check  device  value  threshold  verdict  message  seconds
// followed by "total SECONDS". Built without Boost or Slurm by
// tests/gpu/run_gpu_checks.sh, which compares the figures with nvidia-smi.
//
//   gpu-check LIBRARY EXPECTED_GPUS STATE_DIR [TIMEOUT_MS [bandwidth]]
// With "bandwidth": the full level's bandwidth tier (gpu.bandwidth: CUDA
// runtime dlopen'ed, H2D/D2H per GPU, P2P per pair) instead.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "preflight/bandwidth.h"
#include "preflight/checks.h"
#include "preflight/health_checks.h"

int main(int argc, char** argv) {
  using namespace preflight;
  if (argc < 4) {
    std::fprintf(stderr, "usage: gpu-check LIBRARY EXPECTED_GPUS STATE_DIR [TIMEOUT_MS]\n");
    return 2;
  }
  Config cfg;
  cfg.nvml_library = argv[1];
  cfg.gpu_count = std::strtoull(argv[2], nullptr, 10);
  cfg.state_dir = argv[3];
  cfg.probe_timeout_ms = argc > 4 ? static_cast<uint32_t>(std::atoi(argv[4])) : 10000;
  JobContext job;
  job.node = "gpu-check";
  FsRoot fs("/");
  bool bandwidth = argc > 5 && std::string(argv[5]) == "bandwidth";
  CheckEnv env{cfg, fs, job, Phase::kHealth, bandwidth ? Level::kFull : Level::kQuick};
  std::vector<CheckDescriptor> ds = {{"gpu", "", Level::kQuick, CheckGpus}, {"gpu.xid", "", Level::kQuick, CheckXid}};
  if (bandwidth) ds = {{"gpu.bandwidth", "", Level::kFull, CheckBandwidth}};
  double t0 = MonotonicSeconds();
  auto rs = RunChecks(env, ds);
  double dt = MonotonicSeconds() - t0;
  for (const auto& r : rs)
    std::printf("%s\t%s\t%s\t%s\t%s\t%s\t%.6f\n", r.check.c_str(), r.device.c_str(), r.value.c_str(),
                r.threshold.c_str(), VerdictName(r.verdict), r.message.c_str(), r.seconds);
  std::printf("total\t%.6f\n", dt);
  return 0;
}
