#include "preflight/placement.h"
#include "preflight/strings.h"

namespace preflight {

std::string ExpectedPairingText(const std::vector<GpuPairing>& pairing) {
  std::string s;
  for (const auto& p : pairing) {
    if (p.nics.empty()) continue;
    s += (s.empty() ? "" : ",") + std::to_string(p.gpu) + ":" + Join(p.nics, "+");
  }
  return s;
}

std::vector<GpuPairing> PlacementPairing(Topology topo) {
  for (auto& nic : topo.nics)
    for (auto& port : nic.ports) port.state.clear();  // "unknown" counts as usable
  return PairGpus(topo);
}

}  // namespace preflight
