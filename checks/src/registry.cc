// The registry: every node check, its level and time budget, in the order
// the prolog, epilog and health check run them (checks.h: AllChecks).
#include <algorithm>

#include "preflight/bandwidth.h"
#include "preflight/checks.h"
#include "preflight/dcgm.h"
#include "preflight/fleet.h"
#include "preflight/gemm.h"
#include "preflight/gpu_checks.h"
#include "preflight/ib_checks.h"
#include "preflight/ib_counters.h"
#include "preflight/pairing_check.h"
#include "preflight/rails_check.h"
#include "preflight/xid.h"

namespace preflight {

const std::vector<CheckDescriptor>& AllChecks() {
  static const std::vector<CheckDescriptor> kChecks = {
      {"scratch", "node-local scratch mounted, free space and inodes, writable", Level::kQuick, CheckScratch},
      {"gpu", "GPUs via NVML: count, ECC, retired pages, row remap, temperature, throttling, PCIe, NVLink, modes",
       Level::kQuick, CheckGpus},
      {"gpu.xid", "Xid events in the kernel log since the last check", Level::kQuick, CheckXid},
      {"ib", "HCAs present, ports ACTIVE/LinkUp, rate, link layer, flapping, RoCE netdev", Level::kQuick,
       CheckInterconnect},
      {"ib.counters", "port error counters (symbol_error, link_error_recovery, ...) rising between checks", Level::kQuick,
       CheckIbCounters},
      {"fleet.versions", "driver, VBIOS, HCA firmware and kernel recorded, and the same as this hardware's other nodes",
       Level::kQuick, CheckFleetVersions},
      {"gpu.dcgm", "DCGM's dcgmi diag -r dcgm_level at full level (dcgm_health_level in the health check)", Level::kQuick,
       CheckDcgm, 0, [](const Config& c) { return c.dcgm_timeout_ms + 10000u; }},
      {"gpu.bandwidth", "H2D, D2H and P2P copy bandwidth per GPU against its profile (full level; CUDA dlopen'ed)",
       Level::kFull, CheckBandwidth, 0, [](const Config& c) { return std::max(c.probe_timeout_ms, 120000u); }},
      // The soak itself plus two minutes for loading cuBLAS, copying and hashing.
      {"gpu.gemm", "GEMM soak on every GPU: TFLOPS vs profile and node median, results compared bit for bit, clocks (full level; cuBLAS dlopen'ed)",
       Level::kFull, CheckGemm, 0,
       [](const Config& c) { return static_cast<unsigned>(c.gemm_soak_seconds * 1000 + std::max(c.probe_timeout_ms, 120000u)); }},
      {"topo.pairing", "GPU-NIC placement matches the pinned topo_expect", Level::kQuick, CheckPairing},
      {"topo.rails", "every compute rail (NIC next to a GPU, or named in topo_rails) is up", Level::kQuick,
       CheckRailsUp},
  };
  return kChecks;
}

}  // namespace preflight
