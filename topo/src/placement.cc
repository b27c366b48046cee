#include "preflight/placement.h"

namespace preflight {
namespace {

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

}  // namespace

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
