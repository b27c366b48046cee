// main() of preflight-prolog (prolog/prolog_main.cc), preflight-epilog
// (epilog/epilog_main.cc) and preflight-healthcheck
// (prolog/healthcheck_main.cc): the command line, the environment slurmd
// gives, the exit code Slurm reads. What a phase runs and decides is in
// node_phase.h; this only reads inputs, calls it, prints and hands the
// drain, comment and resume to slurmctld.
//
// Exit codes: 0 all checks passed or skipped; 1 a check failed (Slurm drains
// the node; prolog: the batch job is requeued); 2 usage or config error
// (also non-zero, so a misconfigured node drains rather than runs jobs
// unchecked). Never throws.
#pragma once

#include "preflight/checks.h"

namespace preflight {

int NodeMain(int argc, char** argv, Phase phase);

}  // namespace preflight
