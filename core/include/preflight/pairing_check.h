// The GPU-NIC placement check: the pairing computed from the node's real
// topology must match the one the site pinned in `topo_expect`, so a NIC
// moved to another slot (or a GPU that came back on another bus) is a
// finding, not a silent change of every job's NCCL_IB_HCA.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "preflight/checks.h"
#include "preflight/status.h"
#include "preflight/topo.h"

namespace preflight {

// "0:mlx5_0,1:mlx5_1,2:mlx5_2+mlx5_3": GPU index -> its NIC(s), closest first.
using ExpectedPairing = std::vector<std::pair<int, std::vector<std::string>>>;
Expected<ExpectedPairing> ParseExpectedPairing(const std::string& text);
// The topo_expect line describing `pairing` (what `preflight topo` prints for
// an admin to pin).
std::string ExpectedPairingText(const std::vector<GpuPairing>& pairing);

// Placement only: the pairing with every port taken as usable, so a port
// that is down (the ib checks report it) does not look like a moved card.
std::vector<GpuPairing> PlacementPairing(Topology topo);

// One result per pinned GPU; skipped when topo_expect is empty or the node
// has no topology (CPU node, no hwloc data).
std::vector<CheckResult> CheckPairing(const CheckEnv& env);

}  // namespace preflight
