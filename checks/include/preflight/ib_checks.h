// InfiniBand / RoCE port checks from sysfs, in checks/src/ib_checks.cc;
// sysfs is reached through FsRoot (tests: tests/fixtures/sysfs trees). The
// error counters have their own header (ib_counters.h).
#pragma once

#include <vector>

#include "preflight/checks.h"

namespace preflight {

// ib.present, ib.port (state, phys_state), ib.rate, ib.link_layer,
// ib.flapping (link_downed moving between checks), ib.netdev (RoCE).
std::vector<CheckResult> CheckInterconnect(const CheckEnv& env);

}  // namespace preflight
