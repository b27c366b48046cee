// gpu-check: runs preflight's GPU and Xid checks (the production RunChecks
// harness, CheckGpus and CheckXid, NVML dlopen'ed) once on this machine and
// prints one tab-separated line per result:
//   check  device  value  threshold  verdict  message  seconds
// followed by "total SECONDS". Built by CMake (target gpu-check) and carried
// to the GPU machine in the bundle (tests/gpu/bundle.sh);
// tests/gpu/run_gpu_checks.sh compares the figures with nvidia-smi.
//
//   gpu-check LIBRARY EXPECTED_GPUS STATE_DIR [TIMEOUT_MS [MODE [ARG]]]
// MODE "bandwidth": the full level's bandwidth tier (gpu.bandwidth: the CUDA
// runtime ARG, or the cuda_runtime default, dlopen'ed; H2D/D2H per GPU, P2P
// per pair) instead. MODE "dcgm": gpu.dcgm (dcgmi diag -r 1, the
// dcgmi ARG or dcgmi on PATH), bounded by TIMEOUT_MS. MODE "gemm": the
// GEMM soak (gpu.gemm) for ARG seconds (default 10) on every GPU, with the
// CUDA runtime $CUDART and cuBLAS $CUBLAS when set, else their defaults,
// on $GEMM_SIZE x $GEMM_SIZE matrices when set (else gemm_size's default).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "preflight/bandwidth.h"
#include "preflight/checks.h"
#include "preflight/dcgm.h"
#include "preflight/gemm.h"
#include "preflight/gpu_checks.h"
#include "preflight/xid.h"

int main(int argc, char** argv) {
  using namespace preflight;
  if (argc < 4) {
    std::fprintf(stderr, "usage: gpu-check LIBRARY EXPECTED_GPUS STATE_DIR [TIMEOUT_MS [bandwidth|dcgm|gemm [ARG]]]\n");
    return 2;
  }
  Config cfg;
  cfg.nvml_library = argv[1];
  cfg.gpu_count = std::strtoull(argv[2], nullptr, 10);
  cfg.state_dir = argv[3];
  cfg.probe_timeout_ms = argc > 4 ? static_cast<uint32_t>(std::atoi(argv[4])) : 10000;
  std::string mode = argc > 5 ? argv[5] : "";
  if (!mode.empty() && mode != "bandwidth" && mode != "dcgm" && mode != "gemm") {
    std::fprintf(stderr, "gpu-check: unknown mode '%s' (bandwidth, dcgm, gemm)\n", mode.c_str());
    return 2;
  }
  if (argc > 6 && mode == "bandwidth") cfg.cuda_runtime = argv[6];
  if (argc > 6 && mode == "dcgm") cfg.dcgmi = argv[6];
  if (mode == "gemm") {
    cfg.gemm_soak_seconds = argc > 6 ? std::strtoull(argv[6], nullptr, 10) : 10;
    if (const char* v = std::getenv("CUDART"); v && *v) cfg.cuda_runtime = v;  // "": the default
    if (const char* v = std::getenv("CUBLAS"); v && *v) cfg.cublas_library = v;
    if (const char* v = std::getenv("GEMM_SIZE"); v && *v) cfg.gemm_size = std::strtoull(v, nullptr, 10);  // selftest: 64
  }
  if (mode == "dcgm") {  // the health check's sweep at diag level 1, bounded by TIMEOUT_MS
    cfg.dcgm_health_level = 1;
    cfg.dcgm_timeout_ms = cfg.probe_timeout_ms;
  }
  JobContext job;
  job.node = "gpu-check";
  FsRoot fs("/");
  CheckEnv env{cfg, fs, job, Phase::kHealth, mode.empty() ? Level::kQuick : Level::kFull};
  std::vector<CheckDescriptor> ds = {{"gpu", "", Level::kQuick, CheckGpus}, {"gpu.xid", "", Level::kQuick, CheckXid}};
  if (mode == "bandwidth") ds = {{"gpu.bandwidth", "", Level::kFull, CheckBandwidth}};
  if (mode == "dcgm") ds = {{"gpu.dcgm", "", Level::kFull, CheckDcgm}};
  if (mode == "gemm") ds = {{"gpu.gemm", "", Level::kFull, CheckGemm, cfg.probe_timeout_ms}};
  double t0 = MonotonicSeconds();
  auto rs = RunChecks(env, ds);
  double dt = MonotonicSeconds() - t0;
  for (const auto& r : rs)
    std::printf("%s\t%s\t%s\t%s\t%s\t%s\t%.6f\n", r.check.c_str(), r.device.c_str(), r.value.c_str(),
                r.threshold.c_str(), VerdictName(r.verdict), r.message.c_str(), r.seconds);
  std::printf("total\t%.6f\n", dt);
  return 0;
}
