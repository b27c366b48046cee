#include "preflight/collective_run.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "preflight/collective_records.h"
#include "preflight/fileutil.h"
#include "preflight/process.h"
#include "preflight/rails.h"
#include "preflight/report.h"
#include "preflight/slurmctl.h"
#include "preflight/state_paths.h"

namespace preflight::collective {

// --- profiles ------------------------------------------------------------------
// Figures are ~80% of what nccl-tests all_reduce_perf reaches at 1-8 GiB on
// healthy machines of each kind (NVLink/NVSwitch inside, one NIC per GPU
// across nodes), so a healthy node passes and a 1.5x-instead-of-4x node fails.
const std::vector<NodeProfile>& NodeProfiles() {
  static const std::vector<NodeProfile> kProfiles = {
      {"8xH100-nvlink", "H100", 8, 360e9, 300e9},   // NVSwitch, 8x400G NDR
      {"8xH200-nvlink", "H200", 8, 360e9, 300e9},
      {"8xA100-nvlink", "A100", 8, 180e9, 150e9},   // NVSwitch, 8x200G HDR
      {"4xA100-nvlink", "A100", 4, 150e9, 75e9},
      {"4xGH200", "GH200", 4, 120e9, 75e9},
      {"host-tcp", "", 0, 0, 0},                    // no built-in figure: set the keys
  };
  return kProfiles;
}

const NodeProfile* PickProfile(const Config& cfg, BackendKind backend, const GpuInventory& gpus) {
  for (const auto& p : NodeProfiles())
    if (cfg.nccl.profile == p.name) return &p;
  if (cfg.nccl.profile != "auto") return nullptr;
  if (backend == BackendKind::kHost) {
    for (const auto& p : NodeProfiles())
      if (p.gpu_match[0] == '\0') return &p;
  }
  for (const auto& p : NodeProfiles())
    if (p.gpu_match[0] != '\0' && p.gpus == gpus.count && gpus.name.find(p.gpu_match) != std::string::npos) return &p;
  return nullptr;
}

double Threshold(const Config& cfg, const NodeProfile* p, bool intra, std::string* source) {
  double v = intra ? cfg.nccl.min_intra_busbw : cfg.nccl.min_busbw;
  if (v > 0) {
    *source = std::string("config ") + (intra ? "nccl_min_intra_busbw" : "nccl_min_busbw");
    return v;
  }
  if (p && (intra ? p->intra_busbw : p->inter_busbw) > 0) {
    *source = std::string("profile ") + p->name;
    return intra ? p->intra_busbw : p->inter_busbw;
  }
  *source = p ? std::string("profile ") + p->name + " has no figure" : "no profile matches this node";
  return 0;
}

}  // namespace preflight::collective
