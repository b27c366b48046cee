// Severity and ownership of findings, and the site's per-check switch.
//
// Every finding is one of
//   fail  the node is drained (exit 1; the drain reason names it),
//   warn  reported (job output, result file, metric, the node's Comment from
//         the health check) but never drains,
//   info  pass or skipped: shown in the result file, never acted on.
// and is owned by the node (hardware, firmware, configuration) or by the
// user (the job's own fault, e.g. an Xid the NVIDIA catalogue buckets as
// RESTART_APP). A user-owned finding never drains: the policy turns a
// user-owned fail into a warn.
//
// The site silences a false positive without a code change with
// `check_<name> = on|warn|off` (name: a check or result name with '.' as
// '_', e.g. check_gpu_temperature, check_ib_counters). The most specific
// switch wins: gpu.temperature's result looks at check_gpu_temperature, then
// check_gpu. `warn` turns its fails into warns; `off` does not run a check
// (descriptor names) or turns a result into "skipped: off by check_<name>".
// The names and the switch rule are check_names.h; this is the policy
// the harness (check_harness.cc) applies to results.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "preflight/check_names.h"
#include "preflight/report.h"

namespace preflight {

// Apply the site's switches and the ownership rule to a check's results, in
// place. Returns how many results it changed.
int ApplySeverityPolicy(const std::map<std::string, CheckMode>& modes, std::vector<CheckResult>& results);

}  // namespace preflight
