// One run of the node checks for a prolog, epilog or health check: pick the
// checks for the phase and level, run them, build and write the report.
// The shells only add what is Slurm-shaped (exit codes, drain hand-off).
#pragma once

#include <string>

#include "preflight/checks.h"
#include "preflight/config.h"
#include "preflight/job.h"
#include "preflight/report.h"

namespace preflight {

struct NodeRunOutcome {
  Report report;
  std::string json_path;     // where the report went ("" if it could not be written)
  Status write_status;       // why it could not be written
  bool failed = false;       // some check failed
  std::string drain_reason;  // set when failed
  std::string summary;       // one line per check worth showing, for the job's output
  std::string warnings;      // the warn findings as a node comment ("" when none)
};

// Prolog: level from the job (or site default); off runs nothing.
// Epilog and health: the static checks always (quick), whatever the job asked.
// `extra_checks`/`notes` (e.g. the epilog's stage cleanup) go into the
// report as they are.
NodeRunOutcome RunNode(const Config& cfg, const JobContext& job, Phase phase, bool job_failed,
                       const std::vector<CheckResult>& extra_checks = {},
                       const std::vector<std::pair<std::string, std::string>>& notes = {});

}  // namespace preflight
