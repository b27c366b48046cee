// Slurm's hostlist syntax, expanded without libslurm (the wrapper runs in
// the job, where only the environment's SLURM_JOB_NODELIST is at hand).
#pragma once

#include <string>
#include <vector>

#include "preflight/status.h"

namespace preflight {

// "n[1-3,7],gpu[01-02]" -> n1 n2 n3 n7 gpu01 gpu02.
Expected<std::vector<std::string>> ExpandHostlist(const std::string& s);

}  // namespace preflight
