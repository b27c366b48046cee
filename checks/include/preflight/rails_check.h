// The topo.rails check (rails.h has the signature it is built on).
#pragma once

#include <vector>

#include "preflight/checks.h"

namespace preflight {

// Check topo.rails (prolog, quick): every compute rail of this node is
// usable; a down one fails, naming it and the GPUs it serves. Root-run,
// from this node's own sysfs.
std::vector<CheckResult> CheckRailsUp(const CheckEnv& env);

}  // namespace preflight
