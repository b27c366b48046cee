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
};

const std::vector<CheckDescriptor>& AllChecks();

// Run every check that applies; each result carries its own duration.
std::vector<CheckResult> RunChecks(const CheckEnv& env);

// Individual checks, exposed for unit tests.
std::vector<CheckResult> CheckScratch(const CheckEnv& env);

// "1.5G" style, for values and thresholds in results.
std::string HumanBytes(double bytes);

}  // namespace preflight
