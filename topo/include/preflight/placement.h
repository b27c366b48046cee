// GPU-NIC placement: the pairing as a topo_expect line, and the pairing of
// placement alone (every port taken as usable), so a port that is down
// (the ib checks report it) does not look like a moved card.
#pragma once

#include <string>
#include <vector>

#include "preflight/topo.h"
#include "preflight/topo_expect.h"

namespace preflight {

// The topo_expect line describing `pairing` (what `preflight topo` prints for
// an admin to pin).
std::string ExpectedPairingText(const std::vector<GpuPairing>& pairing);

std::vector<GpuPairing> PlacementPairing(Topology topo);

}  // namespace preflight
