// GPU checks through NVML (dlopen'ed; tests: tests/fakes' fake NVML,
// reached through nvml_library), in checks/src/gpu_checks.cc. Each
// function is a CheckDescriptor body run by RunChecks (checks.h) in its own
// child under a time budget; results name check, device, value and
// threshold. The other checks have their own headers: ib_checks.h,
// ib_counters.h, xid.h, fleet.h, dcgm.h, bandwidth.h, pairing_check.h,
// rails_check.h.
#pragma once

#include <string>
#include <vector>

#include "preflight/checks.h"

namespace preflight {

// gpu.nvml, gpu.count, then per GPU (the job's in a prolog that knows them,
// else all): gpu.present, gpu.ecc, gpu.retired_pages, gpu.row_remap,
// gpu.temperature, gpu.throttle, gpu.pcie, gpu.nvlink, gpu.persistence,
// gpu.compute_mode.
std::vector<CheckResult> CheckGpus(const CheckEnv& env);

// Names of the set bits of an NVML clock throttle/event reason mask,
// e.g. 0x48 -> "hw_slowdown,hw_thermal".
std::string ThrottleNames(unsigned long long mask);
unsigned long long ThrottleMask(const std::vector<std::string>& names);

}  // namespace preflight
