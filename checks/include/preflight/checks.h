// The node checks: small descriptors run by one harness that times them,
// turns a probe's failure into a verdict, and never lets one check's
// trouble end the run (nccl-tests' "one harness, small descriptors").
#pragma once

#include <string>
#include <vector>

#include "preflight/config.h"
#include "preflight/fsroot.h"
#include "preflight/job.h"
#include "preflight/report.h"

namespace preflight {

enum class Phase { kProlog, kEpilog, kHealth };
const char* PhaseName(Phase p);

struct CheckEnv {
  const Config& cfg;
  const FsRoot& fs;
  const JobContext& job;
  Phase phase;
  Level level;
  bool job_failed = false;  // epilog: the job ended non-zero (deeper checks)
};

struct CheckDescriptor {
  const char* name;
  const char* summary;
  Level min_level;  // runs when env.level >= min_level (health and epilog: quick)
  std::vector<CheckResult> (*run)(const CheckEnv& env);
  unsigned timeout_ms = 0;  // this check's budget; 0: the site's probe_timeout
  // A budget from the site config (e.g. gpu.dcgm: dcgm_timeout plus slack); wins when set.
  unsigned (*budget)(const Config& cfg) = nullptr;
};

const std::vector<CheckDescriptor>& AllChecks();

// Run every check that applies; each result carries its own duration.
// Each check runs in its own forked child, all at once, under its budget: a
// probe that hangs (an NVML call stuck in the driver, a sysfs read on a dying
// device) or crashes fails that check with the step it was in, and the run
// goes on. Results come back over a pipe; what a child wrote before it hung
// is kept. Fork, not threads: a thread stuck in a driver call can't be
// killed, a process can.
std::vector<CheckResult> RunChecks(const CheckEnv& env);
std::vector<CheckResult> RunChecks(const CheckEnv& env, const std::vector<CheckDescriptor>& checks);

// Inside a check: say what it is about to do ("nvmlDeviceGetTemperature" on
// "GPU3 0000:1b:00.0"), so a hang or crash there is reported against that
// device and call. No-op outside RunChecks' children.
void ProbeStep(const std::string& check, const std::string& device, const std::string& what);
// Inside a check: hand a result to the harness now, so it survives a later
// hang in the same check. Returns false outside RunChecks' children (then
// the caller returns it in its vector as usual).
bool ProbeEmit(const CheckResult& r);

// Individual checks, exposed for unit tests.
std::vector<CheckResult> CheckScratch(const CheckEnv& env);

}  // namespace preflight
