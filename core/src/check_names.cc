#include "preflight/check_names.h"

#include <algorithm>

namespace preflight {

const char* CheckModeName(CheckMode m) {
  switch (m) {
    case CheckMode::kOn: return "on";
    case CheckMode::kWarn: return "warn";
    case CheckMode::kOff: return "off";
  }
  return "on";
}

const std::vector<std::string>& SwitchableChecks() {
  // Descriptor names and the result names they produce; a test
  // (checks/test/severity_test.cc) holds this list to both.
  static const std::vector<std::string> kNames = {
      "scratch", "scratch.free", "scratch.inodes", "scratch.writable",
      "gpu", "gpu.nvml", "gpu.count", "gpu.present", "gpu.ecc", "gpu.retired_pages", "gpu.row_remap",
      "gpu.temperature", "gpu.throttle", "gpu.pcie", "gpu.nvlink", "gpu.persistence", "gpu.compute_mode",
      "gpu.xid", "gpu.dcgm", "gpu.bandwidth", "gpu.gemm",
      "ib", "ib.present", "ib.port", "ib.rate", "ib.link_layer", "ib.flapping", "ib.netdev", "ib.counters",
      "fleet.versions", "topo.pairing", "topo.rails",
      // The collective check's straggler rule (collective/straggler.h):
      // on: the check fails and the job is requeued without the node; warn:
      // named only; off: ring pairs are not measured when the check passes.
      "nccl", "nccl.straggler",
  };
  return kNames;
}

std::string CheckKeyName(const std::string& check) {
  std::string k = "check_" + check;
  std::replace(k.begin(), k.end(), '.', '_');
  return k;
}

CheckMode ModeFor(const std::map<std::string, CheckMode>& modes, const std::string& check, std::string* by) {
  std::string name = check;
  for (;;) {
    auto it = modes.find(name);
    if (it != modes.end()) {
      if (by != nullptr) *by = CheckKeyName(name);
      return it->second;
    }
    size_t dot = name.rfind('.');
    if (dot == std::string::npos) return CheckMode::kOn;
    name.resize(dot);
  }
}

}  // namespace preflight
