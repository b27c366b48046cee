// Node health checks: GPUs through NVML (dlopen'ed), Xid events from the
// kernel log, InfiniBand/RoCE ports from sysfs. All hardware is reached
// through seams: NVML through nvml_library (tests: tests/fakes' fake NVML),
// sysfs and /dev/kmsg through FsRoot (tests: tests/fixtures/sysfs trees).
// Each function is a CheckDescriptor body run by RunChecks in its own child
// under a time budget; results name check, device, value and threshold.
// The other checks have their own headers: ib_counters.h, xid.h, fleet.h,
// dcgm.h, bandwidth.h, pairing_check.h, rails_check.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "preflight/checks.h"
#include "preflight/xid.h"  // gpu.xid, kept in its own file

namespace preflight {

// gpu.nvml, gpu.count, then per GPU (the job's in a prolog that knows them,
// else all): gpu.present, gpu.ecc, gpu.retired_pages, gpu.row_remap,
// gpu.temperature, gpu.throttle, gpu.pcie, gpu.nvlink, gpu.persistence,
// gpu.compute_mode.
std::vector<CheckResult> CheckGpus(const CheckEnv& env);

// ib.present, ib.port (state, phys_state), ib.rate, ib.link_layer,
// ib.flapping (link_downed moving between checks), ib.netdev (RoCE).
std::vector<CheckResult> CheckInterconnect(const CheckEnv& env);

// Names of the set bits of an NVML clock throttle/event reason mask,
// e.g. 0x48 -> "hw_slowdown,hw_thermal".
std::string ThrottleNames(unsigned long long mask);
unsigned long long ThrottleMask(const std::vector<std::string>& names);

}  // namespace preflight
