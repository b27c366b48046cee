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
#include "preflight/placement.h"
#include "preflight/topo.h"

namespace preflight {

// One result per pinned GPU; skipped when topo_expect is empty or the node
// has no topology (CPU node, no hwloc data).
std::vector<CheckResult> CheckPairing(const CheckEnv& env);

}  // namespace preflight
