// main() of preflight-prolog, preflight-epilog and preflight-healthcheck:
// the command line, the environment slurmd gives, the exit code Slurm reads.
//
// Exit codes: 0 all checks passed or skipped; 1 a check failed (Slurm drains
// the node; prolog: the batch job is requeued); 2 usage or config error
// (also non-zero, so a misconfigured node drains rather than runs jobs
// unchecked). Never throws.
#pragma once

#include "preflight/checks.h"

namespace preflight {

int NodeShellMain(int argc, char** argv, Phase phase);

}  // namespace preflight
